package adminapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/leasehold/leasehold/api"
	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/web/httpx"
)

// maxBulkIDs bounds the ids of a bulk retry or cancel.
const maxBulkIDs = 10_000

// jobAction does act (retry or cancel) to the job of the path and answers
// it; 409 with refusal when the job's state does not allow act.
func (h *Handler) jobAction(c echo.Context, act func(context.Context, int64, string) (queue.Job, error), refusal string) error {
	id, err := httpx.JobID(c)
	if err != nil {
		return err
	}
	job, err := act(c.Request().Context(), id, httpx.Actor(c))
	if errors.Is(err, queue.ErrWrongState) {
		return &httpx.Error{Status: http.StatusConflict, Message: fmt.Sprintf("job %d is %s; %s", id, job.State, refusal)}
	}
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, job.API())
}

// bulkAction does act (retry or cancel) to the jobs the body's selector
// picks and answers those it changed.
func (h *Handler) bulkAction(c echo.Context, act func(context.Context, queue.Selection, string) ([]queue.Job, error)) error {
	sel, err := decodeSelector(c)
	if err != nil {
		return err
	}
	jobs, err := act(c.Request().Context(), sel, httpx.Actor(c))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, newBulkBody(jobs))
}

// newBulkBody answers a bulk retry or cancel with the jobs it changed: a
// bulk action never answers 409.
func newBulkBody(jobs []queue.Job) api.BulkResult {
	b := api.BulkResult{Count: len(jobs), IDs: make([]int64, len(jobs))}
	for i, j := range jobs {
		b.IDs[i] = j.ID
	}
	if len(jobs) <= api.MaxBulkJobs {
		b.Jobs = queue.JobsAPI(jobs)
	}
	return b
}

// decodeSelector reads a bulk action's selector. An empty one is refused:
// acting on every job must be asked for by naming a state, kind or queue.
func decodeSelector(c echo.Context) (queue.Selection, error) {
	body, err := httpx.ReadBody(c, httpx.ActionBodyLimit)
	if err != nil {
		return queue.Selection{}, err
	}
	var sel api.Selector
	if err := httpx.DecodeObject(body, &sel, ""); err != nil {
		return queue.Selection{}, err
	}
	if sel.IDs != nil && len(sel.IDs) == 0 {
		return queue.Selection{}, httpx.BadRequest("ids", "must hold at least one id")
	}
	if len(sel.IDs) > maxBulkIDs {
		return queue.Selection{}, httpx.BadRequest("ids", "must hold at most %d ids", maxBulkIDs)
	}
	for i, id := range sel.IDs {
		if id < 1 {
			return queue.Selection{}, httpx.BadRequest(fmt.Sprintf("ids[%d]", i), "must be a positive integer")
		}
	}
	if sel.State != "" && !queue.State(sel.State).Valid() {
		return queue.Selection{}, httpx.BadRequest("state", "must be one of pending, running, succeeded, dead, cancelled")
	}
	if err := httpx.CheckText("kind", sel.Kind); err != nil {
		return queue.Selection{}, err
	}
	if err := httpx.CheckText("queue", sel.Queue); err != nil {
		return queue.Selection{}, err
	}
	if sel.FailureGroup < 0 {
		return queue.Selection{}, httpx.BadRequest("failure_group", "must be a failure group's id (a positive integer)")
	}
	if len(sel.IDs) == 0 && sel.State == "" && sel.Kind == "" && sel.Queue == "" && sel.FailureGroup == 0 {
		return queue.Selection{}, httpx.BadRequest("", `select jobs by "ids" or a filter of "state", "kind", "queue" and "failure_group"`)
	}
	choice := sel.Checkpoint
	if choice == "" {
		choice = c.QueryParam("checkpoint")
	}
	startOver, err := retryStartsOver(choice)
	if err != nil {
		return queue.Selection{}, err
	}
	return queue.Selection{IDs: sel.IDs, State: queue.State(sel.State), Kind: sel.Kind, Queue: sel.Queue,
		FailureGroup: sel.FailureGroup, StartOver: startOver}, nil
}
