package dashboard

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/leasehold/leasehold/auth"
	"github.com/leasehold/leasehold/role"
	"github.com/leasehold/leasehold/templates"
)

// UsersPage lists the dashboard's users for an admin.
func (h *Handler) UsersPage(c echo.Context) error {
	return h.renderUsers(c, http.StatusOK, nil, "", "")
}

func (h *Handler) renderUsers(c echo.Context, status int, notices []templates.ListNotice, addName, addRole string) error {
	users, err := h.auth.Users(c.Request().Context())
	if err != nil {
		return fmt.Errorf("users page: %w", err)
	}
	v := templates.UsersView{Rows: make([]templates.UsersRow, len(users)), Notices: notices, AddName: addName, AddRole: addRole}
	for i, u := range users {
		v.Rows[i] = templates.UsersRow{Name: u.Username, Role: string(u.Role), CreatedAt: u.CreatedAt, LastLoginAt: u.LastLoginAt}
	}
	if v.AddRole == "" {
		v.AddRole = string(role.Viewer)
	}
	return render(c, status, templates.Users(h.page(c, "Users", "users"), v))
}

// AddUser is the users page's add form.
func (h *Handler) AddUser(c echo.Context) error {
	name, r := strings.TrimSpace(c.FormValue("name")), role.Role(c.FormValue("role"))
	if _, err := h.auth.AddUser(c.Request().Context(), name, r, c.FormValue("password")); err != nil {
		return h.usersRefused(c, err, name, string(r))
	}
	return c.Redirect(http.StatusSeeOther, "/users")
}

// SetUserRole is a user's Set role form.
func (h *Handler) SetUserRole(c echo.Context) error {
	if err := h.auth.SetRole(c.Request().Context(), c.Param("name"), role.Role(c.FormValue("role"))); err != nil {
		return h.usersRefused(c, err, "", "")
	}
	return c.Redirect(http.StatusSeeOther, "/users")
}

// RemoveUser is a user's Remove button; the user's sessions end with it.
func (h *Handler) RemoveUser(c echo.Context) error {
	if err := h.auth.RemoveUser(c.Request().Context(), c.Param("name")); err != nil {
		return h.usersRefused(c, err, "", "")
	}
	return c.Redirect(http.StatusSeeOther, "/users")
}

// usersRefused shows the page with why nothing changed; an error that is
// not the person's (the database) stays an error.
func (h *Handler) usersRefused(c echo.Context, err error, addName, addRole string) error {
	status := http.StatusUnprocessableEntity
	switch {
	case errors.Is(err, auth.ErrNoUser):
		status = http.StatusNotFound
	case errors.Is(err, auth.ErrUserExists), errors.Is(err, auth.ErrLastAdmin):
		status = http.StatusConflict
	case errors.Is(err, auth.ErrBadRole), errors.Is(err, auth.ErrBadUsername), errors.Is(err, auth.ErrBadPassword):
	default:
		return err
	}
	return h.renderUsers(c, status, []templates.ListNotice{{Kind: "error", Text: "Nothing changed: " + listClip(err.Error(), 200) + "."}}, addName, addRole)
}
