// Package workerapi is the API of remote workers (worker tokens): claim,
// presence, and the writes of a lease holder, each fenced by the
// attempt's lease token exactly as for a direct worker. Its handlers are
// methods of Handler; package web registers them, with the middleware of
// package httpx, in its one routes.go.
package workerapi

import (
	"cmp"
	"time"

	"github.com/leasehold/leasehold/artifact"
	"github.com/leasehold/leasehold/queue"
)

// Config is what the worker API needs.
type Config struct {
	Queue *queue.Client
	// Artifacts stores uploads; nil answers 503 on the upload route.
	Artifacts *artifact.Store
	// Jobs, when set and running, lets claims wait for new jobs (long
	// polling) instead of coming back empty at once.
	Jobs *queue.JobNotifier
	// Handover is how long a claimed job waits for its worker to confirm
	// it (SPEC lease rule 11); zero is queue.DefaultHandover.
	Handover time.Duration
	// MaxClaimsPerToken bounds the claims one worker token may have open
	// at once; more are answered 429 at once (default
	// DefaultMaxClaimsPerToken).
	MaxClaimsPerToken int
	// Presence, when set and running, records presence in batches; nil
	// writes each report on its own (queue.Client.WorkerSeen).
	Presence *queue.PresenceBatch
}

// Handler serves the worker API; its exported methods are echo handlers.
type Handler struct {
	queue     *queue.Client
	artifacts *artifact.Store
	jobs      *queue.JobNotifier
	claims    *queue.ClaimGate
	handover  time.Duration
	open      *openClaims
	presence  *queue.PresenceBatch
}

// MaxClaimWait is the longest a claim may wait for a job (its wait_ms):
// package web bounds the claim route by it plus the request deadline.
const MaxClaimWait = maxClaimWait

// claimTurns is how many woken long polls claim at a time (queue.ClaimGate).
const claimTurns = 4

// New returns the worker API's handler.
func New(cfg Config) *Handler {
	h := &Handler{queue: cfg.Queue, artifacts: cfg.Artifacts, jobs: cfg.Jobs, handover: cmp.Or(cfg.Handover, queue.DefaultHandover), presence: cfg.Presence,
		open: newOpenClaims(cmp.Or(cfg.MaxClaimsPerToken, DefaultMaxClaimsPerToken))}
	if h.jobs != nil {
		h.claims = queue.NewClaimGate(h.jobs, claimTurns)
	}
	return h
}
