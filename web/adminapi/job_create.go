package adminapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/leasehold/leasehold/api"
	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/web/httpx"
)

// batchBodyLimit bounds a batch of up to queue.MaxBatch jobs.
const batchBodyLimit = 64 << 20

// headerIdempotencyKey may carry a job's idempotency key instead of the
// body, as many HTTP clients send it.
const headerIdempotencyKey = "Idempotency-Key"

// CreateJob submits one job: 201 when new, 200 when the idempotency key
// names the same job already, 409 when it names a different one.
func (h *Handler) CreateJob(c echo.Context) error {
	body, err := httpx.ReadBody(c, httpx.JobBodyLimit)
	if err != nil {
		return err
	}
	nj, err := decodeNewJob(body, "")
	if err != nil {
		return err
	}
	if key := c.Request().Header.Get(headerIdempotencyKey); key != "" {
		switch {
		case nj.IdempotencyKey == nil:
			nj.IdempotencyKey = &key
		case *nj.IdempotencyKey != key:
			return httpx.BadRequest("idempotency_key", "differs from the Idempotency-Key header; send one or make them equal")
		}
	}
	job, existed, err := h.queue.Insert(c.Request().Context(), nj)
	if err != nil {
		return err
	}
	status := http.StatusCreated
	if existed {
		status = http.StatusOK
	}
	c.Response().Header().Set(echo.HeaderLocation, fmt.Sprintf("/api/v1/jobs/%d", job.ID))
	return c.JSON(status, job.API())
}

// jobRequest is api.NewJob as it arrives over HTTP. run_at is read as a
// string here because encoding/json's time errors do not name the field.
type jobRequest struct {
	api.NewJob
	RunAt *string `json:"run_at"`
}

// decodeNewJob decodes and checks one submitted job; prefix locates it in
// a batch ("jobs[3].") for the field names of errors.
func decodeNewJob(data []byte, prefix string) (queue.NewJob, error) {
	var req jobRequest
	if err := httpx.DecodeObject(data, &req, prefix); err != nil {
		return queue.NewJob{}, err
	}
	nj := queue.NewJobFromAPI(req.NewJob)
	if req.RunAt != nil {
		t, err := time.Parse(time.RFC3339Nano, *req.RunAt)
		if err != nil {
			return queue.NewJob{}, httpx.BadRequest(prefix+"run_at", "must be an RFC 3339 time such as 2026-09-01T12:00:00Z")
		}
		nj.RunAt = &t
	}
	// queue reads a missing payload as {}; an explicit null is more likely
	// a client bug than a wish for an empty object.
	if bytes.Equal(nj.Payload, []byte("null")) {
		return queue.NewJob{}, httpx.BadRequest(prefix+"payload", "must be a JSON object, not null")
	}
	return nj, nil
}

// batchRequest is the body of POST /api/v1/jobs/batch. Jobs stay raw until
// each is decoded on its own, so that errors can name "jobs[3].priority".
type batchRequest struct {
	Jobs []json.RawMessage `json:"jobs"`
}

// CreateJobBatch submits up to queue.MaxBatch jobs at once: all of them,
// or none when one is invalid or conflicts. A batch answers 201 even when
// some of its jobs existed already (same idempotency key and contents).
func (h *Handler) CreateJobBatch(c echo.Context) error {
	if c.Request().Header.Get(headerIdempotencyKey) != "" {
		return httpx.BadRequest("idempotency_key", "the Idempotency-Key header applies to POST /api/v1/jobs; give each job of a batch its own idempotency_key")
	}
	body, err := httpx.ReadBody(c, batchBodyLimit)
	if err != nil {
		return err
	}
	var req batchRequest
	if err := httpx.DecodeObject(body, &req, ""); err != nil {
		return err
	}
	if len(req.Jobs) == 0 || len(req.Jobs) > queue.MaxBatch {
		return httpx.BadRequest("jobs", "must hold 1 to %d jobs", queue.MaxBatch)
	}
	njs := make([]queue.NewJob, len(req.Jobs))
	for i, raw := range req.Jobs {
		if njs[i], err = decodeNewJob(raw, fmt.Sprintf("jobs[%d].", i)); err != nil {
			return err
		}
	}
	jobs, err := h.queue.InsertMany(c.Request().Context(), njs)
	if errors.Is(err, queue.ErrIdempotencyConflict) {
		// InsertMany says which job: "jobs[3]: idempotency key …".
		field := "idempotency_key"
		if at, _, ok := strings.Cut(err.Error(), ":"); ok && strings.HasPrefix(at, "jobs[") {
			field = at + ".idempotency_key"
		}
		return &httpx.Error{Status: http.StatusConflict, Message: err.Error(), Field: field}
	}
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, api.Jobs{Jobs: queue.JobsAPI(jobs)})
}
