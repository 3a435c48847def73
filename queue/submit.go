package queue

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"time"
	"unicode/utf8"
)

// Limits on what a job may hold.
const (
	MaxPayloadBytes   = 1 << 20
	MaxBatch          = 10_000
	MaxAttemptsLimit  = 1000
	maxBackoffMs      = 7 * 24 * 3600 * 1000
	maxIdempotencyKey = 255
	// MaxConcurrencyKey is the longest concurrency key, in characters.
	MaxConcurrencyKey = 200
	// MaxConcurrencyLimit bounds a key's limit (more is no limit at all).
	MaxConcurrencyLimit = 1_000_000
	maxApp              = 255
	maxInstructions     = 64 << 10
	defaultBackoffBase  = 1000
	defaultBackoffMax   = 600_000
)

var (
	namePattern    = regexp.MustCompile(`^[a-z0-9_.-]{1,64}$`)
	packagePattern = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9_]*(\.[a-zA-Z][a-zA-Z0-9_]*)+$`)
	labelPattern   = regexp.MustCompile(`^[A-Za-z0-9_.:-]{1,64}$`)
)

// DefaultMaxAttempts is a job's max_attempts when it names none (SPEC).
const DefaultMaxAttempts = 5

// NewJob is a job as submitted. Pointer fields are optional and take the
// documented defaults.
type NewJob struct {
	Kind           string
	Queue          string
	Priority       int32
	Payload        json.RawMessage
	MaxAttempts    *int32
	RunAt          *time.Time
	TimeoutMs      *int32
	IdempotencyKey *string
	BackoffBaseMs  *int32
	BackoffMaxMs   *int32
	// Schedule names the schedule that makes this job; only the scheduler
	// sets it.
	Schedule *string
	// ConcurrencyKey: at most ConcurrencyLimit (default 1) running jobs
	// share it at once.
	ConcurrencyKey   *string
	ConcurrencyLimit *int32
	// MaxCost (micro-units of the currency usage is reported in) and
	// MaxSteps are a budget over all the job's attempts: when its usage
	// or its steps reach one, the attempt ends failed, permanently, with
	// reason BudgetSpent. nil: no budget.
	MaxCost  *int64
	MaxSteps *int32
	// RateLimits: the rate-limit keys whose budgets each claim of the job
	// spends (at most MaxRateLimits, none twice).
	RateLimits []string

	// Filled in by Normalize from the payload.
	app, device *string
}

// ValidationError names the field that is wrong and why. Field is the
// full path in the request: "payload.app" for a field of the payload,
// under "jobs[1]." in a batch and "job." in a schedule.
type ValidationError struct {
	Field   string
	Message string
	// err is what the error wraps: ErrTooLarge for a value over its size
	// limit, nil otherwise.
	err error
}

// ErrTooLarge is wrapped by the *ValidationError of a payload or result
// over its size limit (413 at the API, as README and SPEC say).
var ErrTooLarge = errors.New("too large")

// Unwrap returns ErrTooLarge for a value over its size limit.
func (e *ValidationError) Unwrap() error { return e.err }

// under is e for a field found under prefix ("jobs[3].", "job.").
func (e *ValidationError) under(prefix string) *ValidationError {
	return &ValidationError{Field: prefix + e.Field, Message: e.Message, err: e.err}
}

func tooLarge(field string, limit int) *ValidationError {
	return &ValidationError{Field: field, Message: fmt.Sprintf("must be at most %d bytes", limit), err: ErrTooLarge}
}

func (e *ValidationError) Error() string {
	if e.Field == "" {
		return e.Message
	}
	return e.Field + ": " + e.Message
}

func invalid(field, format string, args ...any) *ValidationError {
	return &ValidationError{Field: field, Message: fmt.Sprintf(format, args...)}
}

// InvestigationPayload is the payload of an app_investigation job.
type InvestigationPayload struct {
	App          string          `json:"app"`
	StoreURL     string          `json:"store_url,omitempty"`
	Device       string          `json:"device,omitempty"`
	Instructions string          `json:"instructions,omitempty"`
	Sim          json.RawMessage `json:"sim,omitempty"`
}

// Normalize checks j, fills in defaults, and returns the first problem as
// a *ValidationError.
func (j *NewJob) Normalize() error {
	if !namePattern.MatchString(j.Kind) {
		return invalid("kind", "must match [a-z0-9_.-]{1,64}")
	}
	if j.Queue == "" {
		j.Queue = "default"
	}
	if !namePattern.MatchString(j.Queue) {
		return invalid("queue", "must match [a-z0-9_.-]{1,64}")
	}
	if err := j.normalizePayload(); err != nil {
		return err
	}
	if j.MaxAttempts == nil {
		j.MaxAttempts = ptr[int32](DefaultMaxAttempts)
	}
	if *j.MaxAttempts < 1 || *j.MaxAttempts > MaxAttemptsLimit {
		return invalid("max_attempts", "must be between 1 and %d", MaxAttemptsLimit)
	}
	if j.TimeoutMs != nil && *j.TimeoutMs < int32(MinLease/time.Millisecond) {
		return invalid("timeout_ms", "must be at least %d", MinLease/time.Millisecond)
	}
	if j.BackoffBaseMs == nil {
		j.BackoffBaseMs = ptr[int32](defaultBackoffBase)
	}
	if j.BackoffMaxMs == nil {
		j.BackoffMaxMs = ptr(max(*j.BackoffBaseMs, defaultBackoffMax))
	}
	if *j.BackoffBaseMs < 0 || *j.BackoffBaseMs > maxBackoffMs {
		return invalid("backoff_base_ms", "must be between 0 and %d", maxBackoffMs)
	}
	if *j.BackoffMaxMs < *j.BackoffBaseMs || *j.BackoffMaxMs > maxBackoffMs {
		return invalid("backoff_max_ms", "must be between backoff_base_ms and %d", maxBackoffMs)
	}
	if err := j.NormalizeConcurrency(); err != nil {
		return err
	}
	if j.MaxCost != nil && (*j.MaxCost < 1 || *j.MaxCost > MaxCostLimit) {
		return invalid("max_cost", "must be between 1 and %d (micro-units)", int64(MaxCostLimit))
	}
	if j.MaxSteps != nil && (*j.MaxSteps < 1 || *j.MaxSteps > MaxStepsLimit) {
		return invalid("max_steps", "must be between 1 and %d", MaxStepsLimit)
	}
	if err := j.normalizeRateLimits(); err != nil {
		return err
	}
	if k := j.IdempotencyKey; k != nil {
		if *k == "" || len(*k) > maxIdempotencyKey || !utf8.ValidString(*k) || hasControl(*k) {
			return invalid("idempotency_key", "must be 1 to %d printable characters", maxIdempotencyKey)
		}
	}
	return nil
}

// NormalizeConcurrency checks the concurrency key and limit (Normalize
// calls it). An empty key is no key; a limit without a key limits
// nothing, but must still be valid.
func (j *NewJob) NormalizeConcurrency() error {
	if j.ConcurrencyLimit == nil {
		j.ConcurrencyLimit = ptr[int32](1)
	}
	if *j.ConcurrencyLimit < 1 || *j.ConcurrencyLimit > MaxConcurrencyLimit {
		return invalid("concurrency_limit", "must be between 1 and %d", MaxConcurrencyLimit)
	}
	if k := j.ConcurrencyKey; k != nil {
		if *k == "" {
			j.ConcurrencyKey = nil
			return nil
		}
		if !utf8.ValidString(*k) || utf8.RuneCountInString(*k) > MaxConcurrencyKey || hasControl(*k) {
			return invalid("concurrency_key", "must be at most %d printable characters", MaxConcurrencyKey)
		}
	}
	return nil
}

func (j *NewJob) normalizePayload() error {
	if len(bytes.TrimSpace(j.Payload)) == 0 || bytes.Equal(bytes.TrimSpace(j.Payload), []byte("null")) {
		j.Payload = json.RawMessage(`{}`)
	}
	if len(j.Payload) > MaxPayloadBytes {
		return tooLarge("payload", MaxPayloadBytes)
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(j.Payload, &obj); err != nil || obj == nil {
		return invalid("payload", "must be a JSON object")
	}
	// checkDocument needs valid JSON, which the decode above proved.
	if problem := checkDocument(j.Payload, MaxPayloadBytes); problem != "" {
		return invalid("payload", "%s", problem)
	}
	j.app, j.device = nil, nil
	if dev, ok := obj["device"]; ok && string(dev) != "null" {
		var d string
		if json.Unmarshal(dev, &d) != nil || !labelPattern.MatchString(d) {
			return invalid("payload.device", "must be a label of up to 64 letters, digits or _.:-")
		}
		j.device = &d
	}
	if app, ok := obj["app"]; ok {
		var a string
		if json.Unmarshal(app, &a) == nil && a != "" {
			// Every kind: the column is indexed, and an index row has a
			// size limit far below the payload's. (An investigation's app
			// is a package name, checked with its own message below.)
			if utf8.RuneCountInString(a) > maxApp && j.Kind != "app_investigation" {
				return invalid("payload.app", "must be at most %d characters", maxApp)
			}
			j.app = &a
		}
	}
	if j.Kind == "app_investigation" {
		return j.checkInvestigation()
	}
	return nil
}

func (j *NewJob) checkInvestigation() error {
	var p InvestigationPayload
	if err := json.Unmarshal(j.Payload, &p); err != nil {
		return invalid("payload", "is not an app_investigation payload: %v", err)
	}
	if p.App == "" {
		return invalid("payload.app", "is required (an Android package name such as com.example.notes)")
	}
	if len(p.App) > 255 || !packagePattern.MatchString(p.App) {
		return invalid("payload.app", "must be an Android package name such as com.example.notes")
	}
	if p.StoreURL != "" {
		u, err := url.Parse(p.StoreURL)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || len(p.StoreURL) > 2048 {
			return invalid("payload.store_url", "must be an http(s) URL")
		}
	}
	if len(p.Instructions) > maxInstructions {
		return invalid("payload.instructions", "must be at most %d bytes", maxInstructions)
	}
	return nil
}

func hasControl(s string) bool {
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return true
		}
	}
	return false
}

func ptr[T any](v T) *T { return &v }

// sameJob reports whether an existing job is what nj would have created,
// for idempotent resubmission.
func sameJob(existing Job, nj NewJob) bool {
	if existing.Kind != nj.Kind || existing.Queue != nj.Queue {
		return false
	}
	var a, b any
	if json.Unmarshal(existing.Payload, &a) != nil || json.Unmarshal(nj.Payload, &b) != nil {
		return false
	}
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return bytes.Equal(ja, jb)
}
