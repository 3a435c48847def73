package httpx

import (
	"crypto/subtle"
	"errors"
	"fmt"
	"html"
	"net/http"
	"net/url"

	"github.com/labstack/echo/v4"

	"github.com/leasehold/leasehold/apitoken"
	"github.com/leasehold/leasehold/auth"
	"github.com/leasehold/leasehold/role"
)

const (
	// SessionCookie holds a signed-in user's session token.
	SessionCookie = "lh_session"
	sessionKey    = "leasehold.session"
	// FormBodyLimit bounds a dashboard form.
	FormBodyLimit = 256 << 10
)

// pageCSP allows nothing inline: scripts and styles come from /static
// only, and htmx is configured to need neither eval nor inline styles.
const pageCSP = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'; object-src 'none'"

// CurrentSession is the signed-in user's session (zero outside pages).
func CurrentSession(c echo.Context) auth.Session {
	sess, _ := c.Get(sessionKey).(auth.Session)
	return sess
}

// pageKey marks a request for an HTML page (PageHeaders): its errors that
// heal answer a page, not JSON.
const pageKey = "leasehold.page"

func isPage(c echo.Context) bool { ok, _ := c.Get(pageKey).(bool); return ok }

// PageHeaders sets the security headers of every HTML page.
func PageHeaders(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		c.Set(pageKey, true)
		h := c.Response().Header()
		h.Set("Content-Security-Policy", pageCSP)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "same-origin")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Cache-Control", "no-store")
		return next(c)
	}
}

// RequireSession lets only signed-in users through; others are sent to
// sign in. A state-changing request must also come from this site: its
// Sec-Fetch-Site/Origin must say so (http.CrossOriginProtection) and it
// must carry the session's CSRF token (form field _csrf, or the
// X-CSRF-Token header htmx sends).
func RequireSession(a *auth.Service) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			sess, err := SessionOf(c, a)
			if errors.Is(err, auth.ErrNoSession) {
				return toSignIn(c)
			}
			if err != nil {
				return err
			}
			c.Set(sessionKey, sess)
			c.SetRequest(c.Request().WithContext(role.NewContext(c.Request().Context(), sess.Role)))
			setAuditActor(c, "user:"+sess.Username, sess.Role)
			if !safeMethod(c.Request().Method) {
				if err := checkForgery(c, sess); err != nil {
					return err
				}
			}
			return next(c)
		}
	}
}

// RequireRole lets a signed-in user through (RequireSession comes
// first) only when the session's role allows need: 403 otherwise, as a
// page that says why to a browser that asked for one (a bookmark, a
// link from before the role changed).
func RequireRole(need role.Role) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			sess, _ := c.Get(sessionKey).(auth.Session)
			if !sess.Role.Allows(need) {
				refusal := forbidden("user", sess.Role, need)
				if IsHTMX(c) {
					return refusal
				}
				return c.HTML(refusal.Status, forbiddenPage(refusal.Message))
			}
			return next(c)
		}
	}
}

// forbiddenPage is the page of a role's refusal.
func forbiddenPage(msg string) string {
	return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Not allowed · Leasehold</title></head>
<body><h1>Not allowed</h1>
<p data-testid="forbidden">` + html.EscapeString(msg) + `. An admin can change your role on the Users page.</p>
<p><a href="/">Back to the overview</a></p>
</body></html>
`
}

// RequireSessionOrToken accepts a signed-in user or a bearer token whose
// role allows need (for scripts fetching artifacts).
func RequireSessionOrToken(a *auth.Service, tokens *apitoken.Store, need role.Role) echo.MiddlewareFunc {
	byToken := RequireToken(tokens, need)
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		viaToken := byToken(next)
		return func(c echo.Context) error {
			if c.Request().Header.Get(echo.HeaderAuthorization) != "" {
				return viaToken(c)
			}
			sess, err := SessionOf(c, a)
			if errors.Is(err, auth.ErrNoSession) {
				return &Error{Status: http.StatusUnauthorized, Message: "missing bearer token or session: sign in, or send Authorization: Bearer TOKEN"}
			}
			if err != nil {
				return err
			}
			if !sess.Role.Allows(need) {
				return forbidden("user", sess.Role, need)
			}
			c.Set(sessionKey, sess)
			setAuditActor(c, "user:"+sess.Username, sess.Role)
			return next(c)
		}
	}
}

// SessionOf is the session of c's cookie; auth.ErrNoSession without one.
func SessionOf(c echo.Context, a *auth.Service) (auth.Session, error) {
	cookie, err := c.Cookie(SessionCookie)
	if err != nil {
		return auth.Session{}, auth.ErrNoSession
	}
	return a.Session(c.Request().Context(), cookie.Value)
}

var crossOrigin = http.NewCrossOriginProtection()

// CheckCrossOrigin refuses (403) a request that another site made the
// browser send, as its Sec-Fetch-Site or Origin tells
// (http.CrossOriginProtection).
func CheckCrossOrigin(c echo.Context) error {
	if err := crossOrigin.Check(c.Request()); err != nil {
		return &Error{Status: http.StatusForbidden, Message: "cross-site request refused"}
	}
	return nil
}

// checkForgery refuses a state-changing request that another site could
// have made the browser send.
func checkForgery(c echo.Context, sess auth.Session) error {
	if err := CheckCrossOrigin(c); err != nil {
		return err
	}
	req := c.Request()
	req.Body = http.MaxBytesReader(c.Response(), req.Body, FormBodyLimit)
	// Parsed here, so that a form over the limit is a 413 rather than a
	// form without a token.
	if err := req.ParseForm(); err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return &Error{Status: http.StatusRequestEntityTooLarge,
				Message: fmt.Sprintf("the form is larger than %d KiB: send less text", FormBodyLimit>>10)}
		}
		return BadRequest("", "malformed form: %v", err)
	}
	// Only the header or the form body: a token in the URL would leak
	// into logs, history and Referer headers.
	token := req.Header.Get("X-CSRF-Token")
	if token == "" {
		token = req.PostForm.Get("_csrf")
	}
	if token == "" || subtle.ConstantTimeCompare([]byte(token), []byte(sess.CSRFToken)) != 1 {
		return &Error{Status: http.StatusForbidden, Message: "missing or stale form token: reload the page and try again"}
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
	if IsHTMX(c) {
		c.Response().Header().Set("HX-Redirect", target)
		return c.NoContent(http.StatusUnauthorized)
	}
	return c.Redirect(http.StatusSeeOther, target)
}

// IsHTMX reports whether c is an htmx request (a partial is wanted).
func IsHTMX(c echo.Context) bool { return c.Request().Header.Get("HX-Request") == "true" }
