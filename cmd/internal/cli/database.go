package cli

import (
	"flag"
	"time"

	"github.com/leasehold/leasehold/db"
)

// DatabaseTimeouts are the bounds of a program's database connections:
// --connect-timeout and --statement-timeout (LEASEHOLD_CONNECT_TIMEOUT,
// LEASEHOLD_STATEMENT_TIMEOUT).
type DatabaseTimeouts struct {
	Connect, Statement time.Duration
}

// Register adds the flags of t to fs, with db's defaults.
func (t *DatabaseTimeouts) Register(fs *flag.FlagSet) {
	fs.DurationVar(&t.Connect, "connect-timeout", db.DefaultConnectTimeout,
		"how long each connection attempt to a database host may take (a connect_timeout in the URL wins)")
	fs.DurationVar(&t.Statement, "statement-timeout", db.DefaultStatementTimeout,
		"PostgreSQL's statement_timeout on every connection, 0 for none (a statement_timeout in the URL wins)")
}

// Apply sets the timeouts of cfg.
func (t DatabaseTimeouts) Apply(cfg *db.PoolConfig) {
	cfg.ConnectTimeout = t.Connect
	cfg.StatementTimeout = t.Statement
	if t.Statement == 0 {
		cfg.StatementTimeout = -1 // PoolConfig's 0 is the default
	}
}
