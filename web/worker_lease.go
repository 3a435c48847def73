package web

import (
	"encoding/json"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/leasehold/leasehold/queue"
)

// The writes of a lease holder. Each carries the lease token of the
// attempt; the queue fences it exactly as for a direct worker, and a
// token that is not current answers 409 {"error":"lease lost"}.

// maxMessageBytes bounds an error or progress message from a worker; the
// queue cleans what it stores (no NUL, valid UTF-8).
const maxMessageBytes = 64 << 10

// leaseRequest is the part every lease write shares.
type leaseRequest struct {
	LeaseToken *int64 `json:"lease_token"`
}

// heartbeatView is the answer to a heartbeat. remaining_ms is computed by
// the database, so the worker never compares its clock with the server's.
type heartbeatView struct {
	LeaseUntil      apiTime `json:"lease_until"`
	CancelRequested bool    `json:"cancel_requested"`
	RemainingMs     int64   `json:"remaining_ms"`
}

// decodeLease reads a lease write's body into v (which embeds
// leaseRequest) and returns the lease it names.
func decodeLease(c echo.Context, limit int64, v interface{ token() *int64 }) (queue.Lease, error) {
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
	tok := v.token()
	if tok == nil {
		return queue.Lease{}, badRequest("lease_token", "is required")
	}
	return queue.Lease{JobID: id, Token: *tok, WorkerID: workerName(c)}, nil
}

func (r *leaseRequest) token() *int64 { return r.LeaseToken }

func (s *server) workerHeartbeat(c echo.Context) error {
	var req leaseRequest
	l, err := decodeLease(c, actionBodyLimit, &req)
	if err != nil {
		return err
	}
	res, err := s.queue.Heartbeat(c.Request().Context(), l)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, heartbeatView{
		LeaseUntil: apiTime(res.LeaseUntil), CancelRequested: res.CancelRequested, RemainingMs: res.Remaining.Milliseconds(),
	})
}

type completeRequest struct {
	leaseRequest
	Result json.RawMessage `json:"result"`
}

func (s *server) workerComplete(c echo.Context) error {
	var req completeRequest
	l, err := decodeLease(c, jobBodyLimit, &req)
	if err != nil {
		return err
	}
	if len(req.Result) > 0 && string(req.Result) != "null" && req.Result[0] != '{' {
		return badRequest("result", "must be a JSON object")
	}
	job, err := s.queue.Complete(c.Request().Context(), l, req.Result)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, newJobView(job))
}

type failRequest struct {
	leaseRequest
	Error     string `json:"error"`
	Retryable *bool  `json:"retryable"`
}

func (s *server) workerFail(c echo.Context) error {
	var req failRequest
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
	return c.JSON(http.StatusOK, newJobView(job))
}

// workerRelease gives the job back without counting the attempt: the
// worker is shutting down.
func (s *server) workerRelease(c echo.Context) error {
	var req leaseRequest
	l, err := decodeLease(c, actionBodyLimit, &req)
	if err != nil {
		return err
	}
	job, err := s.queue.Release(c.Request().Context(), l)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, newJobView(job))
}

// workerCancelled acknowledges a cancel request: the worker stopped the
// job, which ends cancelled.
func (s *server) workerCancelled(c echo.Context) error {
	var req leaseRequest
	l, err := decodeLease(c, actionBodyLimit, &req)
	if err != nil {
		return err
	}
	job, err := s.queue.AckCancel(c.Request().Context(), l)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, newJobView(job))
}

type progressRequest struct {
	leaseRequest
	Progress float64 `json:"progress"`
	Message  string  `json:"message"`
}

func (s *server) workerProgress(c echo.Context) error {
	var req progressRequest
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

type effectRequest struct {
	leaseRequest
	Key    string          `json:"key"`
	Action string          `json:"action"` // start or finish
	Result json.RawMessage `json:"result"`
}

// workerEffect is the side-effect ledger: "start" says whether to perform
// the effect (and gives its idempotency key), "finish" records it done.
func (s *server) workerEffect(c echo.Context) error {
	var req effectRequest
	l, err := decodeLease(c, jobBodyLimit, &req)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	switch req.Action {
	case "start":
		start, err := s.queue.StartEffect(ctx, l, req.Key)
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, start)
	case "finish":
		if len(req.Result) > 0 && string(req.Result) != "null" && req.Result[0] != '{' {
			return badRequest("result", "must be a JSON object")
		}
		if err := s.queue.FinishEffect(ctx, l, req.Key, req.Result); err != nil {
			return err
		}
		return c.JSON(http.StatusOK, struct{}{})
	default:
		return badRequest("action", `must be "start" or "finish"`)
	}
}

type presenceRequest struct {
	Queues  []string `json:"queues"`
	Devices []string `json:"devices"`
}

// workerPresence records that the calling worker is alive, for /workers
// and the stats.
func (s *server) workerPresence(c echo.Context) error {
	body, err := readBody(c, actionBodyLimit)
	if err != nil {
		return err
	}
	var req presenceRequest
	if err := decodeObject(body, &req, ""); err != nil {
		return err
	}
	claim := claimRequest{Queues: req.Queues, Devices: req.Devices}
	p, _, err := claim.params(workerName(c))
	if err != nil {
		return err
	}
	if err := s.queue.WorkerSeen(c.Request().Context(), p.WorkerID, p.Devices, p.Queues); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// workerWhoami tells a remote worker its identity (its token's name) and
// lets it check its token before it starts.
func (s *server) workerWhoami(c echo.Context) error {
	return c.JSON(http.StatusOK, map[string]string{"worker_id": workerName(c)})
}
