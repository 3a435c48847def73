package artifact

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
)

var pngSignature = []byte("\x89PNG\r\n\x1a\n")

// checkPNG walks a PNG's chunks up to IEND, verifying each CRC, so a
// truncated or corrupted file is refused. IHDR comes first and carries
// the size, which is checked before anything else is read.
func checkPNG(r *bufio.Reader, _ int64, l Limits) (w, h int, err error) {
	if _, err := r.Discard(len(pngSignature)); err != nil {
		return 0, 0, truncated(err, "PNG")
	}
	var sawIDAT bool
	for i := 0; ; i++ {
		var hdr [8]byte
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			return 0, 0, truncated(err, "PNG (no IEND chunk)")
		}
		length, typ := binary.BigEndian.Uint32(hdr[:4]), string(hdr[4:])
		if length > 1<<31-1 {
			return 0, 0, rejectf("PNG chunk %q has an invalid length", typ)
		}
		if i == 0 && (typ != "IHDR" || length != 13) {
			return 0, 0, rejectf("PNG does not start with an IHDR chunk")
		}
		crc := crc32.NewIEEE()
		crc.Write(hdr[4:])
		if typ == "IHDR" {
			if i != 0 {
				return 0, 0, rejectf("PNG has a second IHDR chunk")
			}
			var ihdr [13]byte
			if _, err := io.ReadFull(r, ihdr[:]); err != nil {
				return 0, 0, truncated(err, "PNG")
			}
			crc.Write(ihdr[:])
			w, h = int(binary.BigEndian.Uint32(ihdr[0:4])), int(binary.BigEndian.Uint32(ihdr[4:8]))
			if err := checkPixels("PNG", w, h, l); err != nil {
				return 0, 0, err
			}
			if err := checkIHDR(ihdr); err != nil {
				return 0, 0, err
			}
		} else if _, err := io.CopyN(crc, r, int64(length)); err != nil {
			return 0, 0, truncated(err, fmt.Sprintf("PNG (chunk %q)", typ))
		}
		var sum [4]byte
		if _, err := io.ReadFull(r, sum[:]); err != nil {
			return 0, 0, truncated(err, fmt.Sprintf("PNG (chunk %q)", typ))
		}
		if binary.BigEndian.Uint32(sum[:]) != crc.Sum32() {
			return 0, 0, rejectf("PNG chunk %q is corrupt (CRC mismatch)", typ)
		}
		switch typ {
		case "IDAT":
			sawIDAT = true
		case "IEND":
			if !sawIDAT {
				return 0, 0, rejectf("PNG has no image data (IDAT)")
			}
			return w, h, expectEOF(r, "PNG")
		}
	}
}

// checkIHDR refuses header fields no decoder accepts (PNG spec, 11.2.2).
func checkIHDR(ihdr [13]byte) error {
	depth, color := ihdr[8], ihdr[9]
	allowed := map[byte][]byte{0: {1, 2, 4, 8, 16}, 2: {8, 16}, 3: {1, 2, 4, 8}, 4: {8, 16}, 6: {8, 16}}
	ok := false
	for _, d := range allowed[color] {
		ok = ok || d == depth
	}
	if !ok || ihdr[10] != 0 || ihdr[11] != 0 || ihdr[12] > 1 {
		return rejectf("PNG header is invalid (colour type %d, bit depth %d)", color, depth)
	}
	return nil
}
