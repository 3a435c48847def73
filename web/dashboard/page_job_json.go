package dashboard

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"
)

// pageJSON bounds how a job page shows a JSON value: whatever a row
// holds (rows written before results were checked may nest thousands of
// levels deep), the text is at most maxBytes, and values nested deeper
// than maxDepth show as {…} or […]. Indenting a value in full costs depth
// × lines: a 55 KB result nested 9,000 deep became 162 MB of page.
type pageJSON struct {
	indent   bool // one member per line, two spaces a level; else one line
	maxDepth int
	maxBytes int
}

// Limits of the payload and result panels, and of one event's or
// effect's cell.
var (
	panelJSON = pageJSON{indent: true, maxDepth: 64, maxBytes: 64 << 10}
	cellJSON  = pageJSON{maxDepth: 8, maxBytes: jobPageDetailLimit}
)

// shownJSON is a value as a page shows it.
type shownJSON struct {
	Text string
	// Deep says that levels beyond maxDepth were left out, Cut that the
	// text stops at maxBytes.
	Deep, Cut bool
}

// Shortened reports whether Text leaves out part of the value.
func (s shownJSON) Shortened() bool { return s.Deep || s.Cut }

// show renders raw within the limits. What is not valid JSON shows as
// text, cut like JSON.
func (pj pageJSON) show(raw []byte) shownJSON {
	raw = bytes.TrimSpace(raw)
	if !json.Valid(raw) {
		text, cut := cutText(string(raw), pj.maxBytes)
		return shownJSON{Text: text, Cut: cut}
	}
	w := jsonWriter{pageJSON: pj, in: raw}
	w.buf.Grow(min(len(raw)*2, pj.maxBytes) + 8)
	w.value(0)
	s := shownJSON{Text: w.buf.String(), Deep: w.deep, Cut: w.full}
	if s.Cut {
		s.Text += "…"
	}
	return s
}

// note tells people what was left out and where the whole value is.
func (s shownJSON) note(total, jobID int64, pj pageJSON) string {
	if !s.Shortened() {
		return ""
	}
	var parts []string
	if s.Deep {
		parts = append(parts, fmt.Sprintf("levels below %d shown as …", pj.maxDepth))
	}
	if s.Cut {
		parts = append(parts, fmt.Sprintf("cut at %s", jobPageSize(int64(pj.maxBytes))))
	}
	return fmt.Sprintf("Truncated (%s of JSON; %s). Download the JSON from the API: GET /api/v1/jobs/%d.",
		jobPageSize(total), strings.Join(parts, ", "), jobID)
}

// jsonWriter walks valid JSON once, writing at most maxBytes. Recursion
// stops at maxDepth: deeper values are skipped by counting brackets.
type jsonWriter struct {
	pageJSON
	in   []byte
	pos  int
	buf  bytes.Buffer
	deep bool
	full bool
}

func (w *jsonWriter) write(b []byte) {
	if w.full {
		return
	}
	if room := w.maxBytes - w.buf.Len(); len(b) > room {
		for room > 0 && !utf8.RuneStart(b[room]) {
			room--
		}
		w.buf.Write(b[:room])
		w.full = true
		return
	}
	w.buf.Write(b)
}

func (w *jsonWriter) writeString(s string) { w.write([]byte(s)) }

// jsonSpace is what JSON counts as white space (RFC 8259).
const jsonSpace = " \t\r\n"

func (w *jsonWriter) skipSpace() {
	for w.pos < len(w.in) && strings.IndexByte(jsonSpace, w.in[w.pos]) >= 0 {
		w.pos++
	}
}

func (w *jsonWriter) newline(depth int) {
	if w.indent {
		w.writeString("\n")
		w.writeString(strings.Repeat("  ", depth))
	}
}

// value writes the value at w.pos, which is depth levels deep.
func (w *jsonWriter) value(depth int) {
	w.skipSpace()
	if w.full || w.pos >= len(w.in) {
		return
	}
	switch c := w.in[w.pos]; c {
	case '{', '[':
		closer := byte('}')
		if c == '[' {
			closer = ']'
		}
		if depth >= w.maxDepth {
			w.skipContainer()
			w.deep = true
			w.write([]byte{c})
			w.writeString("…")
			w.write([]byte{closer})
			return
		}
		w.pos++
		w.write([]byte{c})
		w.skipSpace()
		if w.pos < len(w.in) && w.in[w.pos] == closer {
			w.pos++
			w.write([]byte{closer})
			return
		}
		for !w.full {
			w.newline(depth + 1)
			if c == '{' {
				w.skipSpace()
				w.str() // the key
				w.skipSpace()
				w.pos++ // ':'
				if w.indent {
					w.writeString(": ")
				} else {
					w.writeString(":")
				}
			}
			w.value(depth + 1)
			w.skipSpace()
			if w.pos >= len(w.in) || w.in[w.pos] != ',' {
				break
			}
			w.pos++
			w.writeString(",")
		}
		w.pos++ // the closer
		w.newline(depth)
		w.write([]byte{closer})
	case '"':
		w.str()
	default: // number, true, false, null
		start := w.pos
		for w.pos < len(w.in) && strings.IndexByte(",]} \t\r\n", w.in[w.pos]) < 0 {
			w.pos++
		}
		w.write(w.in[start:w.pos])
	}
}

// str writes the string at w.pos as it is, escapes included.
func (w *jsonWriter) str() {
	start := w.pos
	w.pos++
	for w.pos < len(w.in) && w.in[w.pos] != '"' {
		if w.in[w.pos] == '\\' {
			w.pos++
		}
		w.pos++
	}
	w.pos++
	w.write(w.in[start:min(w.pos, len(w.in))])
}

// skipContainer moves w.pos past the object or array opening at w.pos,
// however deep it nests, without recursion.
func (w *jsonWriter) skipContainer() {
	depth := 0
	for ; w.pos < len(w.in); w.pos++ {
		switch w.in[w.pos] {
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth == 0 {
				w.pos++
				return
			}
		case '"':
			for w.pos++; w.pos < len(w.in) && w.in[w.pos] != '"'; w.pos++ {
				if w.in[w.pos] == '\\' {
					w.pos++
				}
			}
		}
	}
}

// cutText cuts s at limit bytes, on a character boundary.
func cutText(s string, limit int) (string, bool) {
	if len(s) <= limit {
		return s, false
	}
	cut := limit
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…", true
}
