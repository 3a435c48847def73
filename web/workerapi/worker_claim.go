package workerapi

import (
	"context"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/leasehold/leasehold/api"
	"github.com/leasehold/leasehold/apitoken"
	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/web/httpx"
)

// maxClaimWait bounds a claim's long poll. It stays under the idle
// timeouts of common reverse proxies.
const maxClaimWait = 30 * time.Second

// Claim leases up to limit due jobs to the calling worker, with the
// same query a direct worker uses, each handed over (SPEC lease rule 11):
// the answer may never reach the worker (it exited while its long poll
// was held, a proxy kept the poll open, the connection broke), so a job
// runs only once the worker confirms it by its first heartbeat, within
// the hand-over deadline. A hand-over never confirmed ends not_delivered,
// uncounted, and the job is claimable again at once.
//
// A token may have only a few claims open at once (Config.MaxClaimsPerToken):
// the rest are refused at once, 429, before their bodies are read.
func (h *Handler) Claim(c echo.Context) error {
	received := time.Now()
	worker := workerName(c)
	if !h.open.acquire(worker) {
		return httpx.TooMany(c, claimRetryAfter*time.Second,
			"worker %s already has %d claims open, as many as a worker token may: retry once one has ended", worker, h.open.max)
	}
	defer h.open.release(worker)
	body, err := httpx.ReadBody(c, httpx.ActionBodyLimit)
	if err != nil {
		return err
	}
	var req api.ClaimRequest
	if err := httpx.DecodeObject(body, &req, ""); err != nil {
		return err
	}
	if req.WorkerID != "" && req.WorkerID != worker {
		return &httpx.Error{Status: http.StatusForbidden, Field: "worker_id",
			Message: "must be the name of the worker token (" + worker + "), or left out"}
	}
	p, wait, err := claimParams(req, worker)
	if err != nil {
		return err
	}
	p.Handover = min(h.handover, p.Lease)
	// Every claim of this request, the woken ones too, is gated on the
	// token still being active (queue.ErrTokenRevoked ends the poll).
	p.TokenID = tokenID(c)
	ctx := c.Request().Context()
	var waiter *queue.Waiter
	if h.jobs != nil && wait > 0 {
		waiter = h.jobs.Waiter() // before the claim: nothing sent after it is missed
	}
	// waited is taken before each claim statement begins, so it is never
	// more than the time between the request's arrival and the claim's
	// now(): the worker may add it to its send time (see waited_ms).
	waited := time.Since(received)
	var jobs []queue.Job
	if waiter != nil {
		// Skipped when a claim of the same queues and devices came back
		// empty since the last notification (queue.ClaimGate.First): an
		// idle fleet's polls then wait without a statement each.
		jobs, err = h.claims.First(waiter, p, func() ([]queue.Job, error) { return h.queue.Claim(ctx, p) })
	} else {
		jobs, err = h.queue.Claim(ctx, p)
	}
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
			claimed, err := h.claims.Claim(wctx, waiter, p, func() ([]queue.Job, error) {
				waited = time.Since(received)
				return h.queue.Claim(ctx, p)
			})
			if err != nil {
				return err
			}
			jobs = claimed
		}
	}
	if ctx.Err() != nil && len(jobs) > 0 {
		// The worker is gone: nobody will confirm these, and they need
		// not wait out the hand-over deadline.
		if _, err := h.queue.AbandonHandovers(context.WithoutCancel(ctx), jobs); err != nil {
			return err
		}
		return ctx.Err()
	}
	out := api.ClaimResponse{
		Jobs: make([]api.ClaimedJob, len(jobs)), WaitedMs: waited.Milliseconds(), HandoverMs: p.Handover.Milliseconds(),
	}
	for i, j := range jobs {
		out.Jobs[i] = j.ClaimedAPI()
	}
	return c.JSON(http.StatusOK, out)
}

// claimParams fills in the defaults of a claim (or presence) request of
// worker and checks it with queue.CheckClaim, the rule a direct worker's
// claim obeys too; the limit also stays within api.MaxClaimLimit, the
// bound of one answer. Absent queues are ["default"]; an empty list is
// refused. An absent limit is 1 and an absent lease_ms the default
// lease; sent, each is checked as it is (0 is refused).
func claimParams(r api.ClaimRequest, worker string) (queue.ClaimParams, time.Duration, error) {
	if r.Queues == nil {
		r.Queues = []string{"default"}
	}
	if r.WaitMs < 0 || r.WaitMs > maxClaimWait.Milliseconds() {
		return queue.ClaimParams{}, 0, httpx.BadRequest("wait_ms", "must be between 0 and %d", maxClaimWait.Milliseconds())
	}
	p := queue.ClaimParams{WorkerID: worker, Queues: r.Queues, Devices: r.Devices, Limit: 1, Lease: queue.DefaultLease}
	if r.Limit != nil {
		if *r.Limit > api.MaxClaimLimit {
			return queue.ClaimParams{}, 0, httpx.BadRequest("limit", "must be between 1 and %d", api.MaxClaimLimit)
		}
		p.Limit = *r.Limit
	}
	if r.LeaseMs != nil {
		// Saturated just outside the bounds before the conversion, so that
		// no huge lease_ms wraps around into them and a sent 0 does not
		// read as queue's "default": queue refuses what is out of them.
		ms := min(max(*r.LeaseMs, queue.MinLease.Milliseconds()-1), queue.MaxLease.Milliseconds()+1)
		p.Lease = time.Duration(ms) * time.Millisecond
	}
	if err := queue.CheckClaim(p); err != nil {
		return queue.ClaimParams{}, 0, err
	}
	return p, time.Duration(r.WaitMs) * time.Millisecond, nil
}

// tokenID is the calling worker's token.
func tokenID(c echo.Context) int64 {
	tok, _ := c.Get(httpx.TokenKey).(apitoken.Token)
	return tok.ID
}

// workerName is the calling worker's identity: its token's name.
func workerName(c echo.Context) string {
	tok, _ := c.Get(httpx.TokenKey).(apitoken.Token)
	return tok.Name
}
