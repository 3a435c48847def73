package queue

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
)

// Bounds of what PostgreSQL's jsonb stores. encoding/json accepts more than
// jsonb does; checking here turns what the database would refuse into a
// ValidationError naming the payload instead of an error from deep inside
// an insert.
const (
	maxPayloadDepth = 128
	// maxExponent bounds written exponents: 8 bytes such as 1e131071
	// would otherwise read back as 131 KB of digits.
	maxExponent = 1000
	// numeric's limits: digits before and after the decimal point.
	maxNumericWeight = 131072
	maxNumericScale  = 16383
)

// checkPayload returns what is wrong with a payload that is already valid
// JSON, or "" when jsonb will store it as given.
func checkPayload(p []byte) string {
	depth := 0
	for i := 0; i < len(p); i++ {
		switch c := p[i]; {
		case c == '{' || c == '[':
			depth++
			if depth > maxPayloadDepth {
				return fmt.Sprintf("must not nest deeper than %d levels", maxPayloadDepth)
			}
		case c == '}' || c == ']':
			depth--
		case c == '"':
			end, problem := scanString(p, i)
			if problem != "" {
				return problem
			}
			i = end
		case c == '-' || (c >= '0' && c <= '9'):
			end := i
			for end < len(p) && bytes.IndexByte([]byte("+-.eE0123456789"), p[end]) >= 0 {
				end++
			}
			if !numericFits(p[i:end]) {
				return fmt.Sprintf("holds the number %.40s, beyond what can be stored (exponent at most %d, %d digits before and %d after the point)",
					p[i:end], maxExponent, maxNumericWeight, maxNumericScale)
			}
			i = end - 1
		}
	}
	return ""
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

// numericFits reports whether jsonb's numeric can hold the JSON number num.
func numericFits(num []byte) bool {
	mantissa, expPart := num, []byte(nil)
	if i := bytes.IndexAny(num, "eE"); i >= 0 {
		mantissa, expPart = num[:i], num[i+1:]
	}
	exp := 0
	if len(expPart) > 0 {
		e, err := strconv.Atoi(string(bytes.TrimPrefix(expPart, []byte("+"))))
		if err != nil || e > maxExponent || e < -maxExponent {
			return false
		}
		exp = e
	}
	intPart, fracPart, _ := bytes.Cut(bytes.TrimPrefix(mantissa, []byte("-")), []byte("."))
	return len(intPart)+exp <= maxNumericWeight && len(fracPart)-exp <= maxNumericScale
}

// MaxResultBytes bounds a job's result and an effect's result, like a
// payload.
const MaxResultBytes = MaxPayloadBytes

// CheckResult returns a *ValidationError (field "result") when result is
// not what a job or an effect may keep: absent, JSON null, or a JSON
// object within the payload's size and depth limits. Direct and remote
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
	if problem := checkPayload(result); problem != "" {
		return invalid("result", "%s", problem)
	}
	return nil
}
