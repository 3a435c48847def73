package adminapi

import (
	"fmt"

	"github.com/labstack/echo/v4"

	"github.com/leasehold/leasehold/api"
	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/web/httpx"
)

// maxBulkIDs bounds the ids of a bulk retry or cancel.
const maxBulkIDs = 10_000

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
	if len(sel.IDs) == 0 && sel.State == "" && sel.Kind == "" && sel.Queue == "" {
		return queue.Selection{}, httpx.BadRequest("", `select jobs by "ids" or a filter of "state", "kind" and "queue"`)
	}
	return queue.Selection{IDs: sel.IDs, State: queue.State(sel.State), Kind: sel.Kind, Queue: sel.Queue}, nil
}
