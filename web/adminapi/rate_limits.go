package adminapi

import (
	"net/http"
	"net/url"

	"github.com/labstack/echo/v4"

	"github.com/leasehold/leasehold/api"
	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/web/httpx"
)

// rateLimitBodyLimit bounds a PUT of a key's budgets: at most four short
// texts.
const rateLimitBodyLimit = 4 << 10

// ListRateLimits is GET /api/v1/rate-limits: every key that has budgets.
func (h *Handler) ListRateLimits(c echo.Context) error {
	all, err := h.queue.RateLimits(c.Request().Context())
	if err != nil {
		return err
	}
	body := api.RateLimits{RateLimits: make([]api.RateLimit, len(all))}
	for i, rl := range all {
		body.RateLimits[i] = rl.API()
	}
	return c.JSON(http.StatusOK, body)
}

// PutRateLimit is PUT /api/v1/rate-limits/{key}: replaces the key's
// budgets (an empty list removes them).
func (h *Handler) PutRateLimit(c echo.Context) error {
	key, err := rateLimitKey(c)
	if err != nil {
		return err
	}
	body, err := httpx.ReadBody(c, rateLimitBodyLimit)
	if err != nil {
		return err
	}
	var req api.RateLimitPut
	if err := httpx.DecodeObject(body, &req, ""); err != nil {
		return err
	}
	if req.Budgets == nil {
		return httpx.BadRequest("budgets", "is required: a list such as [\"60/min\", \"10000/day\"]")
	}
	rl, err := h.queue.SetRateLimit(c.Request().Context(), key, req.Budgets, httpx.Actor(c))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, rl.API())
}

// DeleteRateLimit is DELETE /api/v1/rate-limits/{key}: the key's jobs are
// no longer limited.
func (h *Handler) DeleteRateLimit(c echo.Context) error {
	key, err := rateLimitKey(c)
	if err != nil {
		return err
	}
	if err := h.queue.DeleteRateLimit(c.Request().Context(), key); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// rateLimitKey is the {key} of the path, unescaped ("llm%3Aopenai" and
// "llm:openai" alike), checked as a job's key is.
func rateLimitKey(c echo.Context) (string, error) {
	key, err := url.PathUnescape(c.Param("key"))
	if err != nil {
		return "", httpx.BadRequest("key", "must be a valid path segment")
	}
	if err := queue.CheckRateLimitKey("key", key); err != nil {
		return "", err
	}
	return key, nil
}
