package httpx

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/replica"
)

// PrimaryCookie pins a browser that just changed something to the
// primary: until the time it holds (Unix milliseconds) its pages read
// their own writes there, whatever the replica has replayed. A cookie,
// not the server's memory, so that it holds whichever server behind a
// load balancer answers next.
const PrimaryCookie = "lh_primary"

const readerKey = "leasehold.reader"

// Reader is the client a handler reads with: the replica's when
// ReadReplica chose it for this request, else primary.
func Reader(c echo.Context, primary *queue.Client) *queue.Client {
	if q, _ := c.Get(readerKey).(*queue.Client); q != nil {
		return q
	}
	return primary
}

// FromReplica says whether Reader reads the replica for c.
func FromReplica(c echo.Context) bool {
	q, _ := c.Get(readerKey).(*queue.Client)
	return q != nil
}

// ReadReplica lets the handlers of read-only routes read from reads'
// replica (see Reader), while it keeps up and the request's browser has
// not just written (PinPrimary). A handler that fails on the replica
// with the database away (queue.Unavailable) runs once more on the
// primary, as long as it wrote nothing of its answer, and sends later
// reads there until the replica's next good check: a replica that dies
// costs a page a retry, never an error.
func ReadReplica(reads *replica.Reads) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if reads == nil || pinned(c) {
				return next(c)
			}
			q, ok := reads.Client()
			if !ok {
				return next(c)
			}
			c.Set(readerKey, q)
			err := next(c)
			if err == nil || c.Response().Committed || c.Request().Context().Err() != nil || !queue.Unavailable(err) {
				return err
			}
			reads.Failed(err)
			c.Set(readerKey, (*queue.Client)(nil))
			return next(c)
		}
	}
}

// PinPrimary makes the browser of every state-changing request read from
// the primary for reads.PinFor (PrimaryCookie): the page it is sent to
// next (after a retry, a cancel, a submit) shows what it just did.
func PinPrimary(reads *replica.Reads) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if reads != nil && reads.Status().Configured && !safeMethod(c.Request().Method) {
				pin := reads.PinFor()
				c.SetCookie(&http.Cookie{
					Name: PrimaryCookie, Value: strconv.FormatInt(time.Now().Add(pin).UnixMilli(), 10),
					Path: "/", MaxAge: int((pin + time.Second - 1) / time.Second),
					HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: c.IsTLS(),
				})
			}
			return next(c)
		}
	}
}

// pinned says the request's browser changed something within its pin.
func pinned(c echo.Context) bool {
	ck, err := c.Cookie(PrimaryCookie)
	if errors.Is(err, http.ErrNoCookie) || err != nil {
		return false
	}
	until, err := strconv.ParseInt(ck.Value, 10, 64)
	return err == nil && time.Now().UnixMilli() < until
}
