package api

// FailureGroup is one cause of failure (SPEC "Search and failure
// groups"): failed attempts whose errors match once numbers, ids, times
// and paths are masked (Signature) and whose last screenshots show the
// same screen (ScreenHash, 16 hex digits; null when they took none).
type FailureGroup struct {
	ID         int64   `json:"id"`
	Signature  string  `json:"signature"`
	ScreenHash *string `json:"screen_hash"`
	// Error is the group's first failure as it was, of attempt Attempt of
	// job JobID; Screenshot is the path of the screenshot the group shows
	// (GET /artifacts/{id}), null for none.
	Error      string  `json:"error"`
	JobID      int64   `json:"job_id"`
	Attempt    int32   `json:"attempt"`
	Screenshot *string `json:"screenshot"`
	// Dead is how many dead letters the group holds now; Attempts how
	// many failed attempts it has (since `since`, when asked with it).
	// Both are counted up to 10,000.
	Dead     int64 `json:"dead"`
	Attempts int64 `json:"attempts"`
	// FirstSeen and LastSeen bound its failures.
	FirstSeen Time `json:"first_seen"`
	LastSeen  Time `json:"last_seen"`
	// Apps are up to five of the apps of its latest 200 dead letters (with
	// `since`, of its failed attempts); AppCount how many those were.
	Apps     []string `json:"apps"`
	AppCount int64    `json:"app_count"`
}

// FailureGroupList answers GET /api/v1/failure-groups.
type FailureGroupList struct {
	Groups []FailureGroup `json:"groups"`
}
