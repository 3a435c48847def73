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

// TestTransient: the database errors that heal by themselves are retried;
// a refusal of the write itself, and a context that ended, are not.
func TestTransient(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"AdminShutdown", fmt.Errorf("recording progress: %w", &pgconn.PgError{Code: "57P01"}), true},
		{"CannotConnectNow", &pgconn.PgError{Code: "57P03"}, true},
		{"ReadOnly", fmt.Errorf("starting effect: %w", &pgconn.PgError{Code: "25006"}), true},
		{"ConnectionFailure", &pgconn.PgError{Code: "08006"}, true},
		{"TooManyConnections", &pgconn.PgError{Code: "53300"}, true},
		{"Serialization", &pgconn.PgError{Code: "40001"}, true},
		{"Refused", fmt.Errorf("wrapped: %w", syscall.ECONNREFUSED), true},
		{"Reset", syscall.ECONNRESET, true},
		{"UnexpectedEOF", io.ErrUnexpectedEOF, true},
		{"UniqueViolation", &pgconn.PgError{Code: "23505"}, false},
		{"InvalidText", &pgconn.PgError{Code: "22P02"}, false},
		{"AuthFailed", &pgconn.PgError{Code: "28P01"}, false},
		{"LeaseLost", ErrLeaseLost, false},
		{"Validation", invalid("key", "bad"), false},
		{"Cancelled", context.Canceled, false},
		{"Deadline", fmt.Errorf("x: %w", context.DeadlineExceeded), false},
		{"Nil", nil, false},
		{"Other", errors.New("something else"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Transient(tc.err); got != tc.want {
				t.Fatalf("Transient(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}
