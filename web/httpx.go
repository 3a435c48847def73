package web

import "github.com/leasehold/leasehold/web/httpx"

// The names the admin and worker API handlers use from httpx, under the
// names they had when httpx was part of this package. They go once the
// handlers move to packages of their own and call httpx directly.

type apiError = httpx.Error

const tokenKey = httpx.TokenKey

var (
	badRequest   = httpx.BadRequest
	readBody     = httpx.ReadBody
	decodeObject = httpx.DecodeObject
	checkText    = httpx.CheckText
	actor        = httpx.Actor
)

// Request body limits. A single job may carry a payload of
// queue.MaxPayloadBytes; the rest leaves room for its other fields, so the
// payload check, not this one, answers a payload just over its limit.
const (
	jobBodyLimit    = 1<<20 + 64<<10
	batchBodyLimit  = 64 << 20
	actionBodyLimit = 1 << 20
)
