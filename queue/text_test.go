package queue_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/leasehold/leasehold/queue"
)

// What reaches PostgreSQL, and what it refuses, which the rules of
// CheckText and checkDocument are made of: text refuses NUL (22021);
// jsonb refuses \u0000 (22P05) and an unpaired surrogate escape (22P02)
// in strings and keys alike; encoding/json hands a Go string no lone
// surrogate (it decodes one as U+FFFD, which text takes) but keeps NUL.
func TestWhatPostgreSQLRefusesInText(t *testing.T) {
	t.Parallel()
	f := setup(t, 2)
	for _, tc := range []struct {
		name, sql, arg, code string
	}{
		{"TextNUL", "select $1::text", "a\x00b", "22021"},
		{"JsonbNUL", "select $1::text::jsonb", `{"a":"x\u0000"}`, "22P05"},
		{"JsonbKeyNUL", "select $1::text::jsonb", `{"\u0000":1}`, "22P05"},
		{"JsonbLoneSurrogate", "select $1::text::jsonb", `{"a":"\ud800"}`, "22P02"},
		{"JsonbKeyLoneSurrogate", "select $1::text::jsonb", `{"\udc00":1}`, "22P02"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out string
			err := f.pool.QueryRow(f.ctx, tc.sql, tc.arg).Scan(&out)
			var pgErr *pgconn.PgError
			if !errors.As(err, &pgErr) || pgErr.Code != tc.code {
				t.Fatalf("%s(%q) = %q, %v; want SQLSTATE %s", tc.sql, tc.arg, out, err, tc.code)
			}
		})
	}
	var s struct{ A, B string }
	if err := json.Unmarshal([]byte(`{"a":"\ud800","b":"\u0000"}`), &s); err != nil || s.A != "\uFFFD" || s.B != "\x00" {
		t.Fatalf("decoded %q %q, %v", s.A, s.B, err)
	}
	if err := queue.CheckText("f", s.B, 10); err == nil {
		t.Error("CheckText took a NUL")
	}
	if err := queue.CheckText("f", s.A, 10); err != nil {
		t.Errorf("CheckText refused U+FFFD: %v", err)
	}
	if got := queue.CleanText("a\x00\xffb"+strings.Repeat("é", 10), 8); queue.CheckText("f", got, 8) != nil || !strings.HasPrefix(got, "a\uFFFDb") {
		t.Errorf("CleanText gave %q", got)
	}
}

// checkNumber counts a number as PostgreSQL writes it out (jsonb keeps
// numerics exactly and prints them without exponent): for every number it
// accepts, the count is what the database gives back.
func TestStoredNumbersAreCountedAsPostgreSQLPrintsThem(t *testing.T) {
	t.Parallel()
	f := setup(t, 2)
	for _, num := range []string{
		"0", "-0", "7", "-12", "0.5", "1.50", "-0.000001", "1e2", "1E+2", "1.5e3", "15e-1", "0.0000001e6",
		"123.45e1", "1e308", "1.7976931348623157e308", "-1.7976931348623157e308", "5e-324", "4.9e-324",
		"9223372036854775807", "0e-10", "0.000e5", "100e-2", "1e-300", "2.5e-5",
	} {
		stored, problem := queue.StoredNumber(num)
		if problem != "" {
			t.Errorf("%s refused: %s", num, problem)
			continue
		}
		var printed string
		if err := f.pool.QueryRow(f.ctx, "select ($1::text::jsonb)::text", num).Scan(&printed); err != nil {
			t.Fatal(err)
		}
		// -0 is printed 0: counted one byte over, which is safe.
		if stored != len(printed) && !(num == "-0" && stored == len(printed)+1) {
			t.Errorf("%s: counted %d bytes, PostgreSQL prints %d (%.40s)", num, stored, len(printed), printed)
		}
	}
	for _, num := range []string{"1e999", "1.8e308", "-1e309", "1e-400", "0e-99999", "1e99999999999999999999", strings.Repeat("9", 65)} {
		if _, problem := queue.StoredNumber(num); problem == "" {
			t.Errorf("%s accepted", num)
		}
	}
}

// A refused document says where in it the fault is.
func TestDocumentProblemsSayWhere(t *testing.T) {
	t.Parallel()
	for payload, where := range map[string]string{
		`{"n":1e999}`:                           "(at n)",
		`{"a":{"b":[1,2,{"c":[0,-1e400]}]}}`:    "(at a.b[2].c[1])",
		`{"a":"x","b":[{"s":"ok"},"\u0000"]}`:   "(at b[1])",
		`{"a":{"x":1,"\ud800":2}}`:              "(in a key of a)",
		`{"\u0000":1}`:                          "(in a key)",
		`{"we\"ird.k":[1e-400]}`:                `(at we"ird.k[0])`,
		`{"s":"\\u0000 is text","t":[1,1e999]}`: "(at t[1])",
	} {
		nj := queue.NewJob{Kind: "test", Payload: json.RawMessage(payload)}
		err := nj.Normalize()
		if err == nil || !strings.HasSuffix(err.Error(), where) {
			t.Errorf("%s: %v, want it to end %q", payload, err, where)
		}
	}
}
