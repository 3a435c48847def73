package worker

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/leasehold/leasehold/api"
	"github.com/leasehold/leasehold/artifact"
	"github.com/leasehold/leasehold/queue"
)

// Backend is where a worker gets its jobs and writes what becomes of them:
// PostgreSQL directly (Direct), or the server's worker API over HTTP
// (Remote). Both answer queue.ErrLeaseLost for a write that is not fenced
// by the current lease, and queue.ErrNotFound for a job that is not there.
type Backend interface {
	Claim(ctx context.Context, p queue.ClaimParams) (Claim, error)
	Heartbeat(ctx context.Context, l queue.Lease) (queue.HeartbeatResult, error)
	Complete(ctx context.Context, l queue.Lease, result json.RawMessage) (queue.Job, error)
	CompleteMany(ctx context.Context, cs []queue.Completion) ([]error, error)
	Fail(ctx context.Context, l queue.Lease, msg string, retryable bool) (queue.Job, error)
	Release(ctx context.Context, l queue.Lease) (queue.Job, error)
	AckCancel(ctx context.Context, l queue.Lease) (queue.Job, error)
	// Progress and UploadArtifact name the attempt's step the write
	// belongs to; 0 for none.
	Progress(ctx context.Context, l queue.Lease, step int32, fraction float64, message string) error
	// Usage records what the attempt used (checked by queue.CheckUsage
	// first); queue.ErrBudgetSpent when it spent the job's budget, which
	// ended the attempt.
	Usage(ctx context.Context, l queue.Lease, u queue.Usage) error
	StartEffect(ctx context.Context, l queue.Lease, key string) (queue.EffectStart, error)
	FinishEffect(ctx context.Context, l queue.Lease, key string, result json.RawMessage) error
	// Checkpoint saves the attempt's checkpoint (state a JSON object,
	// checked by queue.CheckCheckpoint).
	Checkpoint(ctx context.Context, l queue.Lease, step int, state json.RawMessage) error
	UploadArtifact(ctx context.Context, l queue.Lease, name string, step int32, r io.Reader) (queue.Artifact, error)
	WorkerSeen(ctx context.Context, p queue.Presence) error
}

// ArtifactStore stores an attempt's files: package artifact's Store.
type ArtifactStore interface {
	PutStep(ctx context.Context, l queue.Lease, name string, step int32, r io.Reader) (queue.Artifact, error)
}

// Claim is what a claim leased, and what the worker needs to know to
// count each lease without comparing its clock with the database's.
type Claim struct {
	Jobs []ClaimedJob
	// Waited is how long the other side held the claim request, by its
	// own clock, before it began the statement that leased the jobs (a
	// long poll's wait): never more than that, so the claim's moment is
	// at least the request's send time plus Waited. Zero for Direct.
	Waited time.Duration
	// Handover says the jobs were handed over (SPEC lease rule 11; every
	// claim of Remote): the worker confirms each with a heartbeat before
	// it starts it, and runs none whose confirmation is refused.
	Handover bool
}

// ClaimedJob is a job just leased.
type ClaimedJob struct {
	queue.Job
	// Remaining is how long the lease had when the claim statement ran,
	// by the database clock (lease_until minus its now()).
	Remaining time.Duration
}

// dbLease is the lease of a job just claimed, by the database clock: the
// claim sets heartbeat_at to its now() and lease_until after it.
func dbLease(j queue.Job) time.Duration {
	if j.LeaseUntil == nil || j.HeartbeatAt == nil {
		return 0
	}
	return max(j.LeaseUntil.Sub(*j.HeartbeatAt), 0)
}

// Direct is the Backend of a worker that reaches PostgreSQL: the queue
// package itself, plus the artifact storage it shares with the server.
type Direct struct {
	*queue.Client
	Artifacts ArtifactStore
}

// Claim implements Backend with the queue's claim; nothing waits on
// the way, so Waited is zero.
func (d Direct) Claim(ctx context.Context, p queue.ClaimParams) (Claim, error) {
	jobs, err := d.Client.Claim(ctx, p)
	if err != nil {
		return Claim{}, err
	}
	return directClaim(jobs), nil
}

// directClaim is what a direct claim leased.
func directClaim(jobs []queue.Job) Claim {
	claim := Claim{Jobs: make([]ClaimedJob, len(jobs))}
	for i, j := range jobs {
		claim.Jobs[i] = ClaimedJob{Job: j, Remaining: dbLease(j)}
	}
	return claim
}

