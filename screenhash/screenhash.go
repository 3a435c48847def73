// Package screenhash computes a perceptual hash of a phone screenshot, so
// that failures whose last screenshot shows the same screen can be grouped.
//
// The hash is a 64-bit difference hash (dHash): the image is reduced to a
// grid of 9×8 cells of mean luminance, and each bit says whether a cell is
// brighter than its right neighbour. Such a hash survives changes that do
// not change how a screen looks, such as saving it as JPEG rather than
// PNG. It ignores the status bar at the top of the image, whose clock and
// icons differ from one screenshot of a screen to the next.
package screenhash

import (
	"image"
	"image/color"
	"math/bits"
)

// Similar is the largest Distance at which two hashes show the same screen.
//
// On the screens the tests draw, the distance is 0 between screenshots
// that differ only in the status bar, at most 2 between a PNG and a JPEG
// of one screen, and at least 22 between different screens; 8 sits
// between, with room on both sides.
const Similar = 8

// statusBarPercent is how much of the height, in percent, Of drops from
// the top of the image before hashing, so that the status bar's clock,
// battery and notification icons do not take part.
//
// Android's status bar is 24 dp tall. At densities 2.625 to 3.5 that is 63
// to 84 px, which on screens 1920 to 3200 px tall is 2.0% to 4.4% of the
// height; the worst case is 84 px on a 1920 px screen. 6% (rounded up to
// a whole row) covers it with room for a taller bar, such as one that
// makes room for a display cutout, and drops little of the screen below.
const statusBarPercent = 6

const (
	// cols and rows make the grid of cells: 9 across give 8 comparisons
	// per row, and 8 rows of 8 give the 64 bits.
	cols = 9
	rows = 8

	// samples is the number of points read in each direction per cell.
	// Reading a fixed grid of points rather than every pixel keeps a
	// 1080×2400 screenshot to 18,432 reads instead of 2.6 million, and
	// 256 points per cell are enough to average out JPEG noise.
	samples = 16
)

// Of returns the perceptual hash of img, ignoring its status bar.
//
// An image too small to fill the grid (fewer than 9 columns, or fewer than
// 8 rows below the status bar) has no meaningful hash; Of returns 0 for it
// rather than failing, and Decode reports such an image as an error.
func Of(img image.Image) uint64 {
	area, ok := hashArea(img.Bounds())
	if !ok {
		return 0
	}
	return hash(img, area)
}

// Distance returns the number of bits in which a and b differ (their
// Hamming distance): 0 for the same picture, growing as two screens
// differ. Compare it with Similar.
func Distance(a, b uint64) int {
	return bits.OnesCount64(a ^ b)
}

// hashArea returns the part of an image with bounds b that Of hashes: all
// of it but the status bar. It reports false when that part is too small to
// fill the grid. Of and Decode both ask it, so they agree on what is too
// small.
func hashArea(b image.Rectangle) (image.Rectangle, bool) {
	b.Min.Y += (b.Dy()*statusBarPercent + 99) / 100 // rounded up
	if b.Dx() < cols || b.Dy() < rows {
		return image.Rectangle{}, false
	}
	return b, true
}

// hash returns the difference hash of the part area of img. Bit 8r+c is set
// when cell c of row r is brighter than cell c+1 of that row.
func hash(img image.Image, area image.Rectangle) uint64 {
	// The sample points are the centres of a uniform grid of
	// cols×samples by rows×samples sub-cells, so every cell gets the same
	// number of points and the sums compare like means.
	var xs [cols * samples]int
	for i := range xs {
		xs[i] = area.Min.X + int(int64(2*i+1)*int64(area.Dx())/int64(2*len(xs)))
	}
	var ys [rows * samples]int
	for i := range ys {
		ys[i] = area.Min.Y + int(int64(2*i+1)*int64(area.Dy())/int64(2*len(ys)))
	}

	luma := lumaReader(img)
	var sums [rows][cols]uint32 // at most 256 × 0xffff, so no overflow
	for j, y := range ys {
		row := &sums[j/samples]
		for i, x := range xs {
			row[i/samples] += luma(x, y)
		}
	}

	var h uint64
	for r := range rows {
		for c := range cols - 1 {
			if sums[r][c] > sums[r][c+1] {
				h |= 1 << (r*(cols-1) + c)
			}
		}
	}
	return h
}

// lumaReader returns a function giving the luminance of img at (x, y), on
// a scale of 0 to 0xffff. For the types the image decoders return it reads
// the pixel array directly: img.At returns an interface, which costs an
// allocation per pixel. Every fast path returns exactly what the generic
// one would, so the hash of an image does not depend on its type.
func lumaReader(img image.Image) func(x, y int) uint32 {
	switch m := img.(type) {
	case *image.NRGBA:
		return func(x, y int) uint32 {
			i := m.PixOffset(x, y)
			s := m.Pix[i : i+4 : i+4]
			return luma(color.NRGBA{R: s[0], G: s[1], B: s[2], A: s[3]}.RGBA())
		}
	case *image.RGBA:
		return func(x, y int) uint32 {
			i := m.PixOffset(x, y)
			s := m.Pix[i : i+4 : i+4]
			return luma(color.RGBA{R: s[0], G: s[1], B: s[2], A: s[3]}.RGBA())
		}
	case *image.YCbCr:
		return func(x, y int) uint32 {
			c := color.YCbCr{
				Y:  m.Y[m.YOffset(x, y)],
				Cb: m.Cb[m.COffset(x, y)],
				Cr: m.Cr[m.COffset(x, y)],
			}
			return luma(c.RGBA())
		}
	case *image.Gray:
		return func(x, y int) uint32 {
			return uint32(m.Pix[m.PixOffset(x, y)]) * 0x101
		}
	case *image.Paletted:
		// An index past the end of the palette reads as black; At would
		// panic on it.
		var table [256]uint32
		for i, c := range m.Palette {
			if i < len(table) && c != nil {
				table[i] = luma(c.RGBA())
			}
		}
		return func(x, y int) uint32 {
			return table[m.Pix[m.PixOffset(x, y)]]
		}
	}
	return func(x, y int) uint32 {
		return luma(img.At(x, y).RGBA())
	}
}

// luma returns the luminance of a colour given as color.Color.RGBA returns
// it, with the ITU-R BT.601 weights that color.GrayModel uses. The weights
// sum to 1<<16, so the result fits in 16 bits and the sum in uint32.
func luma(r, g, b, _ uint32) uint32 {
	return (19595*r + 38470*g + 7471*b + 1<<15) >> 16
}
