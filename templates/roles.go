package templates

import (
	"context"

	"github.com/leasehold/leasehold/role"
)

// mayAct reports whether the signed-in person may act (an operator or an
// admin): the pages show the buttons and forms that change something only
// then. The server refuses such requests from others all the same
// (web/routes.go declares what each route needs).
func mayAct(ctx context.Context) bool { return role.May(ctx, role.Operator) }

// mayAdminister reports whether the signed-in person is an admin: the
// menu links the users page only then.
func mayAdminister(ctx context.Context) bool { return role.May(ctx, role.Admin) }
