package queue

import (
	"context"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/leasehold/leasehold/db"
)

// Bounds of a search's text (Filter.Text): the index finds substrings
// of three characters or more; longer than MaxSearchLen is no search
// anyone types.
const (
	MinSearchLen = 3
	MaxSearchLen = 200
)

// CheckSearch checks the text of a search (the q= of the jobs list),
// trimmed of spaces: field names it in the error.
func CheckSearch(field, q string) error {
	n := utf8.RuneCountInString(q)
	switch {
	case !utf8.ValidString(q) || strings.ContainsFunc(q, unicode.IsControl):
		return invalid(field, "must be text without control characters")
	case n < MinSearchLen:
		return invalid(field, "must be at least %d characters: shorter text is in nearly every job", MinSearchLen)
	case n > MaxSearchLen:
		return invalid(field, "must be at most %d characters", MaxSearchLen)
	}
	return nil
}

// searchSpan is how many of the newest jobs (before the cursor) a
// search reads one by one before it asks the index: a term in one job
// out of 100 or more fills a page of 50 among them, and reading them
// costs about 10 ms on a quiet machine; a rarer term is found through
// jobs_search_idx, whose matches are then at most one in 100 of the
// jobs (docs/search.md).
const searchSpan = 5_000

// search is List with f.Text: a case-insensitive substring search of
// the job's app, payload (its instructions), last error and result,
// combined with f's other filters, newest first. It reads the newest
// searchSpan jobs first, and goes to the trigram index only when they
// hold less than a page: for a common term the index would collect
// every match before sorting, for a rare one the walk by id would read
// the whole table. No total is counted.
func (c *Client) search(ctx context.Context, f Filter, before int64, limit int) (jobs []Job, next *int64, err error) {
	if err := CheckSearch("q", f.Text); err != nil {
		return nil, nil, err
	}
	pattern := "%" + likeEscaper.Replace(strings.ToLower(f.Text)) + "%"
	var state *db.JobState
	if f.State != "" {
		state = ptr(db.JobState(f.State))
	}
	rows, err := c.q.JobSearchRecent(ctx, db.JobSearchRecentParams{
		BeforeID: before, Span: searchSpan, Pattern: pattern, Max: int32(limit + 1),
		State: state, Kind: nonEmpty(f.Kind), Queue: nonEmpty(f.Queue), App: nonEmpty(f.App),
	})
	if err != nil {
		return nil, nil, fmt.Errorf("searching jobs: %w", inputRefused(err, "q"))
	}
	if len(rows) <= limit {
		// Bitmap scans only: with any other plan open, the planner may
		// walk every job by id for a term it guesses common.
		err = pgx.BeginTxFunc(ctx, c.pool, pgx.TxOptions{AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, "SET LOCAL enable_seqscan = off; SET LOCAL enable_indexscan = off"); err != nil {
				return err
			}
			rows, err = c.q.WithTx(tx).JobSearchIndexed(ctx, db.JobSearchIndexedParams{
				BeforeID: before, Pattern: pattern, Max: int32(limit + 1),
				State: state, Kind: nonEmpty(f.Kind), Queue: nonEmpty(f.Queue), App: nonEmpty(f.App),
			})
			return err
		})
		if err != nil {
			return nil, nil, fmt.Errorf("searching jobs: %w", inputRefused(err, "q"))
		}
	}
	if len(rows) > limit {
		rows = rows[:limit]
		next = &rows[limit-1].ID
	}
	return toJobs(rows), next, nil
}

// likeEscaper makes text match itself in a LIKE pattern (whose escape
// character is the backslash).
var likeEscaper = strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)
