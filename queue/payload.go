package queue

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// What a JSON document (a payload, a result, an effect's result, device
// info) may be. Its byte limit bounds what it is as stored, not only what
// its text is: jsonb keeps numbers exactly and gives them back written out
// in full, so the 5 bytes of 1e999 read back as 1,000 digits, and 170,000
// of them in a 1 MiB payload as 170 MB on every read. So a number must be
// what any JSON reader can hold, a float64, in at most maxNumberChars
// characters, and the document's numbers count against its limit as the
// database writes them out (1e300 as 301 bytes).
const (
	maxPayloadDepth = 128
	// maxNumberChars bounds the text of one number: float64's shortest
	// forms take at most 24 ("-2.2250738585072014e-308").
	maxNumberChars = 64
	// maxExponent bounds a written exponent. No number of at most
	// maxNumberChars characters within float64's range needs more; it
	// only refuses a zero written with a huge one (0e-99999 is stored as
	// 0.0000… with 99,999 zeros).
	maxExponent = 400
)

// checkDocument returns what is wrong with p, a document that is already
// valid JSON, or "" when it may be stored: no string or key with NUL or an
// unpaired surrogate escape (jsonb refuses both), at most maxPayloadDepth
// levels, every number within checkNumber's bounds, and at most limit
// bytes with each number counted as the database writes it out.
func checkDocument(p []byte, limit int) string {
	depth, size := 0, len(p)
	var at docPath
	for i := 0; i < len(p); i++ {
		switch c := p[i]; {
		case c == '{' || c == '[':
			depth++
			if depth > maxPayloadDepth {
				return fmt.Sprintf("must not nest deeper than %d levels", maxPayloadDepth)
			}
			at.open(c == '{')
		case c == '}' || c == ']':
			depth--
			at.close()
		case c == ',':
			at.next()
		case c == ':':
			at.value()
		case c == '"':
			end, problem := scanString(p, i)
			if problem != "" {
				return problem + at.where(true)
			}
			at.key(p[i+1 : end])
			i = end
		case c == '-' || (c >= '0' && c <= '9'):
			end := i
			for end < len(p) && bytes.IndexByte([]byte("+-.eE0123456789"), p[end]) >= 0 {
				end++
			}
			stored, problem := checkNumber(p[i:end])
			if problem != "" {
				return problem + at.where(false)
			}
			size += stored - (end - i)
			i = end - 1
		}
	}
	if size > limit {
		return fmt.Sprintf("is %d bytes with its numbers written out in full, as they are stored (1e300 is 301 digits): at most %d", size, limit)
	}
	return ""
}

// docPath follows where checkDocument's scan is, to say where a problem
// is: n[3] for the fourth element of the member n.
type docPath []pathStep

type pathStep struct {
	object bool
	inKey  bool   // an object's next string is a key
	name   []byte // an object's current key, as written between its quotes
	index  int    // an array's current element
}

func (d *docPath) open(object bool) { *d = append(*d, pathStep{object: object, inKey: object}) }

func (d *docPath) close() {
	if len(*d) > 0 {
		*d = (*d)[:len(*d)-1]
	}
}

// next is a comma: the next member or element.
func (d docPath) next() {
	if len(d) == 0 {
		return
	}
	if s := &d[len(d)-1]; s.object {
		s.inKey = true
	} else {
		s.index++
	}
}

// value is a colon: the member's value comes.
func (d docPath) value() {
	if len(d) > 0 {
		d[len(d)-1].inKey = false
	}
}

// key records a string that is an object's key.
func (d docPath) key(raw []byte) {
	if len(d) > 0 && d[len(d)-1].inKey {
		d[len(d)-1].name = raw
	}
}

// where says where the value being scanned is (" (at n[3])"), or the
// key when str is a string in a key's place; "" at the top.
func (d docPath) where(str bool) string {
	var b strings.Builder
	for i, s := range d {
		last := i == len(d)-1
		switch {
		case last && s.object && s.inKey && str:
			if b.Len() == 0 {
				return " (in a key)"
			}
			return " (in a key of " + b.String() + ")"
		case s.object:
			var name string
			if json.Unmarshal(append(append([]byte{'"'}, s.name...), '"'), &name) != nil {
				name = string(s.name)
			}
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(name)
		default:
			fmt.Fprintf(&b, "[%d]", s.index)
		}
	}
	if b.Len() == 0 {
		return ""
	}
	return " (at " + b.String() + ")"
}

