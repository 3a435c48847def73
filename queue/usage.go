package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasehold/leasehold/api"
	"github.com/leasehold/leasehold/db"
)

// Bounds of a budget and of one usage report.
const (
	// MaxCostLimit bounds a job's max_cost: a billion units of a
	// currency, in micro-units.
	MaxCostLimit = 1_000_000_000_000_000
	// MaxStepsLimit bounds a job's max_steps.
	MaxStepsLimit = 1_000_000
	// maxUsageAmount bounds each number of one report: tokens, cost and
	// counters (a trillion; far past any one step, short of overflow
	// after any number of reports).
	maxUsageAmount = 1_000_000_000_000
	// MaxUsageCounters is the most counters one report may name.
	MaxUsageCounters = 32
	// DefaultCurrency is a report's currency when it names none.
	DefaultCurrency = "USD"
)

// BudgetSpent is the error, and the reason, of an attempt ended because
// its job's max_cost or max_steps was reached.
const BudgetSpent = "budget spent"

// ErrBudgetSpent answers the usage or progress write that spent its job's
// budget: the write was recorded, and the attempt is over (failed,
// permanently, reason BudgetSpent). The worker stops the executor and
// writes nothing more: its lease is gone.
var ErrBudgetSpent = errors.New(BudgetSpent)

