package api

// RateLimit is a rate-limit key and its budgets, by window length.
type RateLimit struct {
	Key     string       `json:"key"`
	Budgets []RateBudget `json:"budgets"`
}

// RateBudget is one budget of a key and what its current window spent.
type RateBudget struct {
	// Budget as it is written: "60/min".
	Budget        string `json:"budget"`
	Limit         int    `json:"limit"`
	WindowSeconds int    `json:"window_seconds"`
	// Used is what the current window has spent; WindowEnd is when it
	// ends and the budget returns whole.
	Used      int     `json:"used"`
	WindowEnd Time    `json:"window_end"`
	UpdatedAt Time    `json:"updated_at"`
	UpdatedBy *string `json:"updated_by"`
}

// RateLimits is GET /api/v1/rate-limits: every key that has budgets.
type RateLimits struct {
	RateLimits []RateLimit `json:"rate_limits"`
}

// RateLimitPut is the body of PUT /api/v1/rate-limits/{key}: the key's
// budgets ("60/min", "10000/day"; units s, min, h, day), at most one per
// window length; they replace the key's budgets.
type RateLimitPut struct {
	Budgets []string `json:"budgets"`
}
