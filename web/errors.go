package web

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/leasehold/leasehold/queue"
)

// apiError is an error the client can act on: it becomes the response's
// status and JSON body.
type apiError struct {
	Status  int
	Message string
	// Field names the request field at fault, when there is one.
	Field string
}

func (e *apiError) Error() string {
	if e.Field != "" {
		return e.Field + ": " + e.Message
	}
	return e.Message
}

// errorBody is the JSON of every error response.
type errorBody struct {
	Error string `json:"error"`
	Field string `json:"field,omitempty"`
}

func badRequest(field, format string, args ...any) *apiError {
	return &apiError{Status: http.StatusBadRequest, Field: field, Message: fmt.Sprintf(format, args...)}
}

// errPanicked reaches handleError from recoverPanics, which has already
// logged the panic and its stack.
var errPanicked = errors.New("handler panicked")

// handleError turns every error a handler or echo returns into a JSON
// response. It is the only place that answers 500: bad input always maps
// to a 4xx above it.
func (s *server) handleError(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	status, body := s.describe(err, c)
	if status == http.StatusUnauthorized {
		c.Response().Header().Set(echo.HeaderWWWAuthenticate, "Bearer")
	}
	if c.Request().Method == http.MethodHead {
		err = c.NoContent(status)
	} else {
		err = c.JSON(status, body)
	}
	if err != nil {
		s.logger.Warn("writing error response", "err", err)
	}
}

func (s *server) describe(err error, c echo.Context) (int, errorBody) {
	var (
		ae       *apiError
		ve       *queue.ValidationError
		he       *echo.HTTPError
		tooLarge *http.MaxBytesError
	)
	switch {
	case errors.As(err, &ae):
		return ae.Status, errorBody{Error: ae.Message, Field: ae.Field}
	case errors.As(err, &ve) && errors.Is(err, queue.ErrTooLarge):
		return http.StatusRequestEntityTooLarge, errorBody{Error: ve.Message, Field: ve.Field}
	case errors.As(err, &ve):
		return http.StatusBadRequest, errorBody{Error: ve.Message, Field: ve.Field}
	case errors.Is(err, queue.ErrNotFound):
		return http.StatusNotFound, errorBody{Error: "job not found"}
	case errors.Is(err, queue.ErrLeaseLost):
		// The worker's lease is not current: it must stop the job.
		return http.StatusConflict, errorBody{Error: "lease lost"}
	case errors.Is(err, queue.ErrResultConflict):
		return http.StatusConflict, errorBody{Error: err.Error(), Field: "result"}
	case errors.Is(err, queue.ErrIdempotencyConflict):
		return http.StatusConflict, errorBody{Error: err.Error(), Field: "idempotency_key"}
	case errors.As(err, &tooLarge):
		return http.StatusRequestEntityTooLarge, errorBody{Error: fmt.Sprintf("request body is larger than %d bytes", tooLarge.Limit)}
	case errors.As(err, &he):
		msg := fmt.Sprint(he.Message)
		if msg == http.StatusText(he.Code) {
			msg = strings.ToLower(msg)
		}
		return he.Code, errorBody{Error: msg}
	case errors.Is(err, context.Canceled) && c.Request().Context().Err() != nil:
		// The client went away; nobody reads this answer.
		return 499, errorBody{Error: "client closed request"}
	case errors.Is(err, errPanicked):
		return http.StatusInternalServerError, errorBody{Error: "internal error"}
	default:
		s.logger.Error("serving request", "method", c.Request().Method, "path", c.Request().URL.Path, "err", err)
		return http.StatusInternalServerError, errorBody{Error: "internal error"}
	}
}