var (
	modelPattern    = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:/@+-]{0,127}$`)
	currencyPattern = regexp.MustCompile(`^[A-Z]{3}$`)
	counterPattern  = regexp.MustCompile(`^[a-z0-9_.-]{1,64}$`)
)

// Usage is one report of what an attempt used: a model's tokens, their
// cost in micro-units of Currency, and free-form counters (screens seen,
// taps made). Reports add up per attempt, model and currency.
type Usage struct {
	Model        string
	InputTokens  int64
	OutputTokens int64
	CostMicros   int64
	// Currency is an ISO 4217 code; "" is DefaultCurrency.
	Currency string
	Counters map[string]int64
}

// CheckUsage checks u as Client.Usage does and fills in its currency; a
// *ValidationError names the field as the worker API has it.
func CheckUsage(u *Usage) error {
	if u.Model == "" {
		u.Model = "unknown"
	}
	if !modelPattern.MatchString(u.Model) {
		return invalid("model", "must be 1 to 128 characters of letters, digits and _.:/@+-, starting with a letter or digit")
	}
	if u.Currency == "" {
		u.Currency = DefaultCurrency
	}
	if !currencyPattern.MatchString(u.Currency) {
		return invalid("currency", "must be a three-letter ISO 4217 code such as USD")
	}
	for field, n := range map[string]int64{"input_tokens": u.InputTokens, "output_tokens": u.OutputTokens, "cost_micros": u.CostMicros} {
		if n < 0 || n > maxUsageAmount {
			return invalid(field, "must be between 0 and %d", int64(maxUsageAmount))
		}
	}
	if len(u.Counters) > MaxUsageCounters {
		return invalid("counters", "must name at most %d counters", MaxUsageCounters)
	}
	for k, n := range u.Counters {
		if !counterPattern.MatchString(k) {
			return invalid("counters", "names must match [a-z0-9_.-]{1,64}")
		}
		if n < 0 || n > maxUsageAmount {
			return invalid("counters."+k, "must be between 0 and %d", int64(maxUsageAmount))
		}
	}
	return nil
}

// Usage records u for l's attempt, fenced like every write of it. When
// the job's cost spent reaches its max_cost, the attempt ends failed,
// permanently, with reason BudgetSpent, in the same transaction, and the
// answer is ErrBudgetSpent.
func (c *Client) Usage(ctx context.Context, l Lease, u Usage) error {
	if err := CheckUsage(&u); err != nil {
		return err
	}
	counters, err := json.Marshal(u.Counters)
	if err != nil || u.Counters == nil {
		counters = []byte(`{}`)
	}
	var refused, spent bool
	err = pgx.BeginFunc(ctx, c.pool, func(tx pgx.Tx) error {
		q := c.q.WithTx(tx)
		row, err := q.UsageAdd(ctx, db.UsageAddParams{
			JobID: l.JobID, LeaseToken: l.Token, WorkerID: l.WorkerID, Model: u.Model, Currency: u.Currency,
			InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, CostMicros: u.CostMicros, Counters: counters,
		})
		if errors.Is(err, pgx.ErrNoRows) {
			refused = true
			return nil
		}
		if err != nil {
			return fmt.Errorf("recording usage: %w", err)
		}
		if spent = row.Spent; spent {
			return c.spend(ctx, q, l)
		}
		return nil
	})
	switch {
	case err != nil:
		return err
	case refused:
		return c.refused(ctx, "usage", l)
	case spent:
		c.logger.Info("budget spent: attempt ended", "job_id", l.JobID, "token", l.Token, "by", "cost")
		return ErrBudgetSpent
	}
	return nil
}

// spend ends l's attempt as failed, permanently, because its budget is
// spent; through q, the transaction of the write that spent it.
func (c *Client) spend(ctx context.Context, q *db.Queries, l Lease) error {
	msg := BudgetSpent
	_, err := q.JobFail(ctx, db.JobFailParams{ID: l.JobID, LeaseToken: l.Token, WorkerID: l.WorkerID, Error: &msg, Retryable: false, Now: c.now})
	if errors.Is(err, pgx.ErrNoRows) {
		return ErrLeaseLost // ended meanwhile, by another write of the same holder
	}
	if err != nil {
		return fmt.Errorf("ending an attempt whose budget is spent: %w", err)
	}
	return nil
}

// AttemptUsage is what one attempt reported for one model and currency.
type AttemptUsage struct {
	Attempt      int32
	Model        string
	Currency     string
	InputTokens  int64
	OutputTokens int64
	CostMicros   int64
	Counters     map[string]int64
	Reports      int32
	ReportedAt   time.Time
}

func (c *Client) usage(ctx context.Context, jobID int64) ([]AttemptUsage, error) {
	rows, err := c.q.UsageListByJob(ctx, jobID)
	if err != nil {
		return nil, fmt.Errorf("reading usage: %w", err)
	}
	out := make([]AttemptUsage, len(rows))
	for i, r := range rows {
		out[i] = AttemptUsage{
			Attempt: r.Attempt, Model: r.Model, Currency: r.Currency, InputTokens: r.InputTokens,
			OutputTokens: r.OutputTokens, CostMicros: r.CostMicros, Reports: r.Reports, ReportedAt: r.ReportedAt,
			Counters: decodeCounters(r.Counters),
		}
	}
	return out, nil
}

// decodeCounters reads summed counters; a sum past int64 (it cannot be
// reached within the bounds of a report, but the column is jsonb) is
// clamped rather than lost.
func decodeCounters(raw []byte) map[string]int64 {
	var m map[string]float64
	if json.Unmarshal(raw, &m) != nil {
		return map[string]int64{}
	}
	out := make(map[string]int64, len(m))
	for k, v := range m {
		out[k] = int64(min(v, math.MaxInt64))
	}
	return out
}

// UsageGroups are what a usage summary may be grouped by.
var UsageGroups = []string{"app", "kind", "day"}

// MaxUsageRange is the longest span a usage summary covers, and
// MaxUsageRows the most groups it answers.
const (
	MaxUsageRange = 366 * 24 * time.Hour
	MaxUsageRows  = 1000
)

// UsageQuery selects a usage summary: usage first reported in [From, To),
// summed by GroupBy ("app", "kind" or "day").
type UsageQuery struct {
	From, To time.Time
	GroupBy  string
}

// UsageRow is one group of a usage summary, in one currency.
type UsageRow struct {
	Key          string
	Currency     string
	Jobs         int64
	InputTokens  int64
	OutputTokens int64
	CostMicros   int64
}

// CheckUsageQuery checks q as UsageSummary does.
func CheckUsageQuery(q UsageQuery) error {
	ok := false
	for _, g := range UsageGroups {
		ok = ok || q.GroupBy == g
	}
	if !ok {
		return invalid("group_by", "must be app, kind or day")
	}
	if !q.To.After(q.From) {
		return invalid("to", "must be after from")
	}
	if q.To.Sub(q.From) > MaxUsageRange {
		return invalid("from", "the range may cover at most %d days", int(MaxUsageRange/(24*time.Hour)))
	}
	return nil
}

// UsageSummary sums the usage q selects, by group and currency: at most
// MaxUsageRows rows, the costliest first (days in order for "day").
func (c *Client) UsageSummary(ctx context.Context, q UsageQuery) ([]UsageRow, error) {
	if err := CheckUsageQuery(q); err != nil {
		return nil, err
	}
	rows, err := c.q.UsageSummary(ctx, db.UsageSummaryParams{GroupBy: q.GroupBy, FromAt: q.From, ToAt: q.To, Max: MaxUsageRows})
	if err != nil {
		return nil, fmt.Errorf("summing usage: %w", err)
	}
	out := make([]UsageRow, len(rows))
	for i, r := range rows {
		out[i] = UsageRow{Key: r.Key, Currency: r.Currency, Jobs: r.Jobs, InputTokens: r.InputTokens, OutputTokens: r.OutputTokens, CostMicros: r.CostMicros}
	}
	return out, nil
}

// UsageTotal is what one currency and model used since the beginning.
type UsageTotal struct {
	Currency, Model                       string
	InputTokens, OutputTokens, CostMicros int64
	Reports                               int64
}

// UsageTotals reads the totals /metrics exports: one small table, kept
// by every usage write and never pruned.
func (c *Client) UsageTotals(ctx context.Context) ([]UsageTotal, error) {
	rows, err := c.q.UsageTotals(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading usage totals: %w", err)
	}
	out := make([]UsageTotal, len(rows))
	for i, r := range rows {
		out[i] = UsageTotal{Currency: r.Currency, Model: r.Model, InputTokens: r.InputTokens, OutputTokens: r.OutputTokens, CostMicros: r.CostMicros, Reports: r.Reports}
	}
	return out, nil
}

// API is the attempt's usage as the API shows it.
func (u AttemptUsage) API() api.AttemptUsage {
	return api.AttemptUsage{
		Attempt: u.Attempt, Model: u.Model, Currency: u.Currency, InputTokens: u.InputTokens,
		OutputTokens: u.OutputTokens, CostMicros: u.CostMicros, Counters: u.Counters, Reports: u.Reports,
		ReportedAt: api.Time(u.ReportedAt),
	}
}

// UsageFromAPI is the usage a report over the API names.
func UsageFromAPI(u api.Usage) Usage {
	return Usage{Model: u.Model, InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, CostMicros: u.CostMicros, Currency: u.Currency, Counters: u.Counters}
}

// API is u as the worker API sends it.
func (u Usage) API() api.Usage {
	return api.Usage{Model: u.Model, InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, CostMicros: u.CostMicros, Currency: u.Currency, Counters: u.Counters}
}

// DefaultUsageRange is what a usage summary covers when from is not given.
const DefaultUsageRange = 30 * 24 * time.Hour

// ParseUsageQuery reads a usage summary's query as GET /api/v1/usage and
// the /usage page take it: from and to as RFC 3339 times or dates
// (YYYY-MM-DD, midnight UTC; a date to includes its day), to defaulting
// to now and from to DefaultUsageRange before to, group_by to "day". A
// query CheckUsageQuery refuses is its *ValidationError.
func ParseUsageQuery(from, to, groupBy string, now time.Time) (UsageQuery, error) {
	q := UsageQuery{To: now, GroupBy: groupBy}
	if q.GroupBy == "" {
		q.GroupBy = "day"
	}
	if to != "" {
		t, date, err := parseUsageTime(to)
		if err != nil {
			return UsageQuery{}, invalid("to", "must be an RFC 3339 time or a date (YYYY-MM-DD)")
		}
		if date {
			t = t.Add(24 * time.Hour)
		}
		q.To = t
	}
	q.From = q.To.Add(-DefaultUsageRange)
	if from != "" {
		t, _, err := parseUsageTime(from)
		if err != nil {
			return UsageQuery{}, invalid("from", "must be an RFC 3339 time or a date (YYYY-MM-DD)")
		}
		q.From = t
	}
	return q, CheckUsageQuery(q)
}

func parseUsageTime(s string) (t time.Time, date bool, err error) {
	if len(s) > 64 {
		return time.Time{}, false, errors.New("too long")
	}
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		return t, true, nil
	}
	t, err = time.Parse(time.RFC3339Nano, s)
	return t, false, err
}

// API is the summary as GET /api/v1/usage answers it.
func (q UsageQuery) API(rows []UsageRow) api.UsageSummary {
	out := api.UsageSummary{From: api.Time(q.From), To: api.Time(q.To), GroupBy: q.GroupBy, Rows: make([]api.UsageRow, len(rows))}
	for i, r := range rows {
		out.Rows[i] = api.UsageRow{Key: r.Key, Currency: r.Currency, Jobs: r.Jobs, InputTokens: r.InputTokens, OutputTokens: r.OutputTokens, CostMicros: r.CostMicros}
	}
	return out
}
