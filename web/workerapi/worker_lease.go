package workerapi

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/leasehold/leasehold/api"
	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/web/httpx"
)

// The writes of a lease holder. Each carries the lease token of the
// attempt; the queue fences it exactly as for a direct worker, and a
// token that is not current answers 409 {"error":"lease lost"}.

// maxMessageBytes bounds an error or progress message from a worker; the
// queue cleans what it stores (no NUL, valid UTF-8).
const maxMessageBytes = api.MaxMessageBytes

// decodeLease reads a lease write's body into v (which embeds
// api.LeaseRequest) and returns the lease it names.
func decodeLease(c echo.Context, limit int64, v interface{ Token() *int64 }) (queue.Lease, error) {
	id, err := httpx.JobID(c)
	if err != nil {
		return queue.Lease{}, err
	}
	body, err := httpx.ReadBody(c, limit)
	if err != nil {
		return queue.Lease{}, err
	}
	if err := httpx.DecodeObject(body, v, ""); err != nil {
		return queue.Lease{}, err
	}
	tok := v.Token()
	if tok == nil {
		return queue.Lease{}, httpx.BadRequest("lease_token", "is required")
	}
	return queue.Lease{JobID: id, Token: *tok, WorkerID: workerName(c)}, nil
}

// Heartbeat extends the lease, and says whether a cancel was requested.
func (h *Handler) Heartbeat(c echo.Context) error {
	var req api.LeaseRequest
	l, err := decodeLease(c, httpx.ActionBodyLimit, &req)
	if err != nil {
		return err
	}
	res, err := h.queue.Heartbeat(c.Request().Context(), l)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, res.API())
}

// Complete records the job's success with its result.
func (h *Handler) Complete(c echo.Context) error {
	var req api.CompleteRequest
	l, err := decodeLease(c, httpx.JobBodyLimit, &req)
	if err != nil {
		return err
	}
	// The queue checks it again before it writes; checked here too so
	// that the answer is 400 whichever layer the rule is enforced in.
	if err := queue.CheckResult(req.Result); err != nil {
		return err
	}
	job, err := h.queue.Complete(c.Request().Context(), l, req.Result)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, job.API())
}

// Fail ends the attempt: the job is retried or dead, as queue decides.
func (h *Handler) Fail(c echo.Context) error {
	var req api.FailRequest
	l, err := decodeLease(c, httpx.ActionBodyLimit, &req)
	if err != nil {
		return err
	}
	if len(req.Error) > maxMessageBytes {
		return httpx.BadRequest("error", "must be at most %d bytes", maxMessageBytes)
	}
	retryable := req.Retryable == nil || *req.Retryable
	job, err := h.queue.Fail(c.Request().Context(), l, req.Error, retryable)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, job.API())
}

// Release gives the job back without counting the attempt: the
// worker is shutting down.
func (h *Handler) Release(c echo.Context) error { return h.endLease(c, h.queue.Release) }

// Cancelled acknowledges a cancel request: the worker stopped the
// job, which ends cancelled.
func (h *Handler) Cancelled(c echo.Context) error { return h.endLease(c, h.queue.AckCancel) }

// endLease ends the lease that a body of only its token names with end,
// and answers the job.
func (h *Handler) endLease(c echo.Context, end func(context.Context, queue.Lease) (queue.Job, error)) error {
	var req api.LeaseRequest
	l, err := decodeLease(c, httpx.ActionBodyLimit, &req)
	if err != nil {
		return err
	}
	job, err := end(c.Request().Context(), l)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, job.API())
}

