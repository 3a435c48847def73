package artifact

import (
	"bufio"
	"encoding/binary"
	"errors"
	"io"
)

// JPEG markers this walk tells apart (ITU T.81, table B.1).
const (
	jpegTEM = 0x01
	jpegSOF = 0xc0 // SOF0..SOF15, except the three below
	jpegDHT = 0xc4
	jpegJPG = 0xc8
	jpegDAC = 0xcc
	jpegRST = 0xd0 // RST0..RST7
	jpegSOI = 0xd8
	jpegEOI = 0xd9
	jpegSOS = 0xda
)

// checkJPEG walks a JPEG's marker segments by their lengths, and the
// entropy-coded data of each scan up to the next marker, until EOI, which
// must end the file. The frame header (SOFn) carries the size, which is
// checked as soon as it is met.
func checkJPEG(r *bufio.Reader, _ int64, l Limits) (w, h int, err error) {
	if _, err := r.Discard(2); err != nil { // SOI, seen by sniff
		return 0, 0, truncated(err, "JPEG")
	}
	var sawFrame, sawScan bool
	m, err := nextMarker(r)
	for {
		if err != nil {
			return 0, 0, truncated(err, "JPEG (no EOI marker)")
		}
		switch {
		case m == jpegEOI:
			if !sawScan {
				return 0, 0, rejectf("JPEG has no image data (SOS)")
			}
			return w, h, expectEOF(r, "JPEG")
		case m == jpegSOI:
			return 0, 0, rejectf("JPEG has a second SOI marker")
		case m == jpegTEM || (m >= jpegRST && m < jpegRST+8):
			// Standalone markers: no length follows.
			m, err = nextMarker(r)
			continue
		}
		var lenBuf [2]byte
		if _, err := io.ReadFull(r, lenBuf[:]); err != nil {
			return 0, 0, truncated(err, "JPEG")
		}
		n := int(binary.BigEndian.Uint16(lenBuf[:])) - 2
		if n < 0 {
			return 0, 0, rejectf("JPEG segment 0x%02x has an invalid length", m)
		}
		switch {
		case m >= jpegSOF && m <= jpegSOF+15 && m != jpegDHT && m != jpegJPG && m != jpegDAC:
			if sawFrame {
				return 0, 0, rejectf("JPEG has a second frame header")
			}
			sawFrame = true
			// precision, height, width, components.
			var sof [6]byte
			if n < len(sof) {
				return 0, 0, rejectf("JPEG frame header is too short")
			}
			if _, err := io.ReadFull(r, sof[:]); err != nil {
				return 0, 0, truncated(err, "JPEG")
			}
			h, w = int(binary.BigEndian.Uint16(sof[1:3])), int(binary.BigEndian.Uint16(sof[3:5]))
			if err := checkPixels("JPEG", w, h, l); err != nil {
				return 0, 0, err
			}
			n -= len(sof)
		case m == jpegSOS:
			if !sawFrame {
				return 0, 0, rejectf("JPEG scan comes before its frame header")
			}
			sawScan = true
		}
		if _, err := r.Discard(n); err != nil {
			return 0, 0, truncated(err, "JPEG")
		}
		if m == jpegSOS {
			m, err = skipScan(r)
		} else {
			m, err = nextMarker(r)
		}
	}
}

// nextMarker reads the marker that must come next, skipping fill bytes.
func nextMarker(r *bufio.Reader) (byte, error) {
	b, err := r.ReadByte()
	if err != nil {
		return 0, err
	}
	if b != 0xff {
		return 0, rejectf("JPEG is malformed (0x%02x where a marker belongs)", b)
	}
	for {
		if b, err = r.ReadByte(); err != nil || b != 0xff {
			break
		}
	}
	if err == nil && b == 0 {
		return 0, rejectf("JPEG is malformed (an empty marker)")
	}
	return b, err
}

// skipScan reads entropy-coded data up to the marker that ends it, which
// it returns; 0xFF00 (a stuffed byte) and RSTn belong to the data.
func skipScan(r *bufio.Reader) (byte, error) {
	for {
		_, err := r.ReadSlice(0xff)
		if errors.Is(err, bufio.ErrBufferFull) {
			continue // a long run of data without 0xFF
		}
		if err != nil {
			return 0, err
		}
		b, err := r.ReadByte()
		for err == nil && b == 0xff {
			b, err = r.ReadByte()
		}
		if err != nil {
			return 0, err
		}
		if b != 0 && (b < jpegRST || b >= jpegRST+8) {
			return b, nil
		}
	}
}
