package httpx

import (
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/leasehold/leasehold/audit"
)

// DefaultAuditLimit is the page size of GET /api/v1/audit without ?limit=.
const DefaultAuditLimit = 100

// AuditQuery is a read of the audit trail, as GET /api/v1/audit and the
// /audit page ask it.
type AuditQuery struct {
	Filter audit.Filter
	// Limit is the page size: 1 to audit.MaxPage.
	Limit int
}

// ParseAuditQuery reads the audit trail's query string, the API's and
// the page's alike: actor, action and target (exactly; action also as
// the prefix before a dot, "job" for "job.retry"), since and until
// (RFC 3339), before (the cursor: the next of the page before) and limit
// (1 to audit.MaxPage, default DefaultAuditLimit). A value that could
// never be meant is a 400 naming its field, never a query.
func ParseAuditQuery(v url.Values) (AuditQuery, error) {
	q := AuditQuery{Limit: DefaultAuditLimit}
	f := &q.Filter
	for _, p := range []struct {
		name string
		to   *string
	}{{"actor", &f.Actor}, {"action", &f.Action}, {"target", &f.Target}} {
		s := strings.TrimSpace(v.Get(p.name))
		if err := CheckText(p.name, s); err != nil {
			return q, err
		}
		*p.to = s
	}
	for _, p := range []struct {
		name string
		to   *time.Time
	}{{"since", &f.Since}, {"until", &f.Until}} {
		s := strings.TrimSpace(v.Get(p.name))
		if s == "" {
			continue
		}
		t, err := time.Parse(time.RFC3339, s)
		if err != nil || len(s) > 64 {
			return q, BadRequest(p.name, "must be an RFC 3339 time such as 2026-01-02T15:04:05Z")
		}
		*p.to = t
	}
	if !f.Since.IsZero() && !f.Until.IsZero() && !f.Since.Before(f.Until) {
		return q, BadRequest("until", "must be after since")
	}
	if s := v.Get("before"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 1 {
			return q, BadRequest("before", "must be the next of the previous page (a positive integer)")
		}
		f.Before = n
	}
	if s := v.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > audit.MaxPage {
			// Refused rather than cut short, as GET /api/v1/jobs does: a
			// client never mistakes a capped page for the size it asked.
			return q, BadRequest("limit", "must be an integer from 1 to %d", audit.MaxPage)
		}
		q.Limit = n
	}
	return q, nil
}