// Progress records how far the attempt is, and what it says.
func (h *Handler) Progress(c echo.Context) error {
	var req api.ProgressRequest
	l, err := decodeLease(c, httpx.ActionBodyLimit, &req)
	if err != nil {
		return err
	}
	if len(req.Message) > maxMessageBytes {
		return httpx.BadRequest("message", "must be at most %d bytes", maxMessageBytes)
	}
	var step int32
	if req.Step != nil {
		if *req.Step < 1 || *req.Step > queue.MaxStep {
			return httpx.BadRequest("step", "must be an integer from 1 to %d", queue.MaxStep)
		}
		step = int32(*req.Step)
	}
	if err := h.queue.ProgressStep(c.Request().Context(), l, step, req.Progress, req.Message); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// Checkpoint saves the attempt's checkpoint: the step it has done and a
// JSON object of state, at most queue.MaxCheckpointBytes (larger: 413).
// The job's next attempt receives it in its claim answer.
func (h *Handler) Checkpoint(c echo.Context) error {
	var req api.CheckpointRequest
	l, err := decodeLease(c, httpx.ActionBodyLimit, &req)
	if err != nil {
		return err
	}
	if req.Step == nil {
		return httpx.BadRequest("step", "is required")
	}
	if *req.Step < 0 || *req.Step > queue.MaxStep {
		return httpx.BadRequest("step", "must be an integer from 0 to %d", queue.MaxStep)
	}
	if req.State == nil {
		return httpx.BadRequest("state", "is required")
	}
	if err := h.queue.SaveCheckpoint(c.Request().Context(), l, int(*req.Step), req.State); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// Usage records what the attempt used (api.UsageRequest). The report
// that spends the job's budget is recorded and answered 409 with code
// budget_spent: the attempt ended failed, permanently, "budget spent",
// and the worker stops the job.
func (h *Handler) Usage(c echo.Context) error {
	var req api.UsageRequest
	l, err := decodeLease(c, httpx.ActionBodyLimit, &req)
	if err != nil {
		return err
	}
	if err := h.queue.Usage(c.Request().Context(), l, queue.UsageFromAPI(req.Usage)); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// Effect is the side-effect ledger: "start" says whether to perform
// the effect (and gives its idempotency key), "finish" records it done.
func (h *Handler) Effect(c echo.Context) error {
	var req api.EffectRequest
	l, err := decodeLease(c, httpx.JobBodyLimit, &req)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	switch req.Action {
	case api.EffectStart:
		start, err := h.queue.StartEffect(ctx, l, req.Key)
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, start.API())
	case api.EffectFinish:
		if err := queue.CheckResult(req.Result); err != nil {
			return err
		}
		if err := h.queue.FinishEffect(ctx, l, req.Key, req.Result); err != nil {
			return err
		}
		return c.JSON(http.StatusOK, struct{}{})
	default:
		return httpx.BadRequest("action", `must be "start" or "finish"`)
	}
}

// maxInfoAge bounds how old device info a worker may send.
const maxInfoAge = 365 * 24 * time.Hour

// Presence records that the calling worker is alive, for /workers
// and the stats.
func (h *Handler) Presence(c echo.Context) error {
	body, err := httpx.ReadBody(c, httpx.ActionBodyLimit)
	if err != nil {
		return err
	}
	var req api.PresenceRequest
	if err := httpx.DecodeObject(body, &req, ""); err != nil {
		return err
	}
	if len(req.Queues) == 0 {
		req.Queues = nil // a presence may name no queue: claimParams's default
	}
	p, _, err := claimParams(api.ClaimRequest{Queues: req.Queues, Devices: req.Devices}, workerName(c))
	if err != nil {
		return err
	}
	if req.InfoAgeMs != nil && (*req.InfoAgeMs < 0 || *req.InfoAgeMs > maxInfoAge.Milliseconds()) {
		return httpx.BadRequest("info_age_ms", "must be between 0 and %d", maxInfoAge.Milliseconds())
	}
	presence := queue.Presence{ID: p.WorkerID, Devices: p.Devices, Queues: p.Queues, Device: queue.DeviceReportFromAPI(req), Starting: req.Starting}
	// A start is rare and dates the worker anew: it is written at once;
	// every other presence joins the server's batch.
	record := h.queue.WorkerSeen
	if h.presence != nil && !presence.Starting {
		record = h.presence.Record
	}
	if err := record(c.Request().Context(), presence); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// Whoami tells a remote worker its identity (its token's name) and
// lets it check its token before it starts.
func (h *Handler) Whoami(c echo.Context) error {
	return c.JSON(http.StatusOK, api.WhoamiResponse{WorkerID: workerName(c)})
}

// Availability is PUT /api/v1/worker/availability: the calling worker
// sets its own window (worker --available); an empty window clears it.
func (h *Handler) Availability(c echo.Context) error {
	body, err := httpx.ReadBody(c, httpx.ActionBodyLimit)
	if err != nil {
		return err
	}
	var req api.AvailabilityPut
	if err := httpx.DecodeObject(body, &req, ""); err != nil {
		return err
	}
	ctx, name := c.Request().Context(), workerName(c)
	if strings.TrimSpace(req.Window) == "" {
		if err := h.queue.ClearAvailability(ctx, queue.ScopeWorker, name); err != nil && !errors.Is(err, queue.ErrNotFound) {
			return err
		}
		return c.NoContent(http.StatusNoContent)
	}
	if _, err := h.queue.SetAvailability(ctx, queue.ScopeWorker, name, req.Window, "worker:"+name); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}
