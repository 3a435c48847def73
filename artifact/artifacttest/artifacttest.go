// Package artifacttest makes the images and hostile files that tests of
// artifact storage upload. It is imported by tests only.
package artifacttest

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"image"
	"image/color"
	"image/gif"
	"image/jpeg"
	"image/png"
	"io"
	"sync/atomic"
	"testing"
)

// WebP images made by libwebp (the feature probes browsers and Modernizr
// use), so that tests do not need an encoder.
var (
	// WebPLossless is a 3×2 VP8L image (the 1×1 probe with its size
	// field changed: its colour needs no bits per pixel).
	WebPLossless = []byte("RIFF\x1a\x00\x00\x00WEBPVP8L\x0d\x00\x00\x00\x2f\x02\x40\x00\x10\x07\x10\x11\x11\x88\x88\xfe\x07\x00")
	// WebPLossy is a 1×1 VP8 image.
	WebPLossy = []byte("RIFF\x22\x00\x00\x00WEBPVP8 \x16\x00\x00\x000\x01\x00\x9d\x01\x2a\x01\x00\x01\x00\x0e\xc0\xfe\x25\xa4\x00\x03\x70\x00\x00\x00\x00")
	// WebPAlpha is a 1×1 VP8X image with an ALPH and a VP8 chunk.
	WebPAlpha = []byte("RIFF\x4a\x00\x00\x00WEBPVP8X\x0a\x00\x00\x00\x10\x00\x00\x00\x00\x00\x00\x00\x00\x00" +
		"ALPH\x0c\x00\x00\x00\x11\x07\x10\x11\xfd\x0f\x44\x44\xff\x03\x00\x00" +
		"VP8 \x18\x00\x00\x00\x14\x01\x00\x9d\x01\x2a\x01\x00\x01\x00\x00\x00\xfe\x00\x00\x0d\xc0\x00\xfe\xe6\xb5\x00\x00\x00")
)

// PNG encodes a w×h image.
func PNG(t testing.TB, w, h int) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := png.Encode(&b, pattern(w, h)); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// JPEG encodes a w×h image.
func JPEG(t testing.TB, w, h int) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := jpeg.Encode(&b, pattern(w, h), nil); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// GIF encodes a w×h image.
func GIF(t testing.TB, w, h int) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := gif.Encode(&b, pattern(w, h), nil); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// PNGDeclaring is a well-formed PNG (correct CRCs, an IDAT, IEND) whose
// IHDR declares w×h pixels, though it holds only a few bytes of data: a
// decompression bomb's header.
func PNGDeclaring(w, h uint32) []byte {
	var b bytes.Buffer
	b.WriteString("\x89PNG\r\n\x1a\n")
	ihdr := binary.BigEndian.AppendUint32(nil, w)
	ihdr = binary.BigEndian.AppendUint32(ihdr, h)
	ihdr = append(ihdr, 8, 6, 0, 0, 0) // 8-bit RGBA, no interlace
	PNGChunk(&b, "IHDR", ihdr)
	PNGChunk(&b, "IDAT", []byte{0x78, 0x9c, 0x03, 0x00, 0x00, 0x00, 0x00, 0x01})
	PNGChunk(&b, "IEND", nil)
	return b.Bytes()
}

// PNGChunk appends a chunk with a correct CRC to b.
func PNGChunk(b *bytes.Buffer, typ string, data []byte) {
	var n [4]byte
	binary.BigEndian.PutUint32(n[:], uint32(len(data)))
	b.Write(n[:])
	crc := crc32.NewIEEE()
	crc.Write([]byte(typ))
	crc.Write(data)
	b.WriteString(typ)
	b.Write(data)
	b.Write(binary.BigEndian.AppendUint32(nil, crc.Sum32()))
}

// Hostile files that are not images, whatever their names say.
const (
	HTML = "<!DOCTYPE html><html><body><script>alert(document.cookie)</script></body></html>"
	SVG  = `<?xml version="1.0"?><svg xmlns="http://www.w3.org/2000/svg" onload="alert(1)"><circle r="5"/></svg>`
	BMP  = "BM\x3a\x00\x00\x00\x00\x00\x00\x00\x36\x00\x00\x00\x28\x00\x00\x00\x01\x00\x00\x00\x01\x00\x00\x00\x01\x00\x18\x00\x00\x00\x00\x00\x04\x00\x00\x00\x13\x0b\x00\x00\x13\x0b\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\xff\x00\x00\x00"
)

// pattern is a w×h image that is not a single colour, so that encoders
// produce real data.
func pattern(w, h int) image.Image {
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			img.Set(x, y, color.NRGBA{uint8(x * 7), uint8(y * 13), uint8(x ^ y), 255})
		}
	}
	return img
}

// Stream is a body of Size bytes generated as it is read, never held in
// memory: Prefix, then zeros. It counts the bytes pulled from it, so a
// test can tell how far a server read before giving up.
type Stream struct {
	Prefix []byte
	Size   int64
	pulled atomic.Int64
}

// Read implements io.Reader.
func (s *Stream) Read(p []byte) (int, error) {
	off := s.pulled.Load()
	if off >= s.Size {
		return 0, io.EOF
	}
	p = p[:min(int64(len(p)), s.Size-off)]
	n := 0
	if off < int64(len(s.Prefix)) {
		n = copy(p, s.Prefix[off:])
	}
	clear(p[n:])
	s.pulled.Add(int64(len(p)))
	return len(p), nil
}

// Pulled returns how many bytes have been read.
func (s *Stream) Pulled() int64 { return s.pulled.Load() }
