package api

import "encoding/json"

// AuditEntry is one change of the audit trail (SPEC "Roles and audit"):
// who (Actor "user:NAME", "token:NAME" or "cli:NAME", with the Role it had
// and the client address Addr, "" from the command line) did what
// (Action, such as "job.retry") to what (Target, such as "job:42"), and
// the rest of it (Detail, a JSON object).
type AuditEntry struct {
	ID     int64           `json:"id"`
	At     Time            `json:"at"`
	Actor  string          `json:"actor"`
	Role   string          `json:"role"`
	Addr   string          `json:"addr"`
	Action string          `json:"action"`
	Target string          `json:"target"`
	Detail json.RawMessage `json:"detail"`
}

// AuditList is one page of GET /api/v1/audit, newest first; Next is the
// cursor of the next page (its `before`), null on the last page.
type AuditList struct {
	Entries []AuditEntry `json:"entries"`
	Next    *int64       `json:"next"`
}
