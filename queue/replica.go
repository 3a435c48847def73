package queue

import (
	"context"
	"fmt"
	"time"
)

// ReplayPosition is where a read replica's replay stands, as the replica
// itself says (see ReplicaReplayPosition in queries/replica.sql).
type ReplayPosition struct {
	// InRecovery is false on a server that is not a standby (a primary,
	// or a standby since promoted): it is never behind.
	InRecovery bool
	// Received and Replayed are WAL positions: what the standby received
	// from the primary, and what its queries see. Received is -1 when
	// nothing streams to it.
	Received, Replayed int64
	// ReplayAge is how long ago the last transaction it replayed
	// committed, -1 if none since it started.
	ReplayAge time.Duration
	// Streaming says its WAL receiver is connected to the primary.
	Streaming bool
}

// ReplayPosition reads where the database of c stands in replaying its
// primary's WAL; c is the replica's client.
func (c *Client) ReplayPosition(ctx context.Context) (ReplayPosition, error) {
	r, err := c.q.ReplicaReplayPosition(ctx)
	if err != nil {
		return ReplayPosition{}, fmt.Errorf("reading the replay position: %w", err)
	}
	age := time.Duration(-1)
	if r.ReplayAgeS >= 0 {
		age = time.Duration(r.ReplayAgeS * float64(time.Second))
	}
	return ReplayPosition{
		InRecovery: r.InRecovery, Received: r.Received, Replayed: r.Replayed,
		ReplayAge: age, Streaming: r.Receiver == "streaming",
	}, nil
}
