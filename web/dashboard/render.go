package dashboard

import (
	"time"

	"github.com/a-h/templ"
	"github.com/labstack/echo/v4"

	"github.com/leasehold/leasehold/static"
	"github.com/leasehold/leasehold/templates"
	"github.com/leasehold/leasehold/web/httpx"
)

// render writes a templ component as the HTML response.
func render(c echo.Context, status int, comp templ.Component) error {
	c.Response().Header().Set(echo.HeaderContentType, echo.MIMETextHTMLCharsetUTF8)
	c.Response().WriteHeader(status)
	return comp.Render(c.Request().Context(), c.Response())
}

// page is the layout's view model for the signed-in user of c.
func (h *Handler) page(c echo.Context, title, nav string) templates.Page {
	sess := httpx.CurrentSession(c)
	return templates.Page{
		Title: title, Nav: nav, User: sess.Username, CSRF: sess.CSRFToken,
		CSS: static.URL("app.css"), JS: static.URL("app.js"), HTMX: static.URL("htmx.min.js"),
		SSE: static.URL("htmx-ext-sse.min.js"),
		Now: time.Now(),
	}
}
