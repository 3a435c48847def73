package queue

import (
	"strings"
	"unicode/utf8"
)

// The one rule for the text a worker or a user sends (progress messages,
// errors, why a worker does not claim, artifact names, effect keys):
// PostgreSQL text takes neither NUL nor invalid UTF-8, and refusing them
// here answers a 400 naming the field instead of a database error. JSON
// strings meet the same rule in checkDocument (jsonb refuses \u0000 and
// unpaired surrogate escapes; encoding/json turns a lone surrogate in a
// decoded string into U+FFFD, which is valid).

// CheckText returns a *ValidationError on field when s is not valid UTF-8,
// holds a NUL character, or is over limit bytes. What a worker gathers
// from outside (an executor's stderr, its device-info command) it cleans
// with CleanText before sending, so that its own failures are never
// refused.
func CheckText(field, s string, limit int) error {
	if len(s) > limit {
		return invalid(field, "must be at most %d bytes", limit)
	}
	if !utf8.ValidString(s) {
		return invalid(field, "must be valid UTF-8")
	}
	if strings.IndexByte(s, 0) >= 0 {
		return invalid(field, "must not contain NUL characters")
	}
	return nil
}

// CleanText makes s pass CheckText: NUL removed, invalid UTF-8 replaced
// by U+FFFD, cut to at most limit bytes (at a character boundary, with
// "…" when cut).
func CleanText(s string, limit int) string {
	s = strings.ToValidUTF8(strings.ReplaceAll(s, "\x00", ""), "\uFFFD")
	if len(s) <= limit {
		return s
	}
	const more = "…"
	cut := max(limit-len(more), 0)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	if limit < len(more) {
		return s[:cut]
	}
	return s[:cut] + more
}
