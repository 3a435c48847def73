package httpx

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"runtime/debug"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/leasehold/leasehold/apitoken"
	"github.com/leasehold/leasehold/audit"
	"github.com/leasehold/leasehold/role"
)

// TokenKey is where RequireToken leaves the caller's apitoken.Token in
// the context.
const TokenKey = "leasehold.token"

// LogRequests logs one line per request. It never logs headers, so
// Authorization never reaches the logs.
func LogRequests(logger *slog.Logger) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			start := time.Now()
			if err := next(c); err != nil {
				// Write the error response now, so the status logged is final.
				c.Error(err)
			}
			req := c.Request()
			attrs := []slog.Attr{
				slog.String("method", req.Method),
				slog.String("path", req.URL.Path),
				slog.Int("status", c.Response().Status),
				slog.Duration("duration", time.Since(start)),
			}
			if tok, ok := c.Get(TokenKey).(apitoken.Token); ok {
				attrs = append(attrs, slog.String("token", tok.Name))
			}
			logger.LogAttrs(req.Context(), slog.LevelInfo, "http request", attrs...)
			return nil
		}
	}
}

// RecoverPanics turns a handler's panic into a logged JSON 500, so one bad
// request cannot take the connection (or the process) down.
func RecoverPanics(logger *slog.Logger) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) (err error) {
			defer func() {
				r := recover()
				if r == nil {
					return
				}
				if r == http.ErrAbortHandler {
					panic(r) // net/http's way to abort a response on purpose
				}
				logger.Error("panic serving request", "method", c.Request().Method, "path", c.Request().URL.Path,
					"panic", fmt.Sprint(r), "stack", string(debug.Stack()))
				err = errPanicked
			}()
			return next(c)
		}
	}
}

// RequireToken lets a request through only with an active bearer token
// whose role allows need (role.Role.Allows): 401 without a valid one, 403
// with one whose role does not.
func RequireToken(tokens *apitoken.Store, need role.Role) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			secret, ok := bearer(c.Request().Header.Get(echo.HeaderAuthorization))
			if !ok {
				return &Error{Status: http.StatusUnauthorized, Message: "missing bearer token: send Authorization: Bearer TOKEN"}
			}
			tok, err := tokens.Authenticate(c.Request().Context(), secret)
			if errors.Is(err, apitoken.ErrInvalid) {
				return &Error{Status: http.StatusUnauthorized, Message: "invalid or revoked token"}
			}
			if err != nil {
				return fmt.Errorf("authenticating: %w", err)
			}
			if !tok.Role.Allows(need) {
				return forbidden("token", tok.Role, need)
			}
			c.Set(TokenKey, tok)
			setAuditActor(c, "token:"+tok.Name, tok.Role)
			return next(c)
		}
	}
}

// forbidden is the 403 of a caller (a "token" or a "user") whose role
// does not allow what needs need.
func forbidden(who string, has, need role.Role) *Error {
	msg := fmt.Sprintf("a %s %s cannot do this: it needs the %s role", has, who, need)
	if need != role.Worker && need != role.Admin {
		msg += " or a higher one"
	}
	return &Error{Status: http.StatusForbidden, Message: msg}
}

// bearer extracts the token of an "Authorization: Bearer TOKEN" header;
// the scheme is case-insensitive (RFC 9110).
func bearer(header string) (string, bool) {
	scheme, token, ok := strings.Cut(strings.TrimSpace(header), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

// setAuditActor makes the authenticated caller the actor of what the
// request changes (package audit), from the address the sign-in
// throttle sees (echo's RealIP, which trusts only LEASEHOLD_TRUSTED_PROXIES).
func setAuditActor(c echo.Context, name string, r role.Role) {
	ctx := audit.NewContext(c.Request().Context(), audit.Actor{Name: name, Role: r, Addr: ClientAddr(c)})
	c.SetRequest(c.Request().WithContext(ctx))
}

// ClientAddr is the client's address as the sign-in throttle and the
// audit trail see it; "" when the request's cannot be read.
func ClientAddr(c echo.Context) string {
	a, err := netip.ParseAddr(c.RealIP())
	if err != nil {
		return ""
	}
	return a.Unmap().String()
}

// Actor names the caller in the events of the jobs it changes.
func Actor(c echo.Context) string {
	tok, _ := c.Get(TokenKey).(apitoken.Token)
	return "token:" + tok.Name
}

// BodyDeadline gives a request with a body until its route's deadline to
// send all of it: upload for the routes of uploadRoutes (bodies that may
// take long to arrive, such as a screenshot sent from a home uplink),
// read for the others. A stalled body then fails to read (408), and the
// connection is closed.
//
// Only the body is bounded, never the answer: there is no write timeout,
// so long polls and event streams live. Once a body has been read to its
// end, net/http clears the deadline as it starts reading ahead in the
// background; a deadline set on a request without a body would instead
// expire in that background read and cancel the request's context, so
// such requests get none.
func BodyDeadline(read, upload time.Duration, uploadRoutes map[string]bool) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			req := c.Request()
			if req.Body == nil || req.Body == http.NoBody {
				return next(c)
			}
			d := read
			if uploadRoutes[c.Path()] {
				d = upload
			}
			// A ResponseRecorder has no connection, hence no deadline.
			_ = http.NewResponseController(c.Response()).SetReadDeadline(time.Now().Add(d))
			return next(c)
		}
	}
}

// RequestDeadline ends each request's context after d, or after its
// route's own bound in routes (0: none, for event streams), and with it
// the statements it runs: a frozen database, which no statement_timeout
// can end, then costs a request d (answered 503, see Unavailable) rather
// than holding it, its client and a pool connection until the database
// wakes. A context also ends when its client goes away, and pgx then
// closes the connection, which rolls back an open transaction: whatever
// commits, commits while the request is alive.
func RequestDeadline(d time.Duration, routes map[string]time.Duration) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			bound := d
			if b, ok := routes[c.Path()]; ok {
				bound = b
			}
			if bound <= 0 {
				return next(c)
			}
			req := c.Request()
			ctx, cancel := context.WithTimeout(req.Context(), bound)
			defer cancel()
			c.SetRequest(req.WithContext(ctx))
			// The error handler runs above this middleware: it must see
			// the client's own context, which ends only if the client left.
			defer c.SetRequest(req)
			return next(c)
		}
	}
}
