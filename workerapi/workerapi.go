// Package workerapi is the wire format of the remote-worker API
// (/api/v1/worker/…): the request and response bodies that the server's
// handlers (package web) decode and encode and that a remote worker
// (worker.Remote) sends and reads. Both sides use these types, so a field
// renamed on one side cannot break the other at run time.
package workerapi

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/leasehold/leasehold/queue"
)

// Paths of the worker API, relative to the server's base URL.
const (
	WhoamiPath   = "/api/v1/worker/whoami"
	ClaimPath    = "/api/v1/worker/claim"
	PresencePath = "/api/v1/worker/presence"
)

// Actions on a held job: POST JobPath(id, action).
const (
	ActionHeartbeat = "heartbeat"
	ActionProgress  = "progress"
	ActionComplete  = "complete"
	ActionFail      = "fail"
	ActionRelease   = "release"
	ActionCancelled = "cancelled"
	ActionEffects   = "effects"
	ActionArtifacts = "artifacts"
)

// JobPath is the path of an action on job id.
func JobPath(id int64, action string) string {
	return fmt.Sprintf("/api/v1/worker/jobs/%d/%s", id, action)
}

// Multipart field names of an artifact upload. The lease token comes
// before the file, or in the LeaseTokenHeader header.
const (
	ArtifactTokenField = "lease_token"
	ArtifactFileField  = "file"
	LeaseTokenHeader   = "X-Lease-Token"
)

// Effect ledger actions (EffectRequest.Action).
const (
	EffectStart  = "start"
	EffectFinish = "finish"
)

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

// TimePtr is t as the API shows it; nil stays nil.
func TimePtr(t *time.Time) *Time {
	if t == nil {
		return nil
	}
	v := Time(*t)
	return &v
}

func stdTimePtr(t *Time) *time.Time {
	if t == nil {
		return nil
	}
	v := time.Time(*t)
	return &v
}

// MaxMessageBytes bounds an error or progress message (FailRequest.Error,
// ProgressRequest.Message): the server refuses a longer one, and a direct
// worker's queue keeps no more of it, so a remote worker cuts it there.
const MaxMessageBytes = 64 << 10

// Error is the body of every error answer.
type Error struct {
	Error string `json:"error"`
	Field string `json:"field,omitempty"`
}

// LeaseLost is Error.Error of a 409 that means the lease is not current.
const LeaseLost = "lease lost"

// WhoamiResponse answers GET WhoamiPath: the worker's identity, its
// token's name.
type WhoamiResponse struct {
	WorkerID string `json:"worker_id"`
}

// ClaimRequest is the body of POST ClaimPath.
type ClaimRequest struct {
	// WorkerID may be omitted; when given it must be the token's name,
	// which is the worker's identity.
	WorkerID string   `json:"worker_id,omitempty"`
	Queues   []string `json:"queues"`
	Devices  []string `json:"devices"`
	Limit    int      `json:"limit"`
	LeaseMs  int64    `json:"lease_ms"`
	// WaitMs makes an empty claim wait up to this long for a new job
	// (long polling), so a worker behind a home router gets work at once
	// without hammering the server.
	WaitMs int64 `json:"wait_ms"`
}

// ClaimResponse answers a claim: SPEC's {"jobs":[job with lease_token]},
// plus what the worker needs to know when its leases end.
type ClaimResponse struct {
	Jobs []ClaimedJob `json:"jobs"`
	// WaitedMs is how long the server held the request, by its own
	// monotonic clock and rounded down, before it began the claim
	// statement that leased these jobs (the long poll's wait). The
	// worker adds it to the moment it sent the request to find a moment
	// that cannot be later than the claim: see worker.leaseStart.
	WaitedMs int64 `json:"waited_ms"`
}

// ClaimedJob is a job as the claim answers it: the job with its lease
// and how long that lease had left when the claim statement ran.
type ClaimedJob struct {
	Job
	// LeaseRemainingMs is lease_until minus the claim statement's now(),
	// both by the database clock, rounded down: at most the requested
	// lease (less under a job's timeout_ms).
	LeaseRemainingMs int64 `json:"lease_remaining_ms"`
}

// NewClaimedJob describes a job just claimed.
func NewClaimedJob(j queue.Job) ClaimedJob {
	c := ClaimedJob{Job: NewJob(j)}
	if j.LeaseUntil != nil && j.HeartbeatAt != nil {
		// The claim sets heartbeat_at to its now(): the difference is
		// the database's own count of the lease.
		c.LeaseRemainingMs = max(j.LeaseUntil.Sub(*j.HeartbeatAt).Milliseconds(), 0)
	}
	return c
}

