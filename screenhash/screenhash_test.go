package screenhash_test

import (
	"bytes"
	"image"
	"image/color"
	"image/draw"
	"image/jpeg"
	"image/png"
	"math/rand/v2"
	"testing"

	"github.com/leasehold/leasehold/screenhash"
)

func encodePNG(t testing.TB, img image.Image) []byte {
	t.Helper()
	var buf bytes.Buffer
	// Best speed: the tests encode many screens, and how well the PNG is
	// compressed does not change its pixels.
	enc := png.Encoder{CompressionLevel: png.BestSpeed}
	if err := enc.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func encodeJPEG(t testing.TB, img image.Image, quality int) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := jpeg.Encode(&buf, img, &jpeg.Options{Quality: quality}); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// decodeHash hashes an encoded screenshot the way production does.
func decodeHash(t testing.TB, data []byte) uint64 {
	t.Helper()
	h, err := screenhash.Decode(bytes.NewReader(data), screenW*screenH)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func TestStatusBarIsIgnored(t *testing.T) {
	t.Parallel()
	for _, l := range layouts {
		t.Run(l.name, func(t *testing.T) {
			t.Parallel()
			a, b := render(l, morning), render(l, noon)
			below := a.PixOffset(0, statusBarH)
			if bytes.Equal(a.Pix[:below], b.Pix[:below]) || !bytes.Equal(a.Pix[below:], b.Pix[below:]) {
				t.Fatal("the two screenshots should differ in the status bar and only there")
			}

			// Without the crop the clock and icons alone change the
			// hash, so a distance of 0 below is the crop's doing.
			whole := screenhash.Distance(screenhash.OfWholeImage(a), screenhash.OfWholeImage(b))
			if whole == 0 {
				t.Error("hashing the whole image, the two status bars hash the same; the test would pass without the crop")
			}

			got := screenhash.Distance(decodeHash(t, encodePNG(t, a)), decodeHash(t, encodePNG(t, b)))
			t.Logf("%s with another clock: distance %d, %d without the crop", l.name, got, whole)
			if got != 0 {
				t.Errorf("the same screen with another clock is %d bits away, want 0", got)
			}
		})
	}
}

func TestJPEGIsSimilarToPNG(t *testing.T) {
	t.Parallel()
	for _, l := range layouts {
		t.Run(l.name, func(t *testing.T) {
			t.Parallel()
			img := render(l, morning)
			lossless := decodeHash(t, encodePNG(t, img))
			lossy := decodeHash(t, encodeJPEG(t, img, 75))
			d := screenhash.Distance(lossless, lossy)
			t.Logf("%s as PNG and as JPEG quality 75: distance %d", l.name, d)
			if d > screenhash.Similar {
				t.Errorf("PNG and JPEG of one screen are %d bits apart, more than Similar (%d)", d, screenhash.Similar)
			}
		})
	}
}

func TestDifferentScreensAreFarApart(t *testing.T) {
	t.Parallel()
	hashes := make([]uint64, len(layouts))
	for i, l := range layouts {
		// Different moments too, so that only the screens differ in
		// what is hashed.
		hashes[i] = decodeHash(t, encodePNG(t, render(l, []statusBar{morning, noon}[i%2])))
	}
	for i := range layouts {
		for j := i + 1; j < len(layouts); j++ {
			d := screenhash.Distance(hashes[i], hashes[j])
			t.Logf("%s vs %s: %d", layouts[i].name, layouts[j].name, d)
			if d <= screenhash.Similar {
				t.Errorf("%s and %s are %d bits apart, within Similar (%d)", layouts[i].name, layouts[j].name, d, screenhash.Similar)
			}
		}
	}
}

// toPaletted returns src as an image of its own colours, which must be
// at most 256. (draw's own conversion tries every palette entry for every
// pixel, seconds for a screen.)
func toPaletted(src *image.NRGBA) *image.Paletted {
	dst := image.NewPaletted(src.Bounds(), nil)
	index := map[color.NRGBA]uint8{}
	for i := 0; i < len(src.Pix); i += 4 {
		c := color.NRGBA{src.Pix[i], src.Pix[i+1], src.Pix[i+2], src.Pix[i+3]}
		k, ok := index[c]
		if !ok {
			k = uint8(len(dst.Palette))
			index[c] = k
			dst.Palette = append(dst.Palette, c)
		}
		dst.Pix[i/4] = k
	}
	return dst
}

// atOnly hides an image's type, so that Of reads it through At.
type atOnly struct{ image.Image }

func TestFastPathsMatchAt(t *testing.T) {
	t.Parallel()
	// A screen, and noise: in noise neighbouring pixels differ, so a fast
	// path that reads the wrong pixel changes the cells' sums.
	for _, src := range []*image.NRGBA{render(layouts[2], morning), noise(screenW, screenH)} {
		ycbcr, _, err := image.Decode(bytes.NewReader(encodeJPEG(t, src, 75)))
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := ycbcr.(*image.YCbCr); !ok {
			t.Fatalf("the JPEG decoded as %T, want *image.YCbCr", ycbcr)
		}
		rgba := image.NewRGBA(src.Bounds())
		draw.Draw(rgba, rgba.Bounds(), src, image.Point{}, draw.Src)
		gray := image.NewGray(src.Bounds())
		draw.Draw(gray, gray.Bounds(), src, image.Point{}, draw.Src)

		type subImager interface {
			image.Image
			SubImage(image.Rectangle) image.Image
		}
		for _, img := range []subImager{src, rgba, ycbcr.(*image.YCbCr), gray, toPaletted(src)} {
			// A sub-image too, whose pixels do not start at (0, 0).
			sub := img.SubImage(image.Rect(37, 101, screenW-13, screenH-59))
			for _, m := range []image.Image{img, sub} {
				fast, slow := screenhash.Of(m), screenhash.Of(atOnly{m})
				if fast != slow {
					t.Errorf("%T %v: hash %016x, through At %016x", m, m.Bounds(), fast, slow)
				}
				if fast == 0 {
					t.Errorf("%T %v: hash 0", m, m.Bounds())
				}
			}
		}
	}
}

// noise returns a w×h image of pixels picked at random from 64 colours.
func noise(w, h int) *image.NRGBA {
	rnd := rand.New(rand.NewPCG(1, 2))
	var colours [64]color.NRGBA
	for i := range colours {
		colours[i] = color.NRGBA{uint8(rnd.Uint32()), uint8(rnd.Uint32()), uint8(rnd.Uint32()), 0xff}
	}
	m := image.NewNRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			m.SetNRGBA(x, y, colours[rnd.IntN(len(colours))])
		}
	}
	return m
}

func TestDistance(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		a, b uint64
		want int
	}{
		{0, 0, 0},
		{0xff, 0xff, 0},
		{0, 1, 1},
		{0xf0, 0x0f, 8},
		{0, ^uint64(0), 64},
	} {
		if got := screenhash.Distance(tc.a, tc.b); got != tc.want {
			t.Errorf("Distance(%#x, %#x) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}

func BenchmarkOf(b *testing.B) {
	nrgba := render(layouts[2], morning)
	ycbcr, _, err := image.Decode(bytes.NewReader(encodeJPEG(b, nrgba, 75)))
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name string
		img  image.Image
	}{
		{"NRGBA", nrgba},
		{"YCbCr", ycbcr},
		{"At", atOnly{nrgba}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				screenhash.Of(bc.img)
			}
		})
	}
}
