package dashboard

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/leasehold/leasehold/audit"
	"github.com/leasehold/leasehold/templates"
	"github.com/leasehold/leasehold/web/httpx"
)

// Sizes of the /audit page: rows a page (unless ?limit= says), and the
// characters of a detail shown (GET /api/v1/audit has all of it).
const (
	auditPageSize    = 50
	auditDetailChars = 400
)

// AuditPage is GET /audit: the audit trail newest first, filtered by the
// query string as GET /api/v1/audit is (actor, action, target, since,
// until), one keyset page at a time (before). A query that could never
// be meant is shown with status 400, the form kept. It reads the
// primary, like the users page: an admin who just changed something
// sees it.
func (h *Handler) AuditPage(c echo.Context) error {
	params := c.QueryParams()
	page := h.page(c, "Audit trail", "audit")
	v := templates.AuditView{Actor: params.Get("actor"), Action: params.Get("action"), Target: params.Get("target")}
	for _, k := range []string{"actor", "action", "target", "since", "until"} {
		v.Filtered = v.Filtered || params.Get(k) != ""
	}
	q, err := httpx.ParseAuditQuery(params)
	var bad *httpx.Error
	if errors.As(err, &bad) {
		// The form shows what was typed, but never more than a field
		// takes: a megabyte of query string is not sent back.
		v.Actor, v.Action, v.Target = listClip(v.Actor, 255), listClip(v.Action, 255), listClip(v.Target, 255)
		v.Problem, v.Field = bad.Message, bad.Field
		return render(c, http.StatusBadRequest, templates.Audit(page, v))
	}
	if err != nil {
		return err
	}
	if !params.Has("limit") {
		q.Limit = auditPageSize
	}
	v.Actor, v.Action, v.Target = q.Filter.Actor, q.Filter.Action, q.Filter.Target
	rows, next, err := audit.List(c.Request().Context(), h.audit, q.Filter, q.Limit)
	if err != nil {
		return fmt.Errorf("reading the audit trail for its page: %w", err)
	}
	v.Rows = make([]templates.AuditRow, len(rows))
	for i, r := range rows {
		v.Rows[i] = templates.AuditRow{ID: r.ID, At: r.At, Actor: r.Actor, Role: r.Role, Addr: r.Addr,
			Action: r.Action, Target: r.Target, Detail: auditDetail(r.Detail)}
	}
	if next != 0 {
		v.NextURL = auditURL(params, next)
	}
	if q.Filter.Before != 0 {
		v.FirstURL = auditURL(params, 0)
	}
	return render(c, http.StatusOK, templates.Audit(page, v))
}

// auditURL is /audit with the filters of params and the cursor before (0:
// the newest page).
func auditURL(params url.Values, before int64) string {
	v := url.Values{}
	for _, k := range []string{"actor", "action", "target", "since", "until", "limit"} {
		if s := params.Get(k); s != "" {
			v.Set(k, s)
		}
	}
	if before > 0 {
		v.Set("before", strconv.FormatInt(before, 10))
	}
	if len(v) == 0 {
		return "/audit"
	}
	return "/audit?" + v.Encode()
}

// auditDetail is a change's detail as compact JSON, clipped for the
// table; "" for an empty object.
func auditDetail(raw json.RawMessage) string {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return listClip(string(raw), auditDetailChars)
	}
	if s := b.String(); s != "{}" && s != "null" {
		return listClip(s, auditDetailChars)
	}
	return ""
}
