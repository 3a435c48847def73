package artifact

import (
	"bytes"
	"path"
	"strings"
	"unicode"
	"unicode/utf8"
)

// TextContentType is the Content-Type of every text artifact: logcat and
// UI dumps are shown as plain text, never interpreted (an .xml dump is not
// served as XML).
const TextContentType = "text/plain; charset=utf-8"

// maxNameBytes is the database's limit on an artifact's name.
const maxNameBytes = 255

// CleanName makes a worker-supplied file name safe to display and to put
// in a Content-Disposition header: its last path element only, without
// control or bidirectional-formatting characters (which can disguise an
// extension), at most 255 bytes, "artifact" when nothing is left. It is
// never used as a path.
func CleanName(name string) string {
	if i := strings.LastIndexAny(name, `/\`); i >= 0 {
		name = name[i+1:]
	}
	name = strings.Map(func(r rune) rune {
		if r == utf8.RuneError || unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
			return -1
		}
		return r
	}, name)
	name = strings.TrimSpace(name)
	if name == "." || name == ".." {
		name = ""
	}
	if len(name) > maxNameBytes {
		cut := maxNameBytes
		for cut > 0 && !utf8.RuneStart(name[cut]) {
			cut--
		}
		name = strings.TrimSpace(name[:cut])
	}
	if name == "" {
		return "artifact"
	}
	return name
}

// isTextName reports whether name's extension makes it a text artifact.
// Everything else must be an image, which is then decided by content.
func isTextName(name string) bool {
	switch strings.ToLower(path.Ext(name)) {
	case ".txt", ".log", ".xml":
		return true
	}
	return false
}

// textCheck is a writer that checks, as the bytes stream past, that they
// are UTF-8 without NUL bytes; a rune may be split across writes. It
// stops the copy at the first bad byte, so a binary file is refused
// without reading the rest.
type textCheck struct {
	carry [utf8.UTFMax]byte
	n     int   // bytes in carry: the start of a rune split across writes
	off   int64 // offset of the next byte written
}

func (t *textCheck) Write(p []byte) (int, error) {
	written := len(p)
	// Complete a rune begun in the previous write.
	for t.n > 0 && len(p) > 0 {
		t.carry[t.n] = p[0]
		t.n++
		p = p[1:]
		if utf8.FullRune(t.carry[:t.n]) {
			if !utf8.Valid(t.carry[:t.n]) {
				return 0, t.invalid(t.off)
			}
			t.off += int64(t.n)
			t.n = 0
		}
	}
	if len(p) == 0 {
		return written, nil
	}
	// Hold back a rune cut off at the end of p.
	cut := len(p)
	for i := len(p) - 1; i >= 0 && i >= len(p)-utf8.UTFMax; i-- {
		if utf8.RuneStart(p[i]) {
			if !utf8.FullRune(p[i:]) {
				cut = i
			}
			break
		}
	}
	body := p[:cut]
	if !utf8.Valid(body) {
		return 0, t.invalid(t.off + int64(firstInvalid(body)))
	}
	if i := bytes.IndexByte(body, 0); i >= 0 {
		return 0, rejectf("text contains a NUL byte at byte %d; binary files must be images", t.off+int64(i))
	}
	t.off += int64(cut)
	t.n = copy(t.carry[:], p[cut:])
	return written, nil
}

// finish reports a rune left incomplete at the end of the text.
func (t *textCheck) finish() error {
	if t.n > 0 {
		return t.invalid(t.off)
	}
	return nil
}

func (t *textCheck) invalid(at int64) *RejectedError {
	return rejectf("text is not valid UTF-8 (at byte %d)", at)
}

// firstInvalid returns the offset of the first byte of p that does not
// start a valid rune.
func firstInvalid(p []byte) int {
	for i := 0; i < len(p); {
		r, size := utf8.DecodeRune(p[i:])
		if r == utf8.RuneError && size <= 1 {
			return i
		}
		i += size
	}
	return len(p)
}
