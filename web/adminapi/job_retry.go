package adminapi

import (
	"github.com/labstack/echo/v4"

	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/web/httpx"
)

// RetryJob moves one dead or cancelled job back to pending with a fresh
// budget of attempts; 409 in other states. ?checkpoint=resume (the
// default) keeps the job's checkpoint for its next attempt to resume
// from, start_over clears it.
func (h *Handler) RetryJob(c echo.Context) error {
	startOver, err := retryStartsOver(c.QueryParam("checkpoint"))
	if err != nil {
		return err
	}
	retry := h.queue.RetryOne
	if startOver {
		retry = h.queue.RetryOneStartOver
	}
	return h.jobAction(c, retry, queue.RetryRefusal)
}

// retryStartsOver reads a retry's checkpoint choice: "resume" or ""
// (resume), "start_over"; anything else is refused.
func retryStartsOver(choice string) (bool, error) {
	switch choice {
	case "", "resume":
		return false, nil
	case "start_over":
		return true, nil
	}
	return false, httpx.BadRequest("checkpoint", `must be "resume" or "start_over"`)
}

// RetryJobs retries the dead or cancelled jobs a selector picks; the
// others are left alone and not counted. The selector's "checkpoint"
// (or ?checkpoint=) chooses resume (the default) or start_over.
func (h *Handler) RetryJobs(c echo.Context) error {
	return h.bulkAction(c, h.queue.Retry)
}
