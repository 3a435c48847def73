package worker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/leasehold/leasehold/queue"
)

// uploads sends one attempt's artifacts from the spool, one at a time and
// in the order the executor handed them over (screenshots step-1..n are
// stored in that order), each retried with backoff through outages until
// it is stored or given up. The executor does not wait for them; the
// attempt's outcome does (settle).
//
// An artifact given up (the spool was full, the server or the store
// refused it, the lease was ending) is logged at once, and recorded on the
// attempt's timeline before its outcome: a progress event, fenced like
// every write of the attempt, whose message says which artifact and why
// ("artifact step-03.png not stored: …"). After a lost lease nothing is
// recorded: nothing of the attempt can be.
type uploads struct {
	backend Backend
	spool   *Spool
	lease   queue.Lease
	jl      *jobLog
	// ctx bounds the uploads: cancelled when the lease is lost, or when
	// settling runs out of time. Made with the first artifact: most
	// attempts of a busy worker have none.
	ctx    context.Context
	cancel context.CancelFunc

	mu      sync.Mutex
	queue   []*spooled
	sending bool          // the sender runs
	idle    chan struct{} // closed when the queue is empty and nothing is sent; nil then
	lost    []lostArtifact
	gone    bool    // the lease is lost: every upload is refused
	last    float64 // the latest progress the executor reported
}

// lostArtifact is an artifact given up, and why.
type lostArtifact struct{ name, reason string }

func newUploads(backend Backend, spool *Spool, lease queue.Lease, jl *jobLog) *uploads {
	return &uploads{backend: backend, spool: spool, lease: lease, jl: jl}
}

func (u *uploads) log() *slog.Logger { return u.jl.get() }

// stop cuts the uploads, when there are any.
func (u *uploads) stop() {
	u.mu.Lock()
	cancel := u.cancel
	u.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// add spools r and queues it for upload. A spool without room refuses it
// (the error says so, and the artifact is recorded as given up).
func (u *uploads) add(name string, step int32, r io.Reader) (queue.Artifact, error) {
	f, err := u.spool.put(name, r)
	if err != nil {
		u.giveUp(name, err.Error())
		return queue.Artifact{}, err
	}
	f.step = step
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.gone {
		f.remove()
		return queue.Artifact{}, queue.ErrLeaseLost
	}
	u.queue = append(u.queue, f)
	if u.ctx == nil {
		u.ctx, u.cancel = context.WithCancel(context.Background())
	}
	if !u.sending {
		u.sending = true
		u.idle = make(chan struct{})
		go u.send()
	}
	return queue.Artifact{JobID: u.lease.JobID, Name: name, Size: f.size}, nil
}

// wait returns when every artifact added so far has been stored or given
// up, or when ctx ends.
func (u *uploads) wait(ctx context.Context) {
	u.mu.Lock()
	idle := u.idle
	u.mu.Unlock()
	if idle == nil {
		return
	}
	select {
	case <-idle:
	case <-ctx.Done():
	}
}

// progress remembers the executor's latest progress, which the record of
// a lost artifact repeats.
func (u *uploads) progress(fraction float64) {
	u.mu.Lock()
	u.last = fraction
	u.mu.Unlock()
}

// send uploads the queue until it is empty.
func (u *uploads) send() {
	for {
		u.mu.Lock()
		if len(u.queue) == 0 {
			u.sending = false
			close(u.idle)
			u.idle = nil
			u.mu.Unlock()
			return
		}
		f := u.queue[0]
		u.queue = u.queue[1:]
		ctx := u.ctx
		u.mu.Unlock()
		u.upload(ctx, f)
	}
}

// upload sends f until it is stored, refused, or the uploads are cut.
func (u *uploads) upload(ctx context.Context, f *spooled) {
	defer f.remove()
	if ctx.Err() != nil {
		u.giveUp(f.name, u.cutReason())
		return
	}
	var stored queue.Artifact
	err := retryWrite(ctx, u.log(), "artifact "+f.name, func(ctx context.Context) error {
		body, err := f.open()
		if err != nil {
			return fmt.Errorf("reading the spool: %w", err)
		}
		defer body.Close()
		stored, err = u.backend.UploadArtifact(ctx, u.lease, f.name, f.step, body)
		return err
	})
	switch {
	case err == nil:
		u.log().Debug("artifact stored", "name", f.name, "id", stored.ID, "size", stored.Size)
	case errors.Is(err, queue.ErrLeaseLost), errors.Is(err, queue.ErrNotFound):
		u.mu.Lock()
		u.gone = true
		u.mu.Unlock()
		u.stop()
		u.log().Warn("artifact not stored: lease lost", "name", f.name)
	case ctx.Err() != nil:
		u.giveUp(f.name, u.cutReason()+" (last error: "+err.Error()+")")
	default:
		u.giveUp(f.name, "refused: "+err.Error())
	}
}

func (u *uploads) cutReason() string {
	if u.isGone() {
		return "lease lost"
	}
	return "the lease was ending before it could be uploaded"
}

func (u *uploads) isGone() bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.gone
}

// giveUp logs that an artifact will not be stored, and keeps it for the
// record on the attempt.
func (u *uploads) giveUp(name, reason string) {
	u.log().Warn("artifact not stored", "name", name, "reason", reason)
	u.mu.Lock()
	defer u.mu.Unlock()
	if !u.gone {
		u.lost = append(u.lost, lostArtifact{name: name, reason: reason})
	}
}

// abandon drops what is left after the lease was lost: nothing of the
// attempt can be stored any more.
func (u *uploads) abandon() {
	u.mu.Lock()
	u.gone = true
	idle := u.idle
	u.mu.Unlock()
	u.stop()
	if idle != nil {
		<-idle
	}
}

// settle waits for the outstanding uploads until shortly before
// validUntil, when the lease ends at the earliest, cuts those still
// unsent then, and records every artifact given up on the attempt's
// timeline, within ctx (the lease). The attempt's outcome is written
// after it.
func (u *uploads) settle(ctx context.Context, validUntil time.Time) {
	defer u.stop()
	u.mu.Lock()
	idle := u.idle
	u.mu.Unlock()
	if idle != nil {
		// What is left of the lease after the uploads is for the records
		// and the outcome.
		reserve := min(settleReserve, time.Until(validUntil)/2)
		timer := time.NewTimer(time.Until(validUntil.Add(-reserve)))
		select {
		case <-idle:
		case <-timer.C:
			u.stop()
			<-idle
		}
		timer.Stop()
	}
	u.mu.Lock()
	lost, last, gone := u.lost, u.last, u.gone
	u.lost = nil
	u.mu.Unlock()
	if gone {
		return
	}
	for _, a := range lost {
		msg := fmt.Sprintf("artifact %s not stored: %s", a.name, a.reason)
		err := retryWrite(ctx, u.log(), "recording a lost artifact", func(ctx context.Context) error {
			return u.backend.Progress(ctx, u.lease, 0, last, msg)
		})
		if err != nil {
			u.log().Warn("recording a lost artifact", "name", a.name, "err", err)
			if errors.Is(err, queue.ErrLeaseLost) || ctx.Err() != nil {
				return
			}
		}
	}
}

// settleReserve is how much of the lease settling leaves, at most, for
// recording lost artifacts and writing the outcome.
const settleReserve = 2 * time.Second
