package api

import (
	"encoding/json"
	"fmt"
)

// Paths of the worker API, relative to the server's base URL.
const (
	WhoamiPath   = "/api/v1/worker/whoami"
	ClaimPath    = "/api/v1/worker/claim"
	PresencePath = "/api/v1/worker/presence"
	// AvailabilityPath: PUT the worker's own availability window.
	AvailabilityPath = "/api/v1/worker/availability"
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
	// ActionCheckpoint saves the attempt's checkpoint (CheckpointRequest).
	ActionCheckpoint = "checkpoint"
)

// JobPath is the worker API's path of an action on job id.
func JobPath(id int64, action string) string {
	return fmt.Sprintf("/api/v1/worker/jobs/%d/%s", id, action)
}

// Multipart field names of an artifact upload. The lease token comes
// before the file, or in the LeaseTokenHeader header.
const (
	ArtifactTokenField = "lease_token"
	ArtifactFileField  = "file"
	// ArtifactStepField is the optional field naming the step of the
	// attempt the artifact belongs to (an integer >= 1; see
	// ProgressRequest.Step); it must come before the file part.
	ArtifactStepField = "step"
	LeaseTokenHeader  = "X-Lease-Token"
)

// Effect ledger actions (EffectRequest.Action).
const (
	EffectStart  = "start"
	EffectFinish = "finish"
)

// MaxMessageBytes bounds an error or progress message (FailRequest.Error,
// ProgressRequest.Message): the server refuses a longer one, and a direct
// worker's queue keeps no more of it, so a remote worker cuts it there.
const MaxMessageBytes = 64 << 10

// WhoamiResponse answers GET WhoamiPath: the worker's identity, its
// token's name.
type WhoamiResponse struct {
	WorkerID string `json:"worker_id"`
}

// MaxClaimLimit is the most jobs one claim through the worker API may
// ask for. Its answer carries every job's payload (up to 1 MiB each), so
// it stays well under what a phone's host should hold at once; a worker
// with more free slots claims again.
const MaxClaimLimit = 100

// ClaimRequest is the body of POST ClaimPath.
type ClaimRequest struct {
	// WorkerID may be omitted; when given it must be the token's name,
	// which is the worker's identity.
	WorkerID string   `json:"worker_id,omitempty"`
	Queues   []string `json:"queues"`
	Devices  []string `json:"devices"`
	// Limit is how many jobs to take at most, up to MaxClaimLimit; nil
	// (absent or null): 1.
	// LeaseMs is each lease's length; nil: the server's default. A value
	// sent is checked as it is, so 0 is refused.
	Limit   *int   `json:"limit,omitempty"`
	LeaseMs *int64 `json:"lease_ms,omitempty"`
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
	// HandoverMs is the server's hand-over deadline (SPEC lease rule 11):
	// every job of the answer is handed over, its lease running only
	// this long (LeaseRemainingMs) until the worker confirms it with its
	// first heartbeat, which gives the full lease. A worker starts a job
	// only once that heartbeat is accepted: a hand-over never confirmed
	// ends not_delivered, uncounted, and the job goes to another worker.
	HandoverMs int64 `json:"handover_ms"`
}

// ClaimedJob is a job as the claim answers it: the job with its lease
// and how long that lease had left when the claim statement ran.
type ClaimedJob struct {
	Job
	// LeaseRemainingMs is lease_until minus the claim statement's now(),
	// both by the database clock, rounded down: at most the requested
	// lease (less under a job's timeout_ms), and at most the hand-over
	// deadline until the first heartbeat (ClaimResponse.HandoverMs).
	LeaseRemainingMs int64 `json:"lease_remaining_ms"`
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
	// Starting is true on the first presence a worker process sends: the
	// worker's started_at becomes now. Absent: false (an older worker
	// keeps the start of its id's first presence).
	Starting bool `json:"starting,omitempty"`
}

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
	// Step, when given (>= 1), is the step of the attempt this message
	// reports: a replay shows it with the attempt's artifacts of the same
	// step, stored in the event's detail as "step".
	Step *int64 `json:"step,omitempty"`
}

// CompleteRequest is the body of the complete action. Result is absent,
// null or a JSON object.
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

// EffectStartResponse answers EffectStart: whether the effect is done
// already (then Result is what it recorded), and the key to give the
// outside system.
type EffectStartResponse struct {
	Done           bool            `json:"done"`
	Result         json.RawMessage `json:"result,omitempty"`
	IdempotencyKey string          `json:"idempotency_key"`
}

// Worker is a worker as GET /api/v1/stats shows it.
type Worker struct {
	ID       string   `json:"id"`
	LastSeen Time     `json:"last_seen"`
	Device   *string  `json:"device"`
	Queues   []string `json:"queues"`
	Running  int64    `json:"running"`
}

// WorkerStatus is a worker as GET /api/v1/workers shows it: presence,
// what its device-info command last said of its phone (Info, null without
// one), what it runs, its outcomes of the last 24 hours and whether it
// claims (Claiming false with a Reason while it holds back or is offline).
type WorkerStatus struct {
	ID           string          `json:"id"`
	Device       *string         `json:"device"`
	Queues       []string        `json:"queues"`
	Online       bool            `json:"online"`
	StartedAt    Time            `json:"started_at"`
	LastSeen     Time            `json:"last_seen"`
	Info         json.RawMessage `json:"info"`
	InfoAt       *Time           `json:"info_at"`
	InfoError    *string         `json:"info_error"`
	Running      int64           `json:"running"`
	LastJobID    *int64          `json:"last_job_id"`
	Succeeded24h int64           `json:"succeeded_24h"`
	Failed24h    int64           `json:"failed_24h"`
	Claiming     bool            `json:"claiming"`
	Reason       *string         `json:"reason"`
}

// Workers is GET /api/v1/workers: the workers seen in the last 24 hours,
// latest first.
type Workers struct {
	Workers []WorkerStatus `json:"workers"`
}
