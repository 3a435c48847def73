package adminapi

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/leasehold/leasehold/api"
	"github.com/leasehold/leasehold/audit"
	"github.com/leasehold/leasehold/web/httpx"
)

// ListAudit answers GET /api/v1/audit: the audit trail newest first,
// filtered by actor, action, target and time, one page at a time (next
// is the page after's before). It reads the primary: a script that
// changed something finds its row at once.
func (h *Handler) ListAudit(c echo.Context) error {
	q, err := httpx.ParseAuditQuery(c.QueryParams())
	if err != nil {
		return err
	}
	rows, next, err := audit.List(c.Request().Context(), h.audit, q.Filter, q.Limit)
	if err != nil {
		return err
	}
	out := api.AuditList{Entries: make([]api.AuditEntry, len(rows))}
	for i, r := range rows {
		out.Entries[i] = api.AuditEntry{ID: r.ID, At: api.Time(r.At), Actor: r.Actor, Role: r.Role, Addr: r.Addr,
			Action: r.Action, Target: r.Target, Detail: r.Detail}
	}
	if next != 0 {
		out.Next = &next
	}
	return c.JSON(http.StatusOK, out)
}
