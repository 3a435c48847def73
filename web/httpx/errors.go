// Package httpx is what the dashboard and the APIs of package web share:
// the middleware that logs, recovers, bounds bodies and checks who asks,
// the error a handler returns and its mapping to a status code, and the
// reading and decoding of JSON bodies.
package httpx

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/leasehold/leasehold/api"
	"github.com/leasehold/leasehold/queue"
)

// Error is an error the client can act on: it becomes the response's
// status and JSON body.
type Error struct {
	Status  int
	Message string
	// Field names the request field at fault, when there is one.
	Field string
	// Code is the answer's api.Code; empty: the one of Status.
	Code api.Code
}

func (e *Error) Error() string {
	if e.Field != "" {
		return e.Field + ": " + e.Message
	}
	return e.Message
}

// ErrNoArtifactStorage answers the artifact routes of a server configured
// without storage.
var ErrNoArtifactStorage = &Error{Status: http.StatusServiceUnavailable, Message: "artifact storage is not configured"}

// BadRequest is a 400 about field ("" for the request as a whole).
func BadRequest(field, format string, args ...any) *Error {
	return &Error{Status: http.StatusBadRequest, Field: field, Message: fmt.Sprintf(format, args...)}
}

// TooMany is the 429 (code rate_limited) of a caller that already holds
// as many requests of a kind as it may at once; it sets Retry-After.
func TooMany(c echo.Context, retryAfter time.Duration, format string, args ...any) *Error {
	c.Response().Header().Set("Retry-After", strconv.Itoa(max(1, int(retryAfter/time.Second))))
	return &Error{Status: http.StatusTooManyRequests, Code: api.CodeRateLimited, Message: fmt.Sprintf(format, args...)}
}

// errPanicked reaches the error handler from RecoverPanics, which has already
// logged the panic and its stack.
var errPanicked = errors.New("handler panicked")

// ErrorHandler is the server's echo.HTTPErrorHandler: it turns every
// error a handler or echo returns into a JSON response. It is the only
// place that answers 500: bad input always maps to a 4xx above it.
func ErrorHandler(logger *slog.Logger) echo.HTTPErrorHandler {
	return func(err error, c echo.Context) { handleError(logger, err, c) }
}

func handleError(logger *slog.Logger, err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	status, body := describe(logger, err, c)
	if body.Code == "" {
		body.Code = codeOf(status)
	}
	if status == http.StatusUnauthorized {
		c.Response().Header().Set(echo.HeaderWWWAuthenticate, "Bearer")
	}
	// The database being away (not a handler's own 503, which says
	// itself when to come back) is told to pages with a page.
	databaseAway := status == http.StatusServiceUnavailable && !errors.As(err, new(*Error)) && Unavailable(err)
	if databaseAway && c.Response().Header().Get("Retry-After") == "" {
		c.Response().Header().Set("Retry-After", retryAfter)
	}
	switch {
	case c.Request().Method == http.MethodHead:
		err = c.NoContent(status)
	case databaseAway && isPage(c):
		err = c.HTML(status, unavailablePage(c.Request().Method == http.MethodGet))
	default:
		err = c.JSON(status, body)
	}
	if err != nil {
		logger.Warn("writing error response", "err", err)
	}
}

// codeOf is the api.Code of an error answer with status.
func codeOf(status int) api.Code {
	switch status {
	case http.StatusBadRequest:
		return api.CodeInvalid
	case http.StatusUnauthorized:
		return api.CodeUnauthorized
	case http.StatusForbidden:
		return api.CodeForbidden
	case http.StatusNotFound:
		return api.CodeNotFound
	case http.StatusMethodNotAllowed:
		return api.CodeMethodNotAllowed
	case http.StatusRequestTimeout:
		return api.CodeTimeout
	case http.StatusConflict:
		return api.CodeConflict
	case http.StatusRequestEntityTooLarge:
		return api.CodeTooLarge
	case http.StatusUnsupportedMediaType:
		return api.CodeUnsupportedMediaType
	case http.StatusTooManyRequests:
		return api.CodeRateLimited
	case http.StatusServiceUnavailable:
		return api.CodeUnavailable
	case statusClientClosed:
		return api.CodeClientClosed
	}
	if status >= 500 {
		return api.CodeInternal
	}
	return api.CodeInvalid
}

