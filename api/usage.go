package api

// ActionUsage is the worker API's action that reports usage
// (POST JobPath(id, ActionUsage), body UsageRequest).
const ActionUsage = "usage"

// Usage is one report of what an attempt used: the `usage` line of an
// exec executor, the body of the worker's usage action.
type Usage struct {
	// Model names what was used ("unknown" when empty).
	Model        string `json:"model,omitempty"`
	InputTokens  int64  `json:"input_tokens,omitempty"`
	OutputTokens int64  `json:"output_tokens,omitempty"`
	// CostMicros is the cost in micro-units (millionths) of Currency.
	CostMicros int64 `json:"cost_micros,omitempty"`
	// Currency is an ISO 4217 code; empty means USD.
	Currency string `json:"currency,omitempty"`
	// Counters are free-form: names [a-z0-9_.-]{1,64}, non-negative
	// integers, at most 32 of them.
	Counters map[string]int64 `json:"counters,omitempty"`
}

// UsageRequest is the body of the usage action.
type UsageRequest struct {
	LeaseRequest
	Usage
}

// AttemptUsage is what one attempt reported for one model and currency,
// summed over its reports.
type AttemptUsage struct {
	Attempt      int32            `json:"attempt"`
	Model        string           `json:"model"`
	Currency     string           `json:"currency"`
	InputTokens  int64            `json:"input_tokens"`
	OutputTokens int64            `json:"output_tokens"`
	CostMicros   int64            `json:"cost_micros"`
	Counters     map[string]int64 `json:"counters"`
	Reports      int32            `json:"reports"`
	ReportedAt   Time             `json:"reported_at"`
}

// UsageSummary answers GET /api/v1/usage: usage first reported in
// [from, to), summed by group_by, one row per group and currency.
type UsageSummary struct {
	From    Time       `json:"from"`
	To      Time       `json:"to"`
	GroupBy string     `json:"group_by"`
	Rows    []UsageRow `json:"rows"`
}

// UsageRow is one group of a UsageSummary.
type UsageRow struct {
	// Key is the app (empty for jobs without one), the kind, or the day
	// (YYYY-MM-DD, UTC).
	Key          string `json:"key"`
	Currency     string `json:"currency"`
	Jobs         int64  `json:"jobs"`
	InputTokens  int64  `json:"input_tokens"`
	OutputTokens int64  `json:"output_tokens"`
	CostMicros   int64  `json:"cost_micros"`
}
