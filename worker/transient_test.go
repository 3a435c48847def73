package worker

import (
	"errors"
	"fmt"
	"net/http"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/leasehold/leasehold/queue"
)

// transient retries what heals, for both backends: a database error only
// when queue.Unavailable says so, a server's 5xx and 429, a connection
// refused; never a refusal of the write.
func TestTransientForBothBackends(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"ReadOnly", fmt.Errorf("recording progress: %w", &pgconn.PgError{Code: "25006"}), true},
		{"AdminShutdown", fmt.Errorf("starting effect: %w", &pgconn.PgError{Code: "57P01"}), true},
		{"UniqueViolation", fmt.Errorf("recording artifact: %w", &pgconn.PgError{Code: "23505"}), false},
		{"Refused", fmt.Errorf("POST /x: %w", syscall.ECONNREFUSED), true},
		{"BadGateway", &statusError{status: http.StatusBadGateway}, true},
		{"TooMany", &statusError{status: http.StatusTooManyRequests}, true},
		{"BadRequest", &statusError{status: http.StatusBadRequest}, false},
		{"Invalid", &queue.ValidationError{Field: "file", Message: "not an image"}, false},
		{"LeaseLost", queue.ErrLeaseLost, false},
		{"NoStorage", errNoArtifactStorage, false},
		{"Other", errors.New("disk hiccup"), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := transient(tc.err); got != tc.want {
				t.Fatalf("transient(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}
