package web

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"
)

// jobGet answers one job with its attempts, artifacts, events and effects.
func (s *server) jobGet(c echo.Context) error {
	id, err := jobID(c)
	if err != nil {
		return err
	}
	d, err := s.queue.Detail(c.Request().Context(), id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, d.API())
}

// jobID reads the :id path parameter: a positive 64-bit integer.
func jobID(c echo.Context) (int64, error) {
	id, err := strconv.ParseInt(c.Param("id"), 10, 64)
	if errors.Is(err, strconv.ErrRange) {
		return 0, badRequest("id", "is out of range")
	}
	if err != nil || id < 1 {
		return 0, badRequest("id", "must be a positive integer")
	}
	return id, nil
}
