package dashboard

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/leasehold/leasehold/live"
	"github.com/leasehold/leasehold/web/httpx"
)

// Timing of an event stream. A stream lives eventsMaxAge plus up to a
// half of it more (so that dashboards opened together do not all come
// back at once), then ends and the browser reconnects (with
// Last-Event-ID, so nothing is lost): its session is checked again, and
// no connection is held forever. A write that cannot finish within eventsWriteTimeout (a peer
// that stopped reading) ends the stream.
const (
	eventsKeepAlive    = 20 * time.Second
	eventsMaxAge       = 10 * time.Minute
	eventsWriteTimeout = 10 * time.Second
	// eventsRetryMs is the browser's reconnection delay.
	eventsRetryMs = 1000
	// maxEventIDLen bounds a Last-Event-ID worth reading; a longer one is
	// not ours, and gets a reset.
	maxEventIDLen = 64
)

// Events is GET /events: Server-Sent Events telling the dashboard's pages
// what changed, from the server's one LISTEN connection (live.Hub).
// ?job=ID makes it a job page's stream. Last-Event-ID (or
// ?last_event_id=, which a page passes on its first connection) replays
// what came after it.
//
// A session may have a few streams open (Config.MaxStreamsPerSession);
// more are answered 429, and their pages poll instead. A stream ends
// when its session signs out: at once on this server, and at the next
// keep-alive, which checks the session, on any other.
func (h *Handler) Events(c echo.Context) error {
	if h.live == nil {
		return &httpx.Error{Status: http.StatusServiceUnavailable, Message: "live updates are not enabled on this server"}
	}
	var job int64
	if v := c.QueryParam("job"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 {
			return httpx.BadRequest("job", "job must be a job id (a positive integer)")
		}
		job = n
	}
	lastID := c.Request().Header.Get("Last-Event-ID")
	if lastID == "" {
		lastID = c.QueryParam("last_event_id")
	}
	if len(lastID) > maxEventIDLen {
		lastID = "?" // unknown: a reset
	}
	cookie, err := c.Cookie(httpx.SessionCookie)
	if err != nil {
		return fmt.Errorf("event stream without a session cookie: %w", err) // RequireSession let it through
	}
	session, ok := h.streams.add(cookie.Value)
	if !ok {
		return httpx.TooMany(c, streamRetryAfter*time.Second,
			"this session already has %d event streams open: close a tab; this page polls instead", h.streams.max)
	}
	defer h.streams.remove(cookie.Value, session)
	stream, replay, err := h.live.Subscribe(lastID, job)
	if errors.Is(err, live.ErrTooMany) || errors.Is(err, live.ErrClosed) {
		c.Response().Header().Set("Retry-After", "5")
		return &httpx.Error{Status: http.StatusServiceUnavailable, Message: err.Error()}
	}
	if err != nil {
		return fmt.Errorf("subscribing to events: %w", err)
	}
	defer stream.Close()

	w := c.Response()
	rc := http.NewResponseController(w)
	// The server's deadlines would cut a stream that lives for minutes:
	// none for reading (the request has no body), one per write instead.
	_ = rc.SetReadDeadline(time.Time{})
	hdr := w.Header()
	hdr.Set(echo.HeaderContentType, "text/event-stream")
	hdr.Set("Cache-Control", "no-store")
	hdr.Set("X-Accel-Buffering", "no") // proxies that buffer answers must not buffer this one
	w.WriteHeader(http.StatusOK)
	send := func(format string, args ...any) bool {
		_ = rc.SetWriteDeadline(time.Now().Add(eventsWriteTimeout))
		if _, err := fmt.Fprintf(w, format, args...); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	if !send("retry: %d\n\n", eventsRetryMs) {
		return nil
	}
	for _, ev := range replay {
		if !send("id: %s\nevent: %s\ndata: %s\n\n", ev.ID, ev.Name, ev.Data) {
			return nil
		}
	}
	keepAlive := time.NewTicker(h.eventsKeepAlive)
	defer keepAlive.Stop()
	maxAge := time.NewTimer(eventsMaxAge + rand.N(eventsMaxAge/2))
	defer maxAge.Stop()
	ctx := c.Request().Context()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-stream.Done():
			return nil // fell behind, or the server is shutting down
		case <-maxAge.C:
			return nil
		case <-session.ended:
			return nil // signed out here
		case <-keepAlive.C:
			// Signed out on another server, or expired: it ends. A
			// database that does not answer ends nothing. One check of
			// every open session at most every half keep-alive serves
			// all the streams.
			if !h.streams.live(ctx, cookie.Value, h.eventsKeepAlive/2, h.auth.SessionsAlive) {
				return nil
			}
			if !send(": keep-alive\n\n") {
				return nil
			}
		case ev := <-stream.Events():
			if !send("id: %s\nevent: %s\ndata: %s\n\n", ev.ID, ev.Name, ev.Data) {
				return nil
			}
		}
	}
}

// liveURL is the address of a page's event stream (job > 0: a job
// page's), or "" without live updates.
func (h *Handler) liveURL(job int64) string {
	if h.live == nil {
		return ""
	}
	u := "/events?last_event_id=" + h.live.LastID()
	if job > 0 {
		u += "&job=" + strconv.FormatInt(job, 10)
	}
	return u
}
