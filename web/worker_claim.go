package web

import (
	"context"
	"net/http"
	"regexp"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/leasehold/leasehold/api"
	"github.com/leasehold/leasehold/apitoken"
	"github.com/leasehold/leasehold/queue"
)

// Bounds of a remote worker's claim.
const (
	maxClaimLimit  = 100
	maxClaimQueues = 100
	// maxClaimWait stays under the idle timeouts of common reverse proxies.
	maxClaimWait = 30 * time.Second
)

var (
	queueNamePattern = regexp.MustCompile(`^[a-z0-9_.-]{1,64}$`)
)

// workerClaim leases up to limit due jobs to the calling worker, with the
// same query a direct worker uses.
func (s *server) workerClaim(c echo.Context) error {
	received := time.Now()
	body, err := readBody(c, actionBodyLimit)
	if err != nil {
		return err
	}
	var req api.ClaimRequest
	if err := decodeObject(body, &req, ""); err != nil {
		return err
	}
	worker := workerName(c)
	if req.WorkerID != "" && req.WorkerID != worker {
		return &apiError{Status: http.StatusForbidden, Field: "worker_id",
			Message: "must be the name of the worker token (" + worker + "), or left out"}
	}
	p, wait, err := claimParams(req, worker)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	var waiter *queue.Waiter
	if s.jobs != nil && wait > 0 {
		waiter = s.jobs.Waiter() // before the claim: nothing sent after it is missed
	}
	// waited is taken before each claim statement begins, so it is never
	// more than the time between the request's arrival and the claim's
	// now(): the worker may add it to its send time (see waited_ms).
	waited := time.Since(received)
	jobs, err := s.queue.Claim(ctx, p)
	if err != nil {
		return err
	}
	if len(jobs) == 0 && waiter != nil {
		// The wait holds no database connection: the waiter is fed by
		// the server's one LISTEN connection.
		wctx, cancel := context.WithTimeout(ctx, wait)
		defer cancel()
		// Of the crowd one notification wakes, claims take turns and skip
		// once the announced jobs are gone (queue.ClaimGate).
		for len(jobs) == 0 && waiter.Wait(wctx, p.Queues) == nil {
			claimed, err := s.claims.Claim(wctx, waiter, p, func() ([]queue.Job, error) {
				waited = time.Since(received)
				return s.queue.Claim(ctx, p)
			})
			if err != nil {
				return err
			}
			jobs = claimed
		}
	}
	out := api.ClaimResponse{Jobs: make([]api.ClaimedJob, len(jobs)), WaitedMs: waited.Milliseconds()}
	for i, j := range jobs {
		out.Jobs[i] = j.ClaimedAPI()
	}
	return c.JSON(http.StatusOK, out)
}

// claimParams checks a claim (or presence) request of worker.
func claimParams(r api.ClaimRequest, worker string) (queue.ClaimParams, time.Duration, error) {
	if len(r.Queues) == 0 {
		r.Queues = []string{"default"}
	}
	if len(r.Queues) > maxClaimQueues {
		return queue.ClaimParams{}, 0, badRequest("queues", "must name at most %d queues", maxClaimQueues)
	}
	for _, q := range r.Queues {
		if !queueNamePattern.MatchString(q) {
			return queue.ClaimParams{}, 0, badRequest("queues", "each must match [a-z0-9_.-]{1,64}")
		}
	}
	if r.Limit == 0 {
		r.Limit = 1
	}
	if r.Limit < 1 || r.Limit > maxClaimLimit {
		return queue.ClaimParams{}, 0, badRequest("limit", "must be between 1 and %d", maxClaimLimit)
	}
	if r.LeaseMs == 0 {
		r.LeaseMs = queue.DefaultLease.Milliseconds()
	}
	lease := time.Duration(r.LeaseMs) * time.Millisecond
	if r.LeaseMs < 0 || lease < queue.MinLease || lease > queue.MaxLease {
		return queue.ClaimParams{}, 0, badRequest("lease_ms", "must be between %d and %d", queue.MinLease.Milliseconds(), queue.MaxLease.Milliseconds())
	}
	if r.WaitMs < 0 || r.WaitMs > maxClaimWait.Milliseconds() {
		return queue.ClaimParams{}, 0, badRequest("wait_ms", "must be between 0 and %d", maxClaimWait.Milliseconds())
	}
	return queue.ClaimParams{WorkerID: worker, Queues: r.Queues, Devices: r.Devices, Limit: r.Limit, Lease: lease},
		time.Duration(r.WaitMs) * time.Millisecond, nil
}

// workerName is the calling worker's identity: its token's name.
func workerName(c echo.Context) string {
	tok, _ := c.Get(tokenKey).(apitoken.Token)
	return tok.Name
}
