package worker

import (
	"context"
	"encoding/json"
	"errors"
	"io"

	"github.com/leasehold/leasehold/queue"
)

// Backend is where a worker gets its jobs and writes what becomes of them:
// PostgreSQL directly (Direct), or the server's worker API over HTTP
// (Remote). Both answer queue.ErrLeaseLost for a write that is not fenced
// by the current lease, and queue.ErrNotFound for a job that is not there.
type Backend interface {
	Claim(ctx context.Context, p queue.ClaimParams) ([]queue.Job, error)
	Heartbeat(ctx context.Context, l queue.Lease) (queue.HeartbeatResult, error)
	Complete(ctx context.Context, l queue.Lease, result json.RawMessage) (queue.Job, error)
	CompleteMany(ctx context.Context, cs []queue.Completion) ([]error, error)
	Fail(ctx context.Context, l queue.Lease, msg string, retryable bool) (queue.Job, error)
	Release(ctx context.Context, l queue.Lease) (queue.Job, error)
	AckCancel(ctx context.Context, l queue.Lease) (queue.Job, error)
	Progress(ctx context.Context, l queue.Lease, fraction float64, message string) error
	StartEffect(ctx context.Context, l queue.Lease, key string) (queue.EffectStart, error)
	FinishEffect(ctx context.Context, l queue.Lease, key string, result json.RawMessage) error
	UploadArtifact(ctx context.Context, l queue.Lease, name string, r io.Reader) (queue.Artifact, error)
	WorkerSeen(ctx context.Context, id string, devices, queues []string) error
}

// ArtifactStore stores an attempt's files: package artifact's Store.
type ArtifactStore interface {
	Put(ctx context.Context, l queue.Lease, name string, r io.Reader) (queue.Artifact, error)
}

// Direct is the Backend of a worker that reaches PostgreSQL: the queue
// package itself, plus the artifact storage it shares with the server.
type Direct struct {
	*queue.Client
	Artifacts ArtifactStore
}

// UploadArtifact stores r as an artifact of l's attempt.
func (d Direct) UploadArtifact(ctx context.Context, l queue.Lease, name string, r io.Reader) (queue.Artifact, error) {
	if d.Artifacts == nil {
		return queue.Artifact{}, errors.New("this worker has no artifact storage")
	}
	return d.Artifacts.Put(ctx, l, name, r)
}
