package web

import "github.com/labstack/echo/v4"

// jobPages registers a job's page with its actions, and the submit form.
// /jobs/new is a static route, so echo matches it before /jobs/:id.
func (s *server) jobPages(g *echo.Group, mw ...echo.MiddlewareFunc) {
	g.GET("/jobs/new", s.newJobForm, mw...)
	g.POST("/jobs/new", s.newJobSubmit, mw...)
	g.GET("/jobs/:id", s.jobPage, mw...)
	g.POST("/jobs/:id/retry", s.jobPageRetry, mw...)
	g.POST("/jobs/:id/cancel", s.jobPageCancel, mw...)
}
