package queue

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"
)

// Transient reports whether a database error may heal by itself, so that
// the same write, sent again a little later, can succeed: the connection
// was lost or refused (a restart, a failover, a network blip), the server
// is shutting down or starting up (57P01, 57P02, 57P03), it accepts only
// reads for now (25006, a standby or a read-only window), it is out of
// connections (53300), or the transaction lost a race it may win next
// time (40001, 40P01). A refusal of the write itself (a constraint, bad
// input, a lost lease) is not transient, nor is a context that ended.
func Transient(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "57P01", "57P02", "57P03", "25006", "53300", "40001", "40P01":
			return true
		}
		return strings.HasPrefix(pgErr.Code, "08") // connection exceptions
	}
	var (
		connectErr *pgconn.ConnectError
		netErr     net.Error
	)
	switch {
	case errors.As(err, &connectErr), errors.As(err, &netErr):
		return true
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return true
	}
	// A connection pgx found closed, or a statement it knows never
	// reached the server.
	return pgconn.SafeToRetry(err) || pgconn.Timeout(err)
}
