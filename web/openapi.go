package web

import (
	_ "embed"
	"net/http"

	"github.com/labstack/echo/v4"
)

// openapiJSON is the OpenAPI 3.1 document of every route under /api/v1 plus
// /health/*, /metrics and /artifacts/{id}. It is written by hand and kept
// true by tests: every registered route is documented and the other way
// round, and the responses the API tests receive match its schemas.
//
//go:embed openapi.json
var openapiJSON []byte

// openapiGet serves the document, open like the health probes: a client
// generator needs it before it has a token.
func (s *server) openapiGet(c echo.Context) error {
	c.Response().Header().Set("Cache-Control", "no-cache")
	return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, openapiJSON)
}