// retryAfter is the Retry-After (seconds) of an answer that heals: a
// failover or restart of the database takes a few seconds.
const retryAfter = "1"

// Unavailable reports whether a handler's err heals by itself (see
// queue.Unavailable): the database is away or read-only for now, or the
// request's deadline (RequestDeadline) ran out.
func Unavailable(err error) bool { return queue.Unavailable(err) }

// unavailablePage is a page's answer while the database is unavailable:
// plain, since the page's own data could not be read. A page that was
// asked for (GET) reloads itself; a form sent is not sent again unasked.
func unavailablePage(reload bool) string {
	refresh, again := "", "Go back and send it again in a few seconds."
	if reload {
		refresh, again = `<meta http-equiv="refresh" content="2">`, "This page tries again in a few seconds."
	}
	return `<!doctype html>
<html lang="en"><head><meta charset="utf-8">` + refresh + `
<title>Unavailable for a moment · Leasehold</title></head>
<body><h1>Unavailable for a moment</h1>
<p>The database is not answering or not taking writes (a restart or a failover). ` + again + `</p>
</body></html>
`
}

// statusClientClosed answers a request whose client went away (nginx's 499).
const statusClientClosed = 499

func describe(logger *slog.Logger, err error, c echo.Context) (int, api.Error) {
	var (
		ae       *Error
		ve       *queue.ValidationError
		he       *echo.HTTPError
		tooLarge *http.MaxBytesError
	)
	switch {
	case errors.As(err, &ae):
		return ae.Status, api.Error{Error: ae.Message, Field: ae.Field, Code: ae.Code}
	case errors.As(err, &ve) && errors.Is(err, queue.ErrTooLarge):
		return http.StatusRequestEntityTooLarge, api.Error{Error: ve.Message, Field: ve.Field}
	case errors.As(err, &ve):
		return http.StatusBadRequest, api.Error{Error: ve.Message, Field: ve.Field}
	case errors.Is(err, queue.ErrNotFound):
		return http.StatusNotFound, api.Error{Error: "job not found"}
	case errors.Is(err, queue.ErrBudgetSpent):
		// Recorded, and the attempt is over: the worker must stop the job.
		return http.StatusConflict, api.Error{Error: queue.BudgetSpent, Code: api.CodeBudgetSpent}
	case errors.Is(err, queue.ErrLeaseLost):
		// The worker's lease is not current: it must stop the job.
		return http.StatusConflict, api.Error{Error: api.LeaseLost, Code: api.CodeLeaseLost}
	case errors.Is(err, queue.ErrTokenRevoked):
		// Revoked while the request ran (a long poll): as if at its start.
		return http.StatusUnauthorized, api.Error{Error: "invalid or revoked token"}
	case errors.Is(err, queue.ErrResultConflict):
		return http.StatusConflict, api.Error{Error: err.Error(), Field: "result"}
	case errors.Is(err, queue.ErrIdempotencyConflict):
		return http.StatusConflict, api.Error{Error: err.Error(), Field: "idempotency_key"}
	case errors.As(err, &tooLarge):
		return http.StatusRequestEntityTooLarge, api.Error{Error: fmt.Sprintf("request body is larger than %d bytes", tooLarge.Limit)}
	case errors.As(err, &he):
		msg := fmt.Sprint(he.Message)
		if msg == http.StatusText(he.Code) {
			msg = strings.ToLower(msg)
		}
		return he.Code, api.Error{Error: msg}
	case errors.Is(err, context.Canceled) && c.Request().Context().Err() != nil:
		// The client went away; nobody reads this answer.
		return statusClientClosed, api.Error{Error: "client closed request"}
	case Unavailable(err):
		// It heals: the client retries, with an idempotency key if it
		// submits.
		logger.Warn("database unavailable", "method", c.Request().Method, "path", c.Request().URL.Path, "err", err)
		return http.StatusServiceUnavailable, api.Error{Error: "the database is unavailable for now: retry in a second", Code: api.CodeUnavailable}
	case errors.Is(err, errPanicked):
		return http.StatusInternalServerError, api.Error{Error: "internal error", Code: api.CodeInternal}
	default:
		logger.Error("serving request", "method", c.Request().Method, "path", c.Request().URL.Path, "err", err)
		return http.StatusInternalServerError, api.Error{Error: "internal error", Code: api.CodeInternal}
	}
}