// completeClaimer is a Backend that can complete a batch and claim in
// one transaction (Direct): the completer does so while the worker waits
// for room under its limits (completer.offer).
type completeClaimer interface {
	CompleteManyThenClaim(ctx context.Context, cs []queue.Completion, p queue.ClaimParams) ([]error, Claim, error)
}

// CompleteManyThenClaim completes cs and claims for p in one transaction
// (queue.Client.CompleteManyThenClaim).
func (d Direct) CompleteManyThenClaim(ctx context.Context, cs []queue.Completion, p queue.ClaimParams) ([]error, Claim, error) {
	errs, jobs, err := d.Client.CompleteManyThenClaim(ctx, cs, p)
	if err != nil {
		return nil, Claim{}, err
	}
	return errs, directClaim(jobs), nil
}

// Fail implements Backend with the queue's fail, msg cleaned first as
// Remote cleans it (clip): the queue refuses NUL and invalid UTF-8, and an
// executor's error is what its stderr was.
func (d Direct) Fail(ctx context.Context, l queue.Lease, msg string, retryable bool) (queue.Job, error) {
	return d.Client.Fail(ctx, l, clip(msg), retryable)
}

// Progress implements Backend with the queue's progress, message cleaned
// as for Fail.
func (d Direct) Progress(ctx context.Context, l queue.Lease, step int32, fraction float64, message string) error {
	return d.Client.ProgressStep(ctx, l, step, fraction, clip(message))
}

// Checkpoint implements Backend with the queue's.
func (d Direct) Checkpoint(ctx context.Context, l queue.Lease, step int, state json.RawMessage) error {
	return d.Client.SaveCheckpoint(ctx, l, step, state)
}

// errNoArtifactStorage refuses the artifacts of a direct worker made
// without storage (tests): the executor hears it at once, unspooled.
var errNoArtifactStorage = errors.New("this worker has no artifact storage")

// UploadArtifact stores r as an artifact of l's attempt.
func (d Direct) UploadArtifact(ctx context.Context, l queue.Lease, name string, step int32, r io.Reader) (queue.Artifact, error) {
	if d.Artifacts == nil {
		return queue.Artifact{}, errNoArtifactStorage
	}
	a, err := d.Artifacts.PutStep(ctx, l, name, step, r)
	var rejected *artifact.RejectedError
	if errors.As(err, &rejected) || errors.Is(err, artifact.ErrTooLarge) {
		// Refused for what it is, as the server's 400 and 413 say to a
		// remote worker: sending it again cannot help.
		return queue.Artifact{}, &queue.ValidationError{Field: api.ArtifactFileField, Message: err.Error()}
	}
	return a, err
}

// transient reports whether retrying err may succeed: the other side was
// unreachable, restarting or overloaded, rather than refusing the write.
// A database's own error (a direct worker's) is transient when
// queue.Unavailable says it heals (a failover, a restart, a read-only
// window), and refuses the write otherwise.
func transient(err error) bool {
	var (
		se         *statusError
		ve         *queue.ValidationError
		pgErr      *pgconn.PgError
		connectErr *pgconn.ConnectError
		unreach    *unreachableError
	)
	switch {
	case err == nil:
		return false
	case errors.As(err, &connectErr):
		// The database could not be reached: an outage, even when what
		// ended the try was pgconn's connect_timeout (a context deadline
		// of its own). A standby not yet promoted answered no new session
		// within it after its primary's loss, and a progress write that
		// took that for the caller's deadline failed its attempt. Each
		// caller stops retrying once its own context ends.
		return true
	case errors.As(err, &unreach):
		// The same for a remote worker's server: a dial or lookup that
		// timed out in the transport, not at the caller's deadline.
		return true
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return false
	case errors.Is(err, queue.ErrLeaseLost), errors.Is(err, queue.ErrNotFound), errors.Is(err, ErrUnauthorized), errors.As(err, &ve),
		errors.Is(err, errNoArtifactStorage):
		return false
	case errors.As(err, &se):
		return se.status >= 500 || se.status == http.StatusTooManyRequests
	case errors.As(err, &pgErr):
		return queue.Unavailable(err)
	}
	return true
}

// refused reports whether err says the write itself is wrong (a result
// that is not a JSON object, a 4xx other than 409): sending it again
// cannot help, and the attempt must end failed with the reason instead of
// silently running out its lease.
func refused(err error) bool {
	var (
		se *statusError
		ve *queue.ValidationError
	)
	switch {
	case errors.As(err, &ve):
		return true
	case errors.As(err, &se):
		return se.status >= 400 && se.status < 500 && se.status != http.StatusConflict
	}
	return false
}
