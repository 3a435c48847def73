package queue

import (
	"errors"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

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