// Job is a job as the API shows it; the names are SPEC's.
type Job struct {
	ID               int64           `json:"id"`
	Kind             string          `json:"kind"`
	Queue            string          `json:"queue"`
	Priority         int32           `json:"priority"`
	Payload          json.RawMessage `json:"payload"`
	State            queue.State     `json:"state"`
	Attempt          int32           `json:"attempt"`
	MaxAttempts      int32           `json:"max_attempts"`
	CountedAttempts  int32           `json:"counted_attempts"`
	RunAt            Time            `json:"run_at"`
	LeaseOwner       *string         `json:"lease_owner"`
	LeaseUntil       *Time           `json:"lease_until"`
	LeaseToken       int64           `json:"lease_token"`
	LeaseMs          int32           `json:"lease_ms"`
	HeartbeatAt      *Time           `json:"heartbeat_at"`
	TimeoutMs        *int32          `json:"timeout_ms"`
	CancelRequested  bool            `json:"cancel_requested"`
	IdempotencyKey   *string         `json:"idempotency_key"`
	BackoffBaseMs    int32           `json:"backoff_base_ms"`
	BackoffMaxMs     int32           `json:"backoff_max_ms"`
	ConcurrencyKey   *string         `json:"concurrency_key"`
	ConcurrencyLimit int32           `json:"concurrency_limit"`
	LastError        *string         `json:"last_error"`
	Result           json.RawMessage `json:"result"`
	CreatedAt        Time            `json:"created_at"`
	FinishedAt       *Time           `json:"finished_at"`
	Schedule         *string         `json:"schedule"`
}

// NewJob describes j.
func NewJob(j queue.Job) Job {
	return Job{
		ID: j.ID, Kind: j.Kind, Queue: j.Queue, Priority: j.Priority, Payload: j.Payload,
		State: j.State, Attempt: j.Attempt, MaxAttempts: j.MaxAttempts, CountedAttempts: j.CountedAttempts,
		RunAt: Time(j.RunAt), LeaseOwner: j.LeaseOwner, LeaseUntil: TimePtr(j.LeaseUntil),
		LeaseToken: j.LeaseToken, LeaseMs: j.LeaseMs, HeartbeatAt: TimePtr(j.HeartbeatAt),
		TimeoutMs: j.TimeoutMs, CancelRequested: j.CancelRequested, IdempotencyKey: j.IdempotencyKey,
		BackoffBaseMs: j.BackoffBaseMs, BackoffMaxMs: j.BackoffMaxMs, LastError: j.LastError,
		Result: j.Result, CreatedAt: Time(j.CreatedAt), FinishedAt: TimePtr(j.FinishedAt),
		Schedule:       j.Schedule,
		ConcurrencyKey: j.ConcurrencyKey, ConcurrencyLimit: j.ConcurrencyLimit,
	}
}

// ToQueue returns the job as package queue has it.
func (j Job) ToQueue() queue.Job {
	return queue.Job{
		ID: j.ID, Kind: j.Kind, Queue: j.Queue, Priority: j.Priority, Payload: j.Payload,
		State: j.State, Attempt: j.Attempt, MaxAttempts: j.MaxAttempts, CountedAttempts: j.CountedAttempts,
		RunAt: time.Time(j.RunAt), LeaseOwner: j.LeaseOwner, LeaseUntil: stdTimePtr(j.LeaseUntil),
		LeaseToken: j.LeaseToken, LeaseMs: j.LeaseMs, HeartbeatAt: stdTimePtr(j.HeartbeatAt),
		TimeoutMs: j.TimeoutMs, CancelRequested: j.CancelRequested, IdempotencyKey: j.IdempotencyKey,
		BackoffBaseMs: j.BackoffBaseMs, BackoffMaxMs: j.BackoffMaxMs, LastError: j.LastError,
		Result: j.Result, CreatedAt: time.Time(j.CreatedAt), FinishedAt: stdTimePtr(j.FinishedAt),
		Schedule:       j.Schedule,
		ConcurrencyKey: j.ConcurrencyKey, ConcurrencyLimit: j.ConcurrencyLimit,
	}
}

// PresenceRequest is the body of POST PresencePath. A worker with a
// device-info command also says what it last said of the phone, and
// whether the worker claims; one without leaves those out.
type PresenceRequest struct {
	Queues  []string `json:"queues"`
	Devices []string `json:"devices"`
	// Info is the object of the last device-info run that gave one,
	// gathered InfoAgeMs before the request was sent (the server dates it
	// by its database clock).
	Info      json.RawMessage `json:"info,omitempty"`
	InfoAgeMs *int64          `json:"info_age_ms,omitempty"`
	// InfoError is why the last run failed.
	InfoError string `json:"info_error,omitempty"`
	// Claiming false says the worker holds back, Reason why (adb
	// offline, battery low). Absent: claiming.
	Claiming *bool  `json:"claiming,omitempty"`
	Reason   string `json:"reason,omitempty"`
}

