package dashboard

import (
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/leasehold/leasehold/auth"
	"github.com/leasehold/leasehold/static"
	"github.com/leasehold/leasehold/templates"
	"github.com/leasehold/leasehold/web/httpx"
)

// LoginPage shows the sign-in form; a signed-in user goes on at once.
func (h *Handler) LoginPage(c echo.Context) error {
	next := localPath(c.QueryParam("next"))
	if _, err := httpx.SessionOf(c, h.auth); err == nil {
		return c.Redirect(http.StatusSeeOther, next)
	}
	return render(c, http.StatusOK, templates.Login(templates.LoginView{CSS: static.URL("app.css"), Next: next}))
}

// Login signs in. The new session replaces any the browser had (the
// session is rotated), and a sign-in form posted from another site is
// refused, so nobody can be signed in to someone else's account.
func (h *Handler) Login(c echo.Context) error {
	if err := httpx.CheckCrossOrigin(c); err != nil {
		return err
	}
	c.Request().Body = http.MaxBytesReader(c.Response(), c.Request().Body, httpx.FormBodyLimit)
	// A form that did not arrive whole (too large, or stalled past the
	// read deadline) is answered before any password is hashed.
	if err := c.Request().ParseForm(); err != nil {
		var tooLarge *http.MaxBytesError
		switch {
		case errors.As(err, &tooLarge):
			return &httpx.Error{Status: http.StatusRequestEntityTooLarge, Message: "the sign-in form is too large"}
		case errors.Is(err, os.ErrDeadlineExceeded):
			return &httpx.Error{Status: http.StatusRequestTimeout, Message: "the sign-in form did not arrive in time"}
		default:
			return httpx.BadRequest("", "reading the sign-in form: %v", err)
		}
	}
	username, password := c.FormValue("username"), c.FormValue("password")
	next := localPath(c.FormValue("next"))
	view := templates.LoginView{CSS: static.URL("app.css"), Next: next, Username: username}
	token, _, err := h.auth.SignIn(c.Request().Context(), clientAddr(c), username, password)
	var throttled *auth.ThrottledError
	switch {
	case errors.As(err, &throttled):
		// The same words for a name that is an account and one that is
		// not, and whether the name or the address is locked.
		secs := int(throttled.RetryAfter / time.Second)
		c.Response().Header().Set("Retry-After", strconv.Itoa(secs))
		view.Error = fmt.Sprintf("Too many failed sign-ins. Try again in %s.", throttled.RetryAfter)
		return render(c, http.StatusTooManyRequests, templates.Login(view))
	case errors.Is(err, auth.ErrBusy):
		c.Response().Header().Set("Retry-After", "1")
		view.Error = "The server is busy signing others in. Try again in a second."
		return render(c, http.StatusServiceUnavailable, templates.Login(view))
	case errors.Is(err, auth.ErrBadCredentials):
		view.Error, view.Invalid = "Wrong username or password.", true
		return render(c, http.StatusUnauthorized, templates.Login(view))
	case err != nil:
		return err
	}
	if old, err := c.Cookie(httpx.SessionCookie); err == nil {
		_ = h.auth.SignOut(c.Request().Context(), old.Value)
	}
	setSessionCookie(c, token, 0)
	return c.Redirect(http.StatusSeeOther, next)
}

// Logout ends the session.
func (h *Handler) Logout(c echo.Context) error {
	if cookie, err := c.Cookie(httpx.SessionCookie); err == nil {
		if err := h.auth.SignOut(c.Request().Context(), cookie.Value); err != nil {
			return err
		}
		// Its open pages stop receiving at once; on another server they
		// stop at their next keep-alive (Events).
		h.streams.end(cookie.Value)
	}
	setSessionCookie(c, "", -1)
	return c.Redirect(http.StatusSeeOther, "/login")
}

// clientAddr is the address sign-ins are throttled by; the zero Addr
// when the request's cannot be read.
func clientAddr(c echo.Context) netip.Addr {
	a, _ := netip.ParseAddr(httpx.ClientAddr(c))
	return a
}

// localPath returns next when it is a path on this site, else "/": a
// sign-in link must not send anyone elsewhere.
func localPath(next string) string {
	if !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || strings.ContainsAny(next, "\\\r\n") {
		return "/"
	}
	if u, err := url.Parse(next); err != nil || u.Host != "" || u.Scheme != "" {
		return "/"
	}
	return next
}

// setSessionCookie sets the session cookie: HttpOnly, SameSite=Lax, and
// Secure when served over TLS (directly or behind a TLS proxy).
func setSessionCookie(c echo.Context, token string, maxAge int) {
	r := c.Request()
	c.SetCookie(&http.Cookie{
		Name: httpx.SessionCookie, Value: token, Path: "/", HttpOnly: true, SameSite: http.SameSiteLaxMode,
		Secure: r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https"),
		MaxAge: maxAge,
	})
}
