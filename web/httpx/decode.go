package httpx

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"reflect"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/labstack/echo/v4"
)

const jsonSpace = " \t\r\n"

// Body limits of the JSON requests both APIs take (for ReadBody). A
// single job, or a result, may carry queue.MaxPayloadBytes; JobBodyLimit
// leaves room for its other fields, so the payload check, not this one,
// answers a payload just over its limit. ActionBodyLimit bounds the
// smaller bodies: a bulk selector, a claim, a lease write.
const (
	JobBodyLimit    = 1<<20 + 64<<10
	ActionBodyLimit = 1 << 20
)

// ReadBody reads a JSON request body of at most limit bytes. Beyond the
// limit it stops reading and answers 413, so an endless body costs at
// most limit bytes of memory. A body must say it is JSON: without
// Content-Type, or with another one, the answer is 415 (README).
func ReadBody(c echo.Context, limit int64) ([]byte, error) {
	req := c.Request()
	mt, _, err := mime.ParseMediaType(req.Header.Get(echo.HeaderContentType))
	if err != nil || mt != echo.MIMEApplicationJSON {
		return nil, &Error{Status: http.StatusUnsupportedMediaType, Message: "Content-Type must be application/json"}
	}
	tooLarge := &Error{Status: http.StatusRequestEntityTooLarge, Message: fmt.Sprintf("request body is larger than %d bytes", limit)}
	if req.ContentLength > limit {
		return nil, tooLarge // declared too large: do not read any of it
	}
	var buf bytes.Buffer
	if req.ContentLength > 0 {
		buf.Grow(int(req.ContentLength) + bytes.MinRead) // one allocation, not doublings up to 64 MiB
	}
	_, err = buf.ReadFrom(http.MaxBytesReader(c.Response(), req.Body, limit))
	var maxErr *http.MaxBytesError
	if errors.As(err, &maxErr) {
		return nil, tooLarge
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return nil, &Error{Status: http.StatusRequestTimeout, Message: "the request body did not arrive in time"}
	}
	if err != nil {
		return nil, BadRequest("", "reading request body: %v", err)
	}
	return buf.Bytes(), nil
}

// DecodeObject decodes data, which must be one JSON object, into v.
// Unknown fields are refused so that a typo ("max_attempt") is an error
// instead of a silent default. prefix locates data in the request
// ("jobs[3].") for the field names of errors.
func DecodeObject(data []byte, v any, prefix string) error {
	if !utf8.Valid(data) {
		return BadRequest(strings.TrimSuffix(prefix, "."), "invalid UTF-8 at byte %d", invalidUTF8At(data))
	}
	trimmed := bytes.TrimLeft(data, jsonSpace)
	if len(trimmed) == 0 {
		if prefix == "" {
			return BadRequest("", "request body is empty: send a JSON object")
		}
		return BadRequest(strings.TrimSuffix(prefix, "."), "must be a JSON object")
	}
	if trimmed[0] != '{' {
		if prefix == "" {
			return BadRequest("", "request body must be a JSON object")
		}
		return BadRequest(strings.TrimSuffix(prefix, "."), "must be a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonError(err, prefix)
	}
	if rest := bytes.TrimLeft(data[dec.InputOffset():], jsonSpace); len(rest) > 0 {
		return BadRequest("", "unexpected data after the JSON object at byte %d", len(data)-len(rest))
	}
	return nil
}

// jsonError explains a decoding error in terms of the request: where the
// syntax broke, or which field has the wrong type.
func jsonError(err error, prefix string) error {
	var (
		syntax  *json.SyntaxError
		typeErr *json.UnmarshalTypeError
		own     *Error // from a field's own UnmarshalJSON
	)
	switch {
	case errors.As(err, &own):
		return own
	case errors.As(err, &syntax):
		return BadRequest("", "invalid JSON at byte %d: %s", syntax.Offset, syntax.Error())
	case errors.Is(err, io.ErrUnexpectedEOF):
		return BadRequest("", "invalid JSON: unexpected end of input")
	case errors.As(err, &typeErr):
		if typeErr.Field == "" {
			return BadRequest(strings.TrimSuffix(prefix, "."), "must be a JSON object")
		}
		return BadRequest(prefix+jsonPath(typeErr.Field), "must be %s, not %s", describeType(typeErr.Type), typeErr.Value)
	}
	// encoding/json has no type for this one; its message is stable.
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		if unquoted, uerr := strconv.Unquote(name); uerr == nil {
			name = unquoted
		}
		return BadRequest(prefix+name, "unknown field")
	}
	return BadRequest(strings.TrimSuffix(prefix, "."), "invalid JSON: %v", err)
}

// jsonPath drops the Go names of embedded structs ("NewJob.priority")
// from encoding/json's field path: the request's names are all lower case.
func jsonPath(field string) string {
	parts := strings.Split(field, ".")
	kept := parts[:0]
	for _, p := range parts {
		if p != "" && (p[0] < 'A' || p[0] > 'Z') {
			kept = append(kept, p)
		}
	}
	return strings.Join(kept, ".")
}

var timeType = reflect.TypeFor[time.Time]()

// describeType names what a JSON value must be to fit t.
func describeType(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == timeType {
		return "an RFC 3339 time string"
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Int:
		bits := t.Bits()
		return fmt.Sprintf("an integer from %d to %d", int64(-1)<<(bits-1), uint64(1)<<(bits-1)-1)
	case reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uint:
		return fmt.Sprintf("an integer from 0 to %d", uint64(1)<<t.Bits()-1)
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "a JSON array"
	default:
		return "a JSON object"
	}
}

func invalidUTF8At(data []byte) int {
	for i := 0; i < len(data); {
		r, size := utf8.DecodeRune(data[i:])
		if r == utf8.RuneError && size <= 1 {
			return i
		}
		i += size
	}
	return len(data)
}

// CheckText refuses filter values that could never match and that
// PostgreSQL would refuse as text (NUL, invalid UTF-8).
func CheckText(field, s string) error {
	if len(s) > 255 || !utf8.ValidString(s) || strings.ContainsFunc(s, isControl) {
		return BadRequest(field, "must be at most 255 printable characters")
	}
	return nil
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f }

// JobID reads the :id path parameter: a job's (or an artifact's) id, a
// positive 64-bit integer.
func JobID(c echo.Context) (int64, error) {
	id, err := strconv.ParseInt(c.Param("id"), 10, 64)
	if errors.Is(err, strconv.ErrRange) {
		return 0, BadRequest("id", "is out of range")
	}
	if err != nil || id < 1 {
		return 0, BadRequest("id", "must be a positive integer")
	}
	return id, nil
}
