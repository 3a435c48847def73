package queue

import (
	"log/slog"
	"slices"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/db"
)

// Client runs the lease lifecycle against one database.
type Client struct {
	pool   *pgxpool.Pool
	q      *db.Queries
	logger *slog.Logger
	limits limitsSeen
	// rated: whether jobs that name rate-limit keys were due at the last
	// claim, per set of queues and devices, as limits.
	rated limitsSeen
	// now, when set, is the time the lease statements take instead of the
	// database clock. Only tests set it (export_test.go): production
	// passes NULL, which the statements read as now().
	now *time.Time
	// succeeded keeps the workers' completed jobs per past hour for
	// WorkerStatuses.
	succeeded hourlySucceeded
}

// NewClient returns a Client on pool.
func NewClient(pool *pgxpool.Pool, logger *slog.Logger) *Client {
	if logger == nil {
		logger = slog.Default()
	}
	return &Client{pool: pool, q: db.New(pool), logger: logger}
}

// maxMessageBytes bounds the error and progress messages a job keeps.
const maxMessageBytes = 64 << 10

func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func nonZero(n int64) *int64 {
	if n == 0 {
		return nil
	}
	return &n
}

func mapKeys(m map[string]bool) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
