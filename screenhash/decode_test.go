package screenhash_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"image"
	"image/color"
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/leasehold/leasehold/screenhash"
)

// pngHeader returns the start of a PNG of w×h 8-bit RGBA pixels: the
// signature and the IHDR chunk, and no pixel data.
func pngHeader(w, h uint32) []byte {
	var ihdr [13]byte
	binary.BigEndian.PutUint32(ihdr[0:], w)
	binary.BigEndian.PutUint32(ihdr[4:], h)
	ihdr[8], ihdr[9] = 8, 6 // bit depth 8, colour type RGBA

	b := []byte("\x89PNG\r\n\x1a\n")
	b = binary.BigEndian.AppendUint32(b, uint32(len(ihdr)))
	chunk := append([]byte("IHDR"), ihdr[:]...)
	b = append(b, chunk...)
	return binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(chunk))
}

func TestDecodeRefuses(t *testing.T) {
	t.Parallel()

	t.Run("TooManyPixels", func(t *testing.T) {
		t.Parallel()
		// 100,000 × 100,000 pixels would be 40 GB decoded. The file has
		// no pixel data, so a decode would fail with another error.
		data := pngHeader(100_000, 100_000)
		if _, _, err := image.DecodeConfig(bytes.NewReader(data)); err != nil {
			t.Fatalf("the header does not parse: %v", err)
		}
		_, err := screenhash.Decode(bytes.NewReader(data), screenW*screenH)
		if !errors.Is(err, screenhash.ErrTooLarge) {
			t.Fatalf("got %v, want ErrTooLarge", err)
		}
	})

	t.Run("OneOverTheLimit", func(t *testing.T) {
		t.Parallel()
		img := image.NewNRGBA(image.Rect(0, 0, 100, 200))
		for i := range img.Pix {
			img.Pix[i] = uint8(i * 7)
		}
		data := encodePNG(t, img)
		if _, err := screenhash.Decode(bytes.NewReader(data), 100*200-1); !errors.Is(err, screenhash.ErrTooLarge) {
			t.Errorf("one pixel over the limit: got %v, want ErrTooLarge", err)
		}
		h, err := screenhash.Decode(bytes.NewReader(data), 100*200)
		if err != nil {
			t.Fatalf("at the limit: %v", err)
		}
		if h != screenhash.Of(img) {
			t.Errorf("at the limit: hash %016x, want %016x", h, screenhash.Of(img))
		}
	})

	t.Run("Garbage", func(t *testing.T) {
		t.Parallel()
		_, err := screenhash.Decode(strings.NewReader("this is a log file, not a screenshot"), screenW*screenH)
		if !errors.Is(err, image.ErrFormat) {
			t.Errorf("got %v, want image.ErrFormat", err)
		}
		if err != nil && !strings.HasPrefix(err.Error(), "decoding screenshot: ") {
			t.Errorf("error %q does not say what failed", err)
		}
	})

	t.Run("Truncated", func(t *testing.T) {
		t.Parallel()
		data := encodePNG(t, render(layouts[0], morning))
		_, err := screenhash.Decode(bytes.NewReader(data[:len(data)/2]), screenW*screenH)
		if err == nil || errors.Is(err, screenhash.ErrTooLarge) {
			t.Errorf("half a PNG: got %v, want a decoding error", err)
		}
	})

	t.Run("TooSmall", func(t *testing.T) {
		t.Parallel()
		for _, r := range []image.Rectangle{
			image.Rect(0, 0, 1, 1),
			image.Rect(0, 0, 8, 100), // fewer columns than cells
			image.Rect(0, 0, 100, 8), // 8 rows, but 7 below the status bar
		} {
			img := image.NewNRGBA(r)
			img.Set(0, 0, color.White)
			if h := screenhash.Of(img); h != 0 {
				t.Errorf("Of of %v: %016x, want 0", r, h)
			}
			_, err := screenhash.Decode(bytes.NewReader(encodePNG(t, img)), screenW*screenH)
			if !errors.Is(err, screenhash.ErrTooSmall) {
				t.Errorf("Decode of %v: got %v, want ErrTooSmall", r, err)
			}
		}
		if h := screenhash.Of(&image.NRGBA{}); h != 0 {
			t.Errorf("Of of an empty image: %016x, want 0", h)
		}
		if h := screenhash.Of(image.NewGray(image.Rect(0, 0, 9, 9))); h != 0 {
			t.Errorf("Of of a black 9×9 image: %016x, want 0", h)
		}
	})
}

// gatedReader serves data, but stops once it has served free bytes: it
// says so on entered and waits for release before serving the rest.
type gatedReader struct {
	data    []byte
	free    int
	entered chan<- struct{}
	release <-chan struct{}
	stopped bool
}

func (g *gatedReader) Read(p []byte) (int, error) {
	if len(g.data) == 0 {
		return 0, io.EOF
	}
	if g.free == 0 && !g.stopped {
		g.stopped = true
		g.entered <- struct{}{}
		<-g.release
	}
	if g.free > 0 {
		p = p[:min(len(p), g.free)]
	}
	n := copy(p, g.data)
	g.data = g.data[n:]
	if g.free > 0 {
		g.free -= n
	}
	return n, nil
}

// TestDecodeHoldsASlot is not parallel: it counts the process's decode
// slots, which other tests' Decode calls would take.
func TestDecodeHoldsASlot(t *testing.T) {
	if inUse, total := screenhash.DecodeSlots(); inUse != 0 || total != 2 {
		t.Fatalf("before: %d of %d decode slots in use, want 0 of 2", inUse, total)
	}

	// The header fits in the first 4,096 bytes, which DecodeConfig's
	// buffered reader reads at once; the decode reads past them.
	data := encodePNG(t, render(layouts[2], morning))
	if len(data) < 8192 {
		t.Fatalf("the PNG is %d bytes; the test needs it to outlast the header", len(data))
	}

	entered, release := make(chan struct{}), make(chan struct{})
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			r := &gatedReader{data: data, free: 4096, entered: entered, release: release}
			if _, err := screenhash.Decode(r, screenW*screenH); err != nil {
				t.Error(err)
			}
		})
	}
	<-entered
	<-entered
	if inUse, _ := screenhash.DecodeSlots(); inUse != 2 {
		t.Errorf("while two screenshots decode: %d decode slots in use, want 2", inUse)
	}
	close(release)
	wg.Wait()
	if inUse, _ := screenhash.DecodeSlots(); inUse != 0 {
		t.Errorf("after: %d decode slots in use, want 0", inUse)
	}
}
