package queue

import (
	"context"
	"errors"
	"fmt"
	"io"
	"syscall"
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

// TestUnavailable: the errors that heal (the database away, restarting,
// read-only, out of time) and those that do not.
func TestUnavailable(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"Nil", nil, false},
		{"AdminShutdown", &pgconn.PgError{Code: "57P01"}, true},
		{"CrashShutdown", &pgconn.PgError{Code: "57P02"}, true},
		{"StartingUp", &pgconn.PgError{Code: "57P03"}, true},
		{"StatementTimeout", &pgconn.PgError{Code: "57014"}, true},
		{"ReadOnly", fmt.Errorf("inserting job: %w", &pgconn.PgError{Code: "25006"}), true},
		{"ConnectionFailure", &pgconn.PgError{Code: "08006"}, true},
		{"Serialization", &pgconn.PgError{Code: "40001"}, true},
		{"Deadlock", &pgconn.PgError{Code: "40P01"}, true},
		{"TooManyConnections", &pgconn.PgError{Code: "53300"}, true},
		{"Deadline", fmt.Errorf("claiming: %w", context.DeadlineExceeded), true},
		{"ConnClosed", fmt.Errorf("x: %w", pgconn.ErrConnClosed), true},
		{"EOF", fmt.Errorf("failed to receive message: %w", io.ErrUnexpectedEOF), true},
		{"Reset", fmt.Errorf("read: %w", syscall.ECONNRESET), true},
		{"Refused", fmt.Errorf("dial: %w", syscall.ECONNREFUSED), true},
		{"UniqueViolation", &pgconn.PgError{Code: "23505"}, false},
		{"InvalidText", &pgconn.PgError{Code: "22P02"}, false},
		{"LeaseLost", ErrLeaseLost, false},
		{"Validation", invalid("key", "bad"), false},
		{"BadPassword", &pgconn.PgError{Code: "28P01"}, false},
		{"SyntaxError", &pgconn.PgError{Code: "42601"}, false},
		{"Canceled", context.Canceled, false},
		{"Other", errors.New("boom"), false},
	} {
		if got := Unavailable(tc.err); got != tc.want {
			t.Errorf("%s: Unavailable(%v) = %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
}
