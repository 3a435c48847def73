package artifact

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
)

// sniffLen is how much of the content is looked at to recognise it: what
// http.DetectContentType reads.
const sniffLen = 512

// format is an accepted image format.
type format struct {
	name, contentType string
	magic             func(head []byte) bool
	// check walks the whole file (size bytes): complete and well formed,
	// its declared pixel size within limits before anything else is read.
	check func(r *bufio.Reader, size int64, l Limits) (w, h int, err error)
}

var formats = []format{
	{"PNG", "image/png", func(h []byte) bool { return bytes.HasPrefix(h, pngSignature) }, checkPNG},
	{"JPEG", "image/jpeg", func(h []byte) bool { return bytes.HasPrefix(h, []byte{0xff, 0xd8, 0xff}) }, checkJPEG},
	{"WebP", "image/webp", func(h []byte) bool {
		return len(h) >= 12 && string(h[:4]) == "RIFF" && string(h[8:12]) == "WEBP"
	}, checkWebP},
}

// sniff returns the format of the content that starts with head, or a
// *RejectedError naming what it is instead when that is recognisable.
func sniff(head []byte) (format, error) {
	for _, f := range formats {
		if f.magic(head) {
			return f, nil
		}
	}
	if len(head) == 0 {
		return format{}, rejectf("the file is empty")
	}
	if what := identify(head); what != "" {
		return format{}, rejectf("content is %s; only PNG, JPEG and WebP images are accepted", what)
	}
	return format{}, rejectf("content is not a PNG, JPEG or WebP image")
}

// identify names content that is not an accepted image, for the refusal.
func identify(head []byte) string {
	ct, _, _ := mime.ParseMediaType(http.DetectContentType(head))
	if ct == "text/html" {
		return "HTML (text/html)"
	}
	// DetectContentType sees SVG as XML or text.
	lower := bytes.ToLower(head)
	if bytes.Contains(lower, []byte("<svg")) {
		return "an SVG image (image/svg+xml)"
	}
	switch ct {
	case "application/octet-stream":
		return ""
	case "text/plain":
		return "text (text/plain); text artifacts need a .txt, .log or .xml name"
	}
	return ct
}

// truncated turns the end of the file met inside a structure into a
// refusal; other read errors pass through.
func truncated(err error, what string) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return rejectf("%s is truncated", what)
	}
	return fmt.Errorf("checking image: %w", err)
}

// checkPixels refuses an image whose declared size is zero or larger than
// the limits, before any of its data is looked at.
func checkPixels(what string, w, h int, l Limits) error {
	if w <= 0 || h <= 0 {
		return rejectf("%s declares an empty image (%d×%d pixels)", what, w, h)
	}
	if w > l.MaxWidth || h > l.MaxHeight {
		return rejectf("image is %d×%d pixels; the limit is %d×%d", w, h, l.MaxWidth, l.MaxHeight)
	}
	return nil
}

// expectEOF refuses bytes after an image's end marker: a file that is an
// image followed by something else (a polyglot) is not just an image.
func expectEOF(r *bufio.Reader, what string) error {
	_, err := r.ReadByte()
	if errors.Is(err, io.EOF) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("checking image: %w", err)
	}
	return rejectf("%s has data after its end", what)
}
