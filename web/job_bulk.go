package web

import (
	"fmt"

	"github.com/labstack/echo/v4"

	"github.com/leasehold/leasehold/queue"
)

// Bounds of bulk retry and cancel.
const (
	maxBulkIDs = 10_000
	// maxBulkJobs is the most changed jobs a bulk answer spells out: a
	// filter can select millions, whose full JSON would be gigabytes.
	maxBulkJobs = 1000
)

// selector is the body of a bulk retry or cancel: ids, a filter, or both
// (then a job must match all of them).
type selector struct {
	IDs   []int64 `json:"ids"`
	State string  `json:"state"`
	Kind  string  `json:"kind"`
	Queue string  `json:"queue"`
}

// bulkBody answers a bulk retry or cancel with the jobs it changed: count
// and ids always, and the jobs themselves when there are at most
// maxBulkJobs of them (otherwise "jobs" is left out; GET each or list
// them). Selected jobs in a state the action does not apply to are
// skipped, not an error: a bulk action never answers 409.
type bulkBody struct {
	Count int       `json:"count"`
	IDs   []int64   `json:"ids"`
	Jobs  []jobView `json:"jobs,omitzero"`
}

func newBulkBody(jobs []queue.Job) bulkBody {
	b := bulkBody{Count: len(jobs), IDs: make([]int64, len(jobs))}
	for i, j := range jobs {
		b.IDs[i] = j.ID
	}
	if len(jobs) <= maxBulkJobs {
		b.Jobs = newJobViews(jobs)
	}
	return b
}

// decodeSelector reads a bulk action's selector. An empty one is refused:
// acting on every job must be asked for by naming a state, kind or queue.
func decodeSelector(c echo.Context) (queue.Selection, error) {
	body, err := readBody(c, actionBodyLimit)
	if err != nil {
		return queue.Selection{}, err
	}
	var sel selector
	if err := decodeObject(body, &sel, ""); err != nil {
		return queue.Selection{}, err
	}
	if sel.IDs != nil && len(sel.IDs) == 0 {
		return queue.Selection{}, badRequest("ids", "must hold at least one id")
	}
	if len(sel.IDs) > maxBulkIDs {
		return queue.Selection{}, badRequest("ids", "must hold at most %d ids", maxBulkIDs)
	}
	for i, id := range sel.IDs {
		if id < 1 {
			return queue.Selection{}, badRequest(fmt.Sprintf("ids[%d]", i), "must be a positive integer")
		}
	}
	if sel.State != "" && !queue.State(sel.State).Valid() {
		return queue.Selection{}, badRequest("state", "must be one of pending, running, succeeded, dead, cancelled")
	}
	if err := checkText("kind", sel.Kind); err != nil {
		return queue.Selection{}, err
	}
	if err := checkText("queue", sel.Queue); err != nil {
		return queue.Selection{}, err
	}
	if len(sel.IDs) == 0 && sel.State == "" && sel.Kind == "" && sel.Queue == "" {
		return queue.Selection{}, badRequest("", `select jobs by "ids" or a filter of "state", "kind" and "queue"`)
	}
	return queue.Selection{IDs: sel.IDs, State: queue.State(sel.State), Kind: sel.Kind, Queue: sel.Queue}, nil
}
