package web

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/leasehold/leasehold/api"
	"github.com/leasehold/leasehold/apitoken"
	"github.com/leasehold/leasehold/queue"
)

// maxClaimWait bounds a claim's long poll. It stays under the idle
// timeouts of common reverse proxies.
const maxClaimWait = 30 * time.Second

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
	if err := refuseExplicitZero(body, req); err != nil {
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

// refuseExplicitZero refuses a limit or lease_ms of 0 that the request
// sends: the description's minimums are 1 and 100, and only a field left
// out (or null) takes the default. ClaimRequest cannot tell the two apart.
func refuseExplicitZero(body []byte, r api.ClaimRequest) error {
	var sent map[string]json.RawMessage
	if json.Unmarshal(body, &sent) != nil {
		return nil // decodeObject accepted it, so it is an object
	}
	given := func(name string) bool { v, ok := sent[name]; return ok && string(v) != "null" }
	if r.Limit == 0 && given("limit") {
		return badRequest("limit", "must be between 1 and %d", queue.MaxClaimLimit)
	}
	if r.LeaseMs == 0 && given("lease_ms") {
		return badRequest("lease_ms", "must be between %d and %d", queue.MinLease.Milliseconds(), queue.MaxLease.Milliseconds())
	}
	return nil
}

// claimParams fills in the defaults of a claim (or presence) request of
// worker and checks it with queue.CheckClaim, the rule a direct worker's
// claim obeys too. Absent queues are ["default"]; an empty list is
// refused.
func claimParams(r api.ClaimRequest, worker string) (queue.ClaimParams, time.Duration, error) {
	if r.Queues == nil {
		r.Queues = []string{"default"}
	}
	if r.Limit == 0 {
		r.Limit = 1
	}
	if r.WaitMs < 0 || r.WaitMs > maxClaimWait.Milliseconds() {
		return queue.ClaimParams{}, 0, badRequest("wait_ms", "must be between 0 and %d", maxClaimWait.Milliseconds())
	}
	// Saturated before the conversion, so that no huge lease_ms wraps
	// around into the bounds; queue refuses what is out of them.
	leaseMs := min(max(r.LeaseMs, -1), queue.MaxLease.Milliseconds()+1)
	p := queue.ClaimParams{WorkerID: worker, Queues: r.Queues, Devices: r.Devices, Limit: r.Limit,
		Lease: time.Duration(leaseMs) * time.Millisecond}
	if p.Lease == 0 {
		p.Lease = queue.DefaultLease
	}
	if err := queue.CheckClaim(p); err != nil {
		return queue.ClaimParams{}, 0, err
	}
	return p, time.Duration(r.WaitMs) * time.Millisecond, nil
}

// workerName is the calling worker's identity: its token's name.
func workerName(c echo.Context) string {
	tok, _ := c.Get(tokenKey).(apitoken.Token)
	return tok.Name
}
