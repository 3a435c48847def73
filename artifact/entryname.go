package artifact

import (
	"path"
	"strings"
	"unicode"
	"unicode/utf8"
)

// maxEntryBytes bounds a file name in an archive: 255 bytes is the limit
// of a name on ext4, APFS and (in UTF-16 units, fewer than bytes) NTFS.
const maxEntryBytes = 255

// EntryName is prefix and a worker-supplied name joined into a file name
// that unpacks as itself on Linux, macOS and Windows: CleanName's rules,
// then the characters Windows refuses in a name (`<>:"/\|?*`: "C:evil.png"
// would name a drive, "a:b" an alternate stream) become '_', a trailing
// dot or space (which Windows drops) goes, a reserved device name (CON,
// NUL, COM1, LPT1, … with any extension) gets a '_' in front, and the
// whole is at most 255 bytes, cut before the extension so that it keeps
// its type. prefix is the caller's own and must be safe already.
func EntryName(prefix, name string) string {
	if i := strings.LastIndexAny(name, `/\`); i >= 0 {
		name = name[i+1:]
	}
	// CleanName's rules without its cut, which would lose the extension.
	name = strings.Map(func(r rune) rune {
		switch {
		case r == utf8.RuneError || unicode.IsControl(r) || unicode.Is(unicode.Cf, r):
			return -1
		case strings.ContainsRune(`<>:"|?*`, r):
			return '_'
		}
		return r
	}, name)
	name = strings.TrimRight(strings.TrimSpace(name), ". ")
	if name == "" {
		name = "artifact"
	}
	if reservedOnWindows(prefix + name) {
		name = "_" + name
	}
	room := maxEntryBytes - len(prefix)
	if len(name) > room {
		ext := path.Ext(name)
		if len(ext) > 16 || len(ext) >= room {
			ext = ""
		}
		stem := name[:len(name)-len(ext)]
		cut := room - len(ext)
		for cut > 0 && !utf8.RuneStart(stem[cut]) {
			cut--
		}
		name = strings.TrimRight(stem[:cut], ". ") + ext
	}
	return prefix + name
}

// reservedOnWindows reports whether name is one of the device names that
// Windows reserves in every folder, with or without an extension.
func reservedOnWindows(name string) bool {
	base, _, _ := strings.Cut(name, ".")
	base = strings.ToUpper(strings.TrimRight(base, " "))
	switch base {
	case "CON", "PRN", "AUX", "NUL", "CONIN$", "CONOUT$":
		return true
	}
	if len(base) == 4 && (strings.HasPrefix(base, "COM") || strings.HasPrefix(base, "LPT")) {
		return base[3] >= '0' && base[3] <= '9'
	}
	if strings.HasPrefix(base, "COM") || strings.HasPrefix(base, "LPT") {
		switch base[3:] {
		case "¹", "²", "³":
			return true
		}
	}
	return false
}
