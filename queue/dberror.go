package queue

import (
	"context"
	"errors"
	"io"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"
)

// Unavailable reports whether err says the database is away or refuses
// writes for now, which heals by itself: a failover, a restart, a
// read-only window, a frozen server whose statement ran out of time. The
// HTTP server answers it 503 with Retry-After, workers retry it; any
// other error is a bug or bad input and stays what it is.
//
// It is the one place that knows these errors: SQLSTATE class 08
// (connection exception), 57P01–57P03 (shut down, crashed, not yet
// accepting connections), 57014 (a statement cancelled, by
// statement_timeout), 25006 (read-only transaction, also on a standby),
// 40001 and 40P01 (serialization failure, deadlock), 53300 (too many
// connections), 55P03 (lock_timeout); a connection that could not be
// made or was lost; a deadline that ran out (the statement's or the
// request's, also while waiting for a pool connection). A refused role or
// password, or a database that does not exist, does not heal and is not
// unavailable.
func Unavailable(err error) bool {
	if err == nil {
		return false
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "57P01", "57P02", "57P03", "57014", "25006", "40001", "40P01", "53300", "55P03":
			return true
		}
		return strings.HasPrefix(pgErr.Code, "08")
	}
	var connectErr *pgconn.ConnectError
	return errors.As(err, &connectErr) ||
		errors.Is(err, context.DeadlineExceeded) || pgconn.Timeout(err) ||
		errors.Is(err, pgconn.ErrConnClosed) || pgconn.SafeToRetry(err) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EPIPE)
}

// inputRefused translates a database error that a submitted value caused
// into a *ValidationError on field ("" when no one field is to blame):
// a data exception (SQLSTATE class 22) or a value too large for an index
// or a column (54000, program_limit_exceeded). Normalize is meant to
// refuse such values first; this keeps any it misses a 400 rather than a
// 500. Other errors come back unchanged.
func inputRefused(err error, field string) error {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || (pgErr.Code != "54000" && !strings.HasPrefix(pgErr.Code, "22")) {
		return err
	}
	return invalid(field, "refused by the database: %s", pgErr.Message)
}
