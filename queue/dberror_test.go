package queue

import (
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// TestInputRefusedTranslatesDataErrors: what the database refuses because
// of a value becomes a ValidationError (a 400), and nothing else does.
func TestInputRefusedTranslatesDataErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		err   error
		field string // "-" when the error must come back unchanged
	}{
		{"IndexRowTooLarge", &pgconn.PgError{Code: "54000", Message: "index row size 2816 exceeds btree version 4 maximum 2704"}, "jobs"},
		{"InvalidText", fmt.Errorf("wrapped: %w", &pgconn.PgError{Code: "22P02", Message: "invalid input syntax"}), "jobs"},
		{"StringTooLong", &pgconn.PgError{Code: "22001", Message: "value too long"}, "jobs"},
		{"UniqueViolation", &pgconn.PgError{Code: "23505"}, "-"},
		{"TooManyConnections", &pgconn.PgError{Code: "53300"}, "-"},
		{"NotPostgres", errors.New("connection reset"), "-"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := inputRefused(tc.err, "jobs")
			var ve *ValidationError
			switch {
			case tc.field == "-" && got != tc.err:
				t.Fatalf("got %v, want the error unchanged", got)
			case tc.field != "-" && (!errors.As(got, &ve) || ve.Field != tc.field || ve.Message == ""):
				t.Fatalf("got %#v, want a ValidationError on %s", got, tc.field)
			}
		})
	}
}
