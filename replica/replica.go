// Package replica sends the dashboard's reads to a streaming read replica
// while it keeps up with the primary, and to the primary when it falls
// behind or cannot be reached. One goroutine (Reads.Run) asks the
// replica, and only the replica, where its replay stands once a second;
// the primary is never asked, so watching costs it nothing.
//
// How far behind the replica is comes from two of its own positions:
// what its WAL receiver got from the primary and what it has replayed.
// Each check that sees received WAL not yet replayed remembers when it
// saw it; the lag is the age of the oldest such sighting the replay has
// not passed yet (0 when it has replayed all it received). It is exact to
// a check interval, and does not grow on an idle primary, as the age of
// the last replayed commit (pg_last_xact_replay_timestamp) does. A
// replica whose receiver does not stream cannot know how far behind it
// is: it is not read.
package replica

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/leasehold/leasehold/queue"
)

// Defaults of Config.
const (
	// DefaultMaxLag is how far behind the primary a replica may be and
	// still be read (LEASEHOLD_READ_MAX_LAG).
	DefaultMaxLag = 5 * time.Second
	// DefaultInterval is how often the replica is asked where it stands.
	DefaultInterval = time.Second
	// checkTimeout bounds one check: a replica that does not answer
	// within it is unreachable until one does.
	checkTimeout = time.Second
	// maxSightings bounds what a replica that stopped replaying costs to
	// watch: a day of checks at the default interval would be 86,400.
	maxSightings = 600
)

// Config says where reads may go.
type Config struct {
	// Primary takes every read the replica does not.
	Primary *queue.Client
	// Replica is the read replica's client; nil: every read is the
	// primary's.
	Replica *queue.Client
	// MaxLag is how far behind the replica may be and still be read
	// (default DefaultMaxLag).
	MaxLag time.Duration
	// Interval is how often the replica is checked (default
	// DefaultInterval).
	Interval time.Duration
	Logger   *slog.Logger
	// OnCheck, when set, is called after each check: a test's signal.
	OnCheck func(Status)
}

// Status is what the last check found.
type Status struct {
	// Configured says there is a replica.
	Configured bool
	// Reading says reads go to the replica now.
	Reading bool
	// Lag is how far behind the primary the replica was at the last
	// check; LagKnown is false when it could not be told (unreachable,
	// not streaming).
	Lag      time.Duration
	LagKnown bool
	// Why says, when Reading is false, why the primary is read: "replica
	// lag 7s", "replica unreachable: …", "replica not streaming from the
	// primary", "not checked yet".
	Why string
	// CheckedAt is when the last check ended (zero before the first).
	CheckedAt time.Time
}

// Reads chooses the database of each read.
type Reads struct {
	primary, replica *queue.Client
	maxLag, interval time.Duration
	logger           *slog.Logger
	onCheck          func(Status)
	now              func() time.Time

	mu     sync.Mutex
	status Status
	// sightings are the received positions the replay had not passed yet
	// when last checked, oldest first, with when each was first seen.
	sightings []sighting
}

type sighting struct {
	at  time.Time
	pos int64
}

// New returns the chooser of cfg's databases. Until its first check it
// reads the primary.
func New(cfg Config) *Reads {
	r := &Reads{
		primary: cfg.Primary, replica: cfg.Replica,
		maxLag:   cmp.Or(cfg.MaxLag, DefaultMaxLag),
		interval: cmp.Or(cfg.Interval, DefaultInterval),
		logger:   cmp.Or(cfg.Logger, slog.Default()),
		onCheck:  cfg.OnCheck,
		now:      time.Now,
	}
	r.status = Status{Configured: cfg.Replica != nil, Why: "not checked yet"}
	return r
}

// MaxLag is how far behind the replica may be and still be read.
func (r *Reads) MaxLag() time.Duration { return r.maxLag }

// PinFor is how long a session that wrote reads the primary alone: past
// it, a replica within MaxLag has replayed the write (the lag is exact to
// a check interval; one more covers the check under way).
func (r *Reads) PinFor() time.Duration { return r.maxLag + 2*r.interval }

