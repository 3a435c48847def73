package artifact

import (
	"bufio"
	"encoding/binary"
	"io"
)

// checkWebP checks that a WebP's RIFF size is the file's size and walks
// its chunks, which must fill it exactly. Every chunk that declares a
// size (VP8X canvas, VP8 and VP8L bitstreams, ANMF frames) is checked
// against the limits: a small canvas must not hide a huge frame.
func checkWebP(r *bufio.Reader, size int64, l Limits) (w, h int, err error) {
	var hdr [12]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return 0, 0, truncated(err, "WebP")
	}
	riff := int64(binary.LittleEndian.Uint32(hdr[4:8]))
	if riff != size-8 {
		return 0, 0, rejectf("WebP's RIFF size (%d) does not match the file (%d bytes): truncated or followed by other data", riff, size)
	}
	rest := riff - 4 // after "WEBP"
	var sawImage bool
	for i := 0; rest > 0; i++ {
		var ch [8]byte
		if rest < int64(len(ch)) {
			return 0, 0, rejectf("WebP ends inside a chunk header")
		}
		if _, err := io.ReadFull(r, ch[:]); err != nil {
			return 0, 0, truncated(err, "WebP")
		}
		rest -= int64(len(ch))
		typ, n := string(ch[:4]), int64(binary.LittleEndian.Uint32(ch[4:]))
		padded := n + n&1 // chunks are padded to an even size
		if padded > rest {
			return 0, 0, rejectf("WebP chunk %q runs past the end of the file", typ)
		}
		if i == 0 && typ != "VP8 " && typ != "VP8L" && typ != "VP8X" {
			return 0, 0, rejectf("WebP starts with an unknown chunk %q", typ)
		}
		cw, chh, read, err := webpChunkSize(r, typ, n)
		if err != nil {
			return 0, 0, err
		}
		if read > 0 {
			if err := checkPixels("WebP", cw, chh, l); err != nil {
				return 0, 0, err
			}
			if i == 0 {
				w, h = cw, chh
			}
		}
		sawImage = sawImage || typ == "VP8 " || typ == "VP8L" || typ == "ANMF"
		if _, err := r.Discard(int(padded - read)); err != nil {
			return 0, 0, truncated(err, "WebP")
		}
		rest -= padded
	}
	if !sawImage {
		return 0, 0, rejectf("WebP has no image data")
	}
	return w, h, nil
}

// webpChunkSize reads the pixel size declared at the start of a chunk of
// type typ and length n; read is how much of the chunk it consumed, 0 for
// chunks that declare no size.
func webpChunkSize(r *bufio.Reader, typ string, n int64) (w, h int, read int64, err error) {
	need := map[string]int64{"VP8 ": 10, "VP8L": 5, "VP8X": 10, "ANMF": 16}[typ]
	if need == 0 {
		return 0, 0, 0, nil
	}
	if n < need {
		return 0, 0, 0, rejectf("WebP chunk %q is too short", typ)
	}
	b := make([]byte, need)
	if _, err := io.ReadFull(r, b); err != nil {
		return 0, 0, 0, truncated(err, "WebP")
	}
	u24 := func(p []byte) int { return int(p[0]) | int(p[1])<<8 | int(p[2])<<16 }
	switch typ {
	case "VP8 ": // frame tag (3 bytes), start code, 14-bit width and height
		if b[0]&1 != 0 || b[3] != 0x9d || b[4] != 0x01 || b[5] != 0x2a {
			return 0, 0, 0, rejectf("WebP's VP8 bitstream does not start with a key frame")
		}
		w, h = int(binary.LittleEndian.Uint16(b[6:])&0x3fff), int(binary.LittleEndian.Uint16(b[8:])&0x3fff)
	case "VP8L": // signature, then width-1 and height-1 in 14 bits each, version
		bits := binary.LittleEndian.Uint32(b[1:])
		if b[0] != 0x2f || bits>>29 != 0 {
			return 0, 0, 0, rejectf("WebP's VP8L bitstream has an invalid header")
		}
		w, h = int(bits&0x3fff)+1, int(bits>>14&0x3fff)+1
	case "VP8X": // flags, reserved, canvas width-1 and height-1 in 24 bits
		w, h = u24(b[4:])+1, u24(b[7:])+1
	case "ANMF": // frame x, y, width-1, height-1 in 24 bits, duration, flags
		w, h = u24(b[6:])+1, u24(b[9:])+1
	}
	return w, h, need, nil
}
