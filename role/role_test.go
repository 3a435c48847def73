package role_test

import (
	"testing"

	"github.com/leasehold/leasehold/role"
)

func TestAllows(t *testing.T) {
	all := []role.Role{role.Viewer, role.Operator, role.Admin, role.Worker, "", "root"}
	want := map[role.Role][]role.Role{
		role.Viewer:   {role.Viewer},
		role.Operator: {role.Viewer, role.Operator},
		role.Admin:    {role.Viewer, role.Operator, role.Admin},
		role.Worker:   {role.Worker},
	}
	for _, r := range all {
		for _, need := range all {
			allowed := false
			for _, n := range want[r] {
				allowed = allowed || n == need
			}
			if got := r.Allows(need); got != allowed {
				t.Errorf("%q.Allows(%q) = %v, want %v", r, need, got, allowed)
			}
		}
	}
	for _, r := range []role.Role{role.Worker, "", "root", "Admin"} {
		if r.ForPerson() {
			t.Errorf("%q.ForPerson() = true", r)
		}
	}
	if !role.Worker.Valid() || role.Role("root").Valid() {
		t.Error("Valid: worker must be a token's role, root none")
	}
}
