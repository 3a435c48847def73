// Package role names who may do what (SPEC "Roles and audit"): people and
// API tokens are viewers, operators or admins, each allowed what the one
// before it is and more; worker tokens speak only the worker API. Every
// route declares the role it needs (web/routes.go).
package role

import "context"

// Role is a person's or an API token's role.
type Role string

// The roles, from the least allowed.
const (
	// Viewer reads everything and changes nothing.
	Viewer Role = "viewer"
	// Operator also submits, retries and cancels jobs, pauses and caps
	// queues, and edits schedules, rate limits and availability windows.
	Operator Role = "operator"
	// Admin also manages users, tokens and settings.
	Admin Role = "admin"
	// Worker is a remote worker's token: the worker API only.
	Worker Role = "worker"
)

// People are the roles a person (a dashboard user) may have, from the
// least allowed.
var People = []Role{Viewer, Operator, Admin}

// rank orders the roles of people; 0 for any other.
func (r Role) rank() int {
	switch r {
	case Viewer:
		return 1
	case Operator:
		return 2
	case Admin:
		return 3
	}
	return 0
}

// ForPerson reports whether a person may have r.
func (r Role) ForPerson() bool { return r.rank() > 0 }

// Valid reports whether an API token may have r (any role).
func (r Role) Valid() bool { return r.ForPerson() || r == Worker }

// Allows reports whether r may use what needs need: a worker token only
// the worker API, and a person's role everything that needs it or a role
// before it.
func (r Role) Allows(need Role) bool {
	if r == Worker || need == Worker {
		return r == need
	}
	return need.ForPerson() && r.rank() >= need.rank()
}

type contextKey struct{}

// NewContext returns ctx carrying the role of the person it serves.
func NewContext(ctx context.Context, r Role) context.Context {
	return context.WithValue(ctx, contextKey{}, r)
}

// FromContext is the role NewContext put in ctx; "" (allowed nothing)
// without one.
func FromContext(ctx context.Context) Role {
	r, _ := ctx.Value(contextKey{}).(Role)
	return r
}

// May reports whether the person ctx serves may do what needs need: the
// pages show an action's button only then.
func May(ctx context.Context, need Role) bool { return FromContext(ctx).Allows(need) }
