package web

import "github.com/labstack/echo/v4"

// jobPages registers a job's page with its actions, and the submit form.
func (s *server) jobPages(g *echo.Group) {
}
