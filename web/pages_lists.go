package web

import "github.com/labstack/echo/v4"

// listPages registers the overview, the jobs list, the dead-letter queue
// and the workers page.
func (s *server) listPages(g *echo.Group) {
}
