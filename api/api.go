// Package api declares what travels between Leasehold and the software
// that meets it: the request and response bodies of the admin API
// (/api/v1/…), the worker API (/api/v1/worker/…) and the webhook body,
// and the error every one of them answers. It imports only the standard
// library, so the server, the remote worker, the Go client and a webhook
// receiver share one declaration of each shape.
package api

import "time"

// Time is a time as the API shows it: RFC 3339 in UTC with a fixed six
// fractional digits (PostgreSQL's precision), so that clients never see
// the fraction vanish when it happens to be zero.
type Time time.Time

// TimeLayout is the layout of Time.
const TimeLayout = "2006-01-02T15:04:05.000000Z07:00"

// MarshalJSON implements json.Marshaler.
func (t Time) MarshalJSON() ([]byte, error) {
	return []byte(`"` + time.Time(t).UTC().Format(TimeLayout) + `"`), nil
}

// UnmarshalJSON implements json.Unmarshaler: any RFC 3339 time.
func (t *Time) UnmarshalJSON(b []byte) error {
	var v time.Time
	if err := v.UnmarshalJSON(b); err != nil {
		return err
	}
	*t = Time(v)
	return nil
}

// Time returns t as a time.Time.
func (t Time) Time() time.Time { return time.Time(t) }

// String formats t as the API does.
func (t Time) String() string { return time.Time(t).UTC().Format(TimeLayout) }

// TimePtr is t as the API shows it; nil stays nil.
func TimePtr(t *time.Time) *Time {
	if t == nil {
		return nil
	}
	v := Time(*t)
	return &v
}

// StdTime is t as a *time.Time; nil stays nil.
func StdTime(t *Time) *time.Time {
	if t == nil {
		return nil
	}
	v := time.Time(*t)
	return &v
}

// Error is the body of every error answer.
type Error struct {
	// Error says what went wrong, for people.
	Error string `json:"error"`
	// Field is the request field at fault, when there is one.
	Field string `json:"field,omitempty"`
	// Code is a stable word for the kind of answer: clients decide on it,
	// never on Error's text.
	Code Code `json:"code"`
}

// Code is Error.Code: one word for each kind of error answer.
type Code string

// The codes of error answers, one a kind of answer.
const (
	// CodeInvalid: the request is malformed or a field breaks a rule (400).
	CodeInvalid Code = "invalid"
	// CodeUnauthorized: no token or session, or one that is not valid (401).
	CodeUnauthorized Code = "unauthorized"
	// CodeForbidden: the token may not do this (403).
	CodeForbidden Code = "forbidden"
	// CodeNotFound: nothing has that id or name, or no route has that path (404).
	CodeNotFound Code = "not_found"
	// CodeMethodNotAllowed: the path takes other methods (405).
	CodeMethodNotAllowed Code = "method_not_allowed"
	// CodeTimeout: the request body did not arrive in time (408).
	CodeTimeout Code = "timeout"
	// CodeConflict: the request conflicts with the current state: a job
	// in another state, a name or idempotency key taken (409).
	CodeConflict Code = "conflict"
	// CodeLeaseLost: the lease token is not current; the worker must stop
	// the job (409).
	CodeLeaseLost Code = "lease_lost"
	// CodeBudgetSpent: the write was recorded and spent the job's budget
	// (max_cost or max_steps): the attempt is over, failed permanently
	// with reason "budget spent"; the worker stops the job and writes
	// nothing more for it (409).
	CodeBudgetSpent Code = "budget_spent"
	// CodeTooLarge: the request body is larger than the endpoint takes (413).
	CodeTooLarge Code = "too_large"
	// CodeUnsupportedMediaType: the body is not of a type the endpoint takes (415).
	CodeUnsupportedMediaType Code = "unsupported_media_type"
	// CodeRateLimited: the caller already holds as many of these requests
	// (claims of one worker token, event streams of one session) as it may
	// at once; retry after Retry-After seconds (429).
	CodeRateLimited Code = "rate_limited"
	// CodeClientClosed: the client went away before the answer (499);
	// nobody reads it, but it is logged and counted.
	CodeClientClosed Code = "client_closed"
	// CodeInternal: the server failed; nothing the client sent is at fault (500).
	CodeInternal Code = "internal"
	// CodeUnavailable: the server cannot serve now (503).
	CodeUnavailable Code = "unavailable"
)

// LeaseLost is Error.Error of a lost lease (CodeLeaseLost), as SPEC words it.
const LeaseLost = "lease lost"