// Primary is the primary's client.
func (r *Reads) Primary() *queue.Client { return r.primary }

// Client is the client a read should use now: the replica's while it is
// reachable and within MaxLag (fromReplica true), else the primary's.
func (r *Reads) Client() (c *queue.Client, fromReplica bool) {
	r.mu.Lock()
	reading := r.status.Reading
	r.mu.Unlock()
	if reading {
		return r.replica, true
	}
	return r.primary, false
}

// Status is what the last check found.
func (r *Reads) Status() Status {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.status
}

// Failed records that a read on the replica failed with err, a database
// that is away (queue.Unavailable): reads go to the primary until a check
// finds the replica again, rather than each failing first.
func (r *Reads) Failed(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.status.Reading {
		r.logger.Warn("read replica failed a read: reading the primary", "err", err)
	}
	r.status.Reading, r.status.LagKnown = false, false
	r.status.Why = "replica unreachable: " + err.Error()
}

// Run checks the replica every interval until ctx ends. Without a
// replica it returns at once.
func (r *Reads) Run(ctx context.Context) error {
	if r.replica == nil {
		return nil
	}
	t := time.NewTicker(r.interval)
	defer t.Stop()
	for {
		r.check(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// check asks the replica where it stands and decides where reads go.
func (r *Reads) check(ctx context.Context) {
	checkCtx, cancel := context.WithTimeout(ctx, checkTimeout)
	pos, err := r.replica.ReplayPosition(checkCtx)
	cancel()
	if ctx.Err() != nil {
		return // shutting down
	}
	r.mu.Lock()
	was := r.status
	s := r.decide(pos, err, r.now())
	r.status = s
	r.mu.Unlock()
	if s.Reading != was.Reading || (was.CheckedAt.IsZero() && !s.Reading) {
		if s.Reading {
			r.logger.Info("reading from the read replica", "lag", s.Lag)
		} else {
			r.logger.Warn("reading from the primary", "why", s.Why)
		}
	}
	if r.onCheck != nil {
		r.onCheck(s)
	}
}

// decide is the status after a check that found pos (or err) at now;
// r.mu is held.
func (r *Reads) decide(pos queue.ReplayPosition, err error, now time.Time) Status {
	s := Status{Configured: true, CheckedAt: now}
	switch {
	case err != nil:
		r.sightings = r.sightings[:0]
		s.Why = "replica unreachable: " + err.Error()
		return s
	case !pos.InRecovery:
		// A server that is not a standby (a promoted one, or a URL that
		// names the primary) is never behind.
		r.sightings = r.sightings[:0]
		s.LagKnown = true
	case pos.Received < 0:
		// No receiver ever streamed (a standby restoring from an
		// archive): only the age of its last replayed commit tells, and
		// that errs on the side of the primary.
		r.sightings = r.sightings[:0]
		if pos.ReplayAge < 0 {
			s.Why = "replica not streaming from the primary, lag unknown"
			return s
		}
		s.Lag, s.LagKnown = pos.ReplayAge, true
	default:
		if n := len(r.sightings); pos.Received > pos.Replayed && (n == 0 || r.sightings[n-1].pos < pos.Received) && n < maxSightings {
			r.sightings = append(r.sightings, sighting{at: now, pos: pos.Received})
		}
		i := 0
		for i < len(r.sightings) && r.sightings[i].pos <= pos.Replayed {
			i++
		}
		r.sightings = append(r.sightings[:0], r.sightings[i:]...)
		s.LagKnown = true
		if len(r.sightings) > 0 {
			s.Lag = now.Sub(r.sightings[0].at)
		}
		if !pos.Streaming {
			// It replayed what it got, but cannot know what it did not.
			s.LagKnown = false
			s.Why = "replica not streaming from the primary"
			return s
		}
	}
	if s.Lag > r.maxLag {
		s.Why = fmt.Sprintf("replica lag %s (more than %s)", s.Lag.Round(time.Second), r.maxLag)
		return s
	}
	s.Reading = true
	return s
}
