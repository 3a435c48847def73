package artifact_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/leasehold/leasehold/artifact"
)

// Bundle entry names (issue 17): a worker names its artifacts, and a
// bundle unpacked on Windows must not write a drive-relative path, an
// alternate data stream, a device or a name the file system refuses.
func TestEntryNamePortable(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é", 200) + ".png" // 404 bytes
	for _, c := range []struct{ prefix, name, want string }{
		{"001-screenshot-", "home.png", "001-screenshot-home.png"},
		{"001-screenshot-", "C:evil.png", "001-screenshot-C_evil.png"},
		{"001-screenshot-", `a<b>c:d"e|f?g*h.png`, "001-screenshot-a_b_c_d_e_f_g_h.png"},
		{"002-text-", "log.txt. . ", "002-text-log.txt"},
		{"002-text-", "...", "002-text-artifact"},
		{"", "CON", "_CON"},
		{"", "nul.txt", "_nul.txt"},
		{"", "com1.log", "_com1.log"},
		{"", "LPT9", "_LPT9"},
		{"", "console.txt", "console.txt"},
		{"", "COM10", "COM10"},
		{"001-screenshot-", "x\u202egnp.exe", "001-screenshot-xgnp.exe"},
		{"001-screenshot-", `..\..\windows\system32\x.png`, "001-screenshot-x.png"},
	} {
		if got := artifact.EntryName(c.prefix, c.name); got != c.want {
			t.Errorf("EntryName(%q, %q) = %q, want %q", c.prefix, c.name, got, c.want)
		}
	}
	got := artifact.EntryName("001-screenshot-", long)
	if len(got) > 255 || !utf8.ValidString(got) || !strings.HasSuffix(got, "é.png") || !strings.HasPrefix(got, "001-screenshot-é") {
		t.Errorf("a 404-byte name became %q (%d bytes), want at most 255 valid bytes ending in .png", got, len(got))
	}
	if got := artifact.EntryName("", strings.Repeat("a", 300)+". "); len(got) != 255 {
		t.Errorf("a 300-byte name without extension became %d bytes", len(got))
	}
}
