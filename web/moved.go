package web

import (
	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/web/httpx"
)

// The names the admin and worker API handlers use from code that moved
// out of this package (to httpx, the dashboard, queue), under the names
// they had here. They go once the handlers move to packages of their own
// and call httpx directly.

type apiError = httpx.Error

const tokenKey = httpx.TokenKey

var (
	badRequest   = httpx.BadRequest
	readBody     = httpx.ReadBody
	decodeObject = httpx.DecodeObject
	checkText    = httpx.CheckText
	actor        = httpx.Actor
	replaySteps  = queue.ReplaySteps
)

// listDeref is *p, or "" for nil.
func listDeref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// Request body limits. A single job may carry a payload of
// queue.MaxPayloadBytes; the rest leaves room for its other fields, so the
// payload check, not this one, answers a payload just over its limit.
const (
	jobBodyLimit    = 1<<20 + 64<<10
	batchBodyLimit  = 64 << 20
	actionBodyLimit = 1 << 20
)