// checkNumber refuses a JSON number that is not a float64 written in at
// most maxNumberChars characters, and otherwise returns how many bytes
// PostgreSQL's numeric writes it out in: no exponent, every digit.
func checkNumber(num []byte) (stored int, problem string) {
	if len(num) > maxNumberChars {
		return 0, fmt.Sprintf("holds a number of %d characters (%.24s…): at most %d", len(num), num, maxNumberChars)
	}
	f, err := strconv.ParseFloat(string(num), 64)
	if err != nil {
		return 0, fmt.Sprintf("holds the number %s, beyond the range of a float64: JSON has no infinity", num)
	}
	mantissa, expPart := num, []byte(nil)
	if i := bytes.IndexAny(num, "eE"); i >= 0 {
		mantissa, expPart = num[:i], num[i+1:]
	}
	exp := 0
	if len(expPart) > 0 {
		e, err := strconv.Atoi(string(bytes.TrimPrefix(expPart, []byte("+"))))
		if err != nil || e > maxExponent || e < -maxExponent {
			return 0, fmt.Sprintf("holds the number %s, whose exponent is beyond ±%d", num, maxExponent)
		}
		exp = e
	}
	neg := bytes.HasPrefix(mantissa, []byte("-"))
	intPart, fracPart, _ := bytes.Cut(bytes.TrimPrefix(mantissa, []byte("-")), []byte("."))
	digits := len(intPart) + len(fracPart)
	zeros := leadingZeros(intPart) // of all the digits
	if zeros == len(intPart) {
		zeros += leadingZeros(fracPart)
	}
	if f == 0 && zeros < digits {
		return 0, fmt.Sprintf("holds the number %s, too small for a float64: it would read as 0", num)
	}
	intDigits := 1
	if zeros < digits {
		intDigits = max(1, len(intPart)+exp-zeros)
	}
	stored = intDigits
	if scale := len(fracPart) - exp; scale > 0 {
		stored += 1 + scale
	}
	if neg {
		stored++
	}
	return stored, ""
}

// scanString finds the closing quote of the string opening at p[start] and
// refuses what jsonb rejects in strings: the NUL character and unpaired
// UTF-16 surrogate escapes.
func scanString(p []byte, start int) (end int, problem string) {
	for j := start + 1; j < len(p); j++ {
		switch p[j] {
		case '"':
			return j, ""
		case '\\':
			if p[j+1] != 'u' {
				j++
				continue
			}
			r := hex4(p[j+2 : j+6])
			switch {
			case r == 0:
				return 0, "must not contain NUL characters"
			case r >= 0xD800 && r < 0xDC00:
				if j+11 >= len(p) || p[j+6] != '\\' || p[j+7] != 'u' {
					return 0, "holds an unpaired UTF-16 surrogate escape"
				}
				if low := hex4(p[j+8 : j+12]); low < 0xDC00 || low > 0xDFFF {
					return 0, "holds an unpaired UTF-16 surrogate escape"
				}
				j += 11
			case r >= 0xDC00 && r <= 0xDFFF:
				return 0, "holds an unpaired UTF-16 surrogate escape"
			default:
				j += 5
			}
		}
	}
	return len(p), ""
}

func hex4(b []byte) rune {
	n, err := strconv.ParseUint(string(b), 16, 32)
	if err != nil {
		return -1
	}
	return rune(n)
}

func leadingZeros(digits []byte) int {
	n := 0
	for n < len(digits) && digits[n] == '0' {
		n++
	}
	return n
}

// MaxResultBytes bounds a job's result and an effect's result, like a
// payload.
const MaxResultBytes = MaxPayloadBytes

// CheckResult returns a *ValidationError (field "result") when result is
// not what a job or an effect may keep: absent, JSON null, or a JSON
// object within the payload's limits (checkDocument). Direct and remote
// workers check it before they send, and the queue checks it again before
// it writes, so both kinds of worker meet the same rule.
func CheckResult(result json.RawMessage) error {
	result = bytes.TrimSpace(result)
	if len(result) == 0 || string(result) == "null" {
		return nil
	}
	if len(result) > MaxResultBytes {
		return tooLarge("result", MaxResultBytes)
	}
	if result[0] != '{' || !json.Valid(result) {
		return invalid("result", "must be a JSON object")
	}
	if problem := checkDocument(result, MaxResultBytes); problem != "" {
		return invalid("result", "%s", problem)
	}
	return nil
}
