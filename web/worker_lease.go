package web

import (
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/leasehold/leasehold/api"
	"github.com/leasehold/leasehold/queue"
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
	id, err := jobID(c)
	if err != nil {
		return queue.Lease{}, err
	}
	body, err := readBody(c, limit)
	if err != nil {
		return queue.Lease{}, err
	}
	if err := decodeObject(body, v, ""); err != nil {
		return queue.Lease{}, err
	}
	tok := v.Token()
	if tok == nil {
		return queue.Lease{}, badRequest("lease_token", "is required")
	}
	return queue.Lease{JobID: id, Token: *tok, WorkerID: workerName(c)}, nil
}

func (s *server) workerHeartbeat(c echo.Context) error {
	var req api.LeaseRequest
	l, err := decodeLease(c, actionBodyLimit, &req)
	if err != nil {
		return err
	}
	res, err := s.queue.Heartbeat(c.Request().Context(), l)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, res.API())
}

func (s *server) workerComplete(c echo.Context) error {
	var req api.CompleteRequest
	l, err := decodeLease(c, jobBodyLimit, &req)
	if err != nil {
		return err
	}
	// The queue checks it again before it writes; checked here too so
	// that the answer is 400 whichever layer the rule is enforced in.
	if err := queue.CheckResult(req.Result); err != nil {
		return err
	}
	job, err := s.queue.Complete(c.Request().Context(), l, req.Result)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, job.API())
}

func (s *server) workerFail(c echo.Context) error {
	var req api.FailRequest
	l, err := decodeLease(c, actionBodyLimit, &req)
	if err != nil {
		return err
	}
	if len(req.Error) > maxMessageBytes {
		return badRequest("error", "must be at most %d bytes", maxMessageBytes)
	}
	retryable := req.Retryable == nil || *req.Retryable
	job, err := s.queue.Fail(c.Request().Context(), l, req.Error, retryable)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, job.API())
}

// workerRelease gives the job back without counting the attempt: the
// worker is shutting down.
func (s *server) workerRelease(c echo.Context) error {
	var req api.LeaseRequest
	l, err := decodeLease(c, actionBodyLimit, &req)
	if err != nil {
		return err
	}
	job, err := s.queue.Release(c.Request().Context(), l)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, job.API())
}

// workerCancelled acknowledges a cancel request: the worker stopped the
// job, which ends cancelled.
func (s *server) workerCancelled(c echo.Context) error {
	var req api.LeaseRequest
	l, err := decodeLease(c, actionBodyLimit, &req)
	if err != nil {
		return err
	}
	job, err := s.queue.AckCancel(c.Request().Context(), l)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, job.API())
}

func (s *server) workerProgress(c echo.Context) error {
	var req api.ProgressRequest
	l, err := decodeLease(c, actionBodyLimit, &req)
	if err != nil {
		return err
	}
	if len(req.Message) > maxMessageBytes {
		return badRequest("message", "must be at most %d bytes", maxMessageBytes)
	}
	if err := s.queue.Progress(c.Request().Context(), l, req.Progress, req.Message); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// workerEffect is the side-effect ledger: "start" says whether to perform
// the effect (and gives its idempotency key), "finish" records it done.
func (s *server) workerEffect(c echo.Context) error {
	var req api.EffectRequest
	l, err := decodeLease(c, jobBodyLimit, &req)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	switch req.Action {
	case api.EffectStart:
		start, err := s.queue.StartEffect(ctx, l, req.Key)
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, start.API())
	case api.EffectFinish:
		if err := queue.CheckResult(req.Result); err != nil {
			return err
		}
		if err := s.queue.FinishEffect(ctx, l, req.Key, req.Result); err != nil {
			return err
		}
		return c.JSON(http.StatusOK, struct{}{})
	default:
		return badRequest("action", `must be "start" or "finish"`)
	}
}

// maxInfoAge bounds how old device info a worker may send.
const maxInfoAge = 365 * 24 * time.Hour

// workerPresence records that the calling worker is alive, for /workers
// and the stats.
func (s *server) workerPresence(c echo.Context) error {
	body, err := readBody(c, actionBodyLimit)
	if err != nil {
		return err
	}
	var req api.PresenceRequest
	if err := decodeObject(body, &req, ""); err != nil {
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
		return badRequest("info_age_ms", "must be between 0 and %d", maxInfoAge.Milliseconds())
	}
	presence := queue.Presence{ID: p.WorkerID, Devices: p.Devices, Queues: p.Queues, Device: queue.DeviceReportFromAPI(req)}
	if err := s.queue.WorkerSeen(c.Request().Context(), presence); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// workerWhoami tells a remote worker its identity (its token's name) and
// lets it check its token before it starts.
func (s *server) workerWhoami(c echo.Context) error {
	return c.JSON(http.StatusOK, api.WhoamiResponse{WorkerID: workerName(c)})
}
