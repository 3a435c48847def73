package web

import (
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/leasehold/leasehold/apitoken"
	"github.com/leasehold/leasehold/auth"
)

const (
	sessionCookie = "lh_session"
	sessionKey    = "leasehold.session"
	// pageBodyLimit bounds a dashboard form.
	pageBodyLimit = 256 << 10
)

// pageCSP allows nothing inline: scripts and styles come from /static
// only, and htmx is configured to need neither eval nor inline styles.
const pageCSP = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'; object-src 'none'"

// currentSession is the signed-in user's session (zero outside pages).
func currentSession(c echo.Context) auth.Session {
	sess, _ := c.Get(sessionKey).(auth.Session)
	return sess
}

// pageHeaders sets the security headers of every HTML page.
func (s *server) pageHeaders(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		h := c.Response().Header()
		h.Set("Content-Security-Policy", pageCSP)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "same-origin")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Cache-Control", "no-store")
		return next(c)
	}
}

// requireSession lets only signed-in users through; others are sent to
// sign in. A state-changing request must also come from this site: its
// Sec-Fetch-Site/Origin must say so (http.CrossOriginProtection) and it
// must carry the session's CSRF token (form field _csrf, or the
// X-CSRF-Token header htmx sends).
func (s *server) requireSession(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		sess, err := s.sessionOf(c)
		if errors.Is(err, auth.ErrNoSession) {
			return toSignIn(c)
		}
		if err != nil {
			return err
		}
		c.Set(sessionKey, sess)
		if !safeMethod(c.Request().Method) {
			if err := checkForgery(c, sess); err != nil {
				return err
			}
		}
		return next(c)
	}
}

// requireSessionOrToken accepts a signed-in user or a bearer token of
// role (for scripts fetching artifacts).
func (s *server) requireSessionOrToken(role apitoken.Role) echo.MiddlewareFunc {
	byToken := s.requireToken(role)
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		viaToken := byToken(next)
		return func(c echo.Context) error {
			if c.Request().Header.Get(echo.HeaderAuthorization) != "" {
				return viaToken(c)
			}
			sess, err := s.sessionOf(c)
			if errors.Is(err, auth.ErrNoSession) {
				return &apiError{Status: http.StatusUnauthorized, Message: "missing bearer token or session: sign in, or send Authorization: Bearer TOKEN"}
			}
			if err != nil {
				return err
			}
			c.Set(sessionKey, sess)
			return next(c)
		}
	}
}

func (s *server) sessionOf(c echo.Context) (auth.Session, error) {
	cookie, err := c.Cookie(sessionCookie)
	if err != nil {
		return auth.Session{}, auth.ErrNoSession
	}
	return s.auth.Session(c.Request().Context(), cookie.Value)
}

var crossOrigin = http.NewCrossOriginProtection()

// checkForgery refuses a state-changing request that another site could
// have made the browser send.
func checkForgery(c echo.Context, sess auth.Session) error {
	if err := crossOrigin.Check(c.Request()); err != nil {
		return &apiError{Status: http.StatusForbidden, Message: "cross-site request refused"}
	}
	req := c.Request()
	req.Body = http.MaxBytesReader(c.Response(), req.Body, pageBodyLimit)
	// Parsed here, so that a form over the limit is a 413 rather than a
	// form without a token.
	if err := req.ParseForm(); err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return &apiError{Status: http.StatusRequestEntityTooLarge,
				Message: fmt.Sprintf("the form is larger than %d KiB: send less text", pageBodyLimit>>10)}
		}
		return badRequest("", "malformed form: %v", err)
	}
	// Only the header or the form body: a token in the URL would leak
	// into logs, history and Referer headers.
	token := req.Header.Get("X-CSRF-Token")
	if token == "" {
		token = req.PostForm.Get("_csrf")
	}
	if token == "" || subtle.ConstantTimeCompare([]byte(token), []byte(sess.CSRFToken)) != 1 {
		return &apiError{Status: http.StatusForbidden, Message: "missing or stale form token: reload the page and try again"}
	}
	return nil
}

func safeMethod(m string) bool {
	return m == http.MethodGet || m == http.MethodHead || m == http.MethodOptions
}

// toSignIn sends a visitor without a session to the sign-in page, back
// to where they were going afterwards.
func toSignIn(c echo.Context) error {
	target := "/login"
	if c.Request().Method == http.MethodGet && c.Request().URL.RequestURI() != "/" {
		target += "?next=" + url.QueryEscape(c.Request().URL.RequestURI())
	}
	if isHTMX(c) {
		c.Response().Header().Set("HX-Redirect", target)
		return c.NoContent(http.StatusUnauthorized)
	}
	return c.Redirect(http.StatusSeeOther, target)
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
		Name: sessionCookie, Value: token, Path: "/", HttpOnly: true, SameSite: http.SameSiteLaxMode,
		Secure: r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https"),
		MaxAge: maxAge,
	})
}