// NewPresenceRequest is the request that says p.
func NewPresenceRequest(p queue.Presence) PresenceRequest {
	r := PresenceRequest{Queues: p.Queues, Devices: p.Devices}
	if d := p.Device; d != nil {
		r.InfoError, r.Claiming, r.Reason = d.Error, &d.Claiming, d.Reason
		if d.Info != nil {
			r.Info, r.InfoAgeMs = d.Info, ptr(d.InfoAge.Milliseconds())
		}
	}
	return r
}

// Device is the device report of the request; nil when it has none.
func (r PresenceRequest) Device() *queue.DeviceReport {
	info := r.Info
	if string(info) == "null" {
		info = nil
	}
	if info == nil && r.InfoError == "" && r.Claiming == nil && r.Reason == "" {
		return nil
	}
	d := &queue.DeviceReport{Info: info, Error: r.InfoError, Claiming: r.Claiming == nil || *r.Claiming, Reason: r.Reason}
	if r.InfoAgeMs != nil {
		d.InfoAge = time.Duration(*r.InfoAgeMs) * time.Millisecond
	}
	return d
}

func ptr[T any](v T) *T { return &v }

// LeaseRequest is the part every write on a held job carries, and the
// whole body of heartbeat, release and cancelled.
type LeaseRequest struct {
	// LeaseToken is exactly the claim's lease_token. A pointer, so that
	// the server tells a missing token from 0.
	LeaseToken *int64 `json:"lease_token"`
}

// Lease returns the LeaseRequest of token.
func Lease(token int64) LeaseRequest { return LeaseRequest{LeaseToken: &token} }

// Token returns the token, nil when the request has none.
func (r *LeaseRequest) Token() *int64 { return r.LeaseToken }

// HeartbeatResponse answers a heartbeat. RemainingMs is computed by the
// database, so the worker never compares its clock with the server's.
type HeartbeatResponse struct {
	LeaseUntil      Time  `json:"lease_until"`
	CancelRequested bool  `json:"cancel_requested"`
	RemainingMs     int64 `json:"remaining_ms"`
}

// ProgressRequest is the body of the progress action.
type ProgressRequest struct {
	LeaseRequest
	Progress float64 `json:"progress"`
	Message  string  `json:"message"`
}

// CompleteRequest is the body of the complete action. Result is absent,
// null or a JSON object (queue.CheckResult).
type CompleteRequest struct {
	LeaseRequest
	Result json.RawMessage `json:"result,omitempty"`
}

// FailRequest is the body of the fail action. Retryable defaults to true.
type FailRequest struct {
	LeaseRequest
	Error     string `json:"error"`
	Retryable *bool  `json:"retryable"`
}

// EffectRequest is the body of the effects action: Action EffectStart
// asks whether to perform the effect Key, EffectFinish records it done
// with Result.
type EffectRequest struct {
	LeaseRequest
	Key    string          `json:"key"`
	Action string          `json:"action"`
	Result json.RawMessage `json:"result,omitempty"`
}

// EffectStartResponse answers EffectStart: see queue.EffectStart.
type EffectStartResponse struct {
	Done           bool            `json:"done"`
	Result         json.RawMessage `json:"result,omitempty"`
	IdempotencyKey string          `json:"idempotency_key"`
}

// Artifact answers an upload (201): the stored artifact's metadata; its
// bytes are at URL.
type Artifact struct {
	ID          int64  `json:"id"`
	Attempt     int32  `json:"attempt"`
	Kind        string `json:"kind"`
	Name        string `json:"name"`
	ContentType string `json:"content_type"`
	Size        int64  `json:"size"`
	SHA256      string `json:"sha256"`
	Width       *int32 `json:"width,omitempty"`
	Height      *int32 `json:"height,omitempty"`
	URL         string `json:"url"`
	CreatedAt   Time   `json:"created_at"`
}

// NewArtifact describes a.
func NewArtifact(a queue.Artifact) Artifact {
	return Artifact{
		ID: a.ID, Attempt: a.Attempt, Kind: a.Kind, Name: a.Name, ContentType: a.ContentType, Size: a.Size,
		SHA256: a.SHA256, Width: a.Width, Height: a.Height, URL: fmt.Sprintf("/artifacts/%d", a.ID),
		CreatedAt: Time(a.CreatedAt),
	}
}

// ToQueue returns the artifact of job jobID as package queue has it.
func (a Artifact) ToQueue(jobID int64) queue.Artifact {
	return queue.Artifact{
		ID: a.ID, JobID: jobID, Attempt: a.Attempt, Kind: a.Kind, Name: a.Name, ContentType: a.ContentType,
		Size: a.Size, SHA256: a.SHA256, Width: a.Width, Height: a.Height, CreatedAt: time.Time(a.CreatedAt),
	}
}
