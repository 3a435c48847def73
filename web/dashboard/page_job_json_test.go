package dashboard

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// TestPageJSONIndentsLikeEncodingJSON: within its limits the page shows a
// value exactly as json.Indent would.
func TestPageJSONIndentsLikeEncodingJSON(t *testing.T) {
	t.Parallel()
	for _, raw := range []string{
		`{}`, `[]`, `null`, `42`, `"s"`,
		`{"a": 1, "b": [true, false, null, -1.5e3], "c": {"d": "x\"y\\z\u00e9"}, "e": {}, "f": []}`,
		`[{"k":[[1],[2,{"z":"}]"}]]}]`,
	} {
		var want bytes.Buffer
		if err := json.Indent(&want, []byte(raw), "", "  "); err != nil {
			t.Fatal(err)
		}
		got := panelJSON.show([]byte(raw))
		if got.Text != want.String() || got.Shortened() {
			t.Errorf("%s:\ngot  %q (%+v)\nwant %q", raw, got.Text, got, want.String())
		}
		var compact bytes.Buffer
		_ = json.Compact(&compact, []byte(raw))
		if got := cellJSON.show([]byte(raw)); got.Text != compact.String() {
			t.Errorf("%s compact: got %q, want %q", raw, got.Text, compact.String())
		}
	}
}

// TestPageJSONIsBounded: a deep or long value shows within the limits,
// and says so.
func TestPageJSONIsBounded(t *testing.T) {
	t.Parallel()
	deep := `{"r":` + strings.Repeat(`{"a":`, 9000) + `1` + strings.Repeat(`}`, 9000) + `}`
	got := panelJSON.show([]byte(deep))
	if !got.Deep || len(got.Text) > panelJSON.maxBytes+len("…") {
		t.Errorf("deep value: %d bytes, deep %v", len(got.Text), got.Deep)
	}
	if n := strings.Count(got.Text, "\n"); n > 2*panelJSON.maxDepth+2 {
		t.Errorf("deep value shown on %d lines", n)
	}
	if !strings.Contains(got.Text, `{…}`) {
		t.Errorf("no {…} where levels were left out: %.200q", got.Text)
	}
	note := got.note(int64(len(deep)), 7, panelJSON)
	if !strings.Contains(note, "Truncated") || !strings.Contains(note, "/api/v1/jobs/7") {
		t.Errorf("note %q", note)
	}

	long := `{"s":"` + strings.Repeat("é", 1<<20) + `"}`
	got = panelJSON.show([]byte(long))
	if !got.Cut || len(got.Text) > panelJSON.maxBytes+len("…") || !strings.HasSuffix(got.Text, "…") {
		t.Errorf("long value: %d bytes, cut %v", len(got.Text), got.Cut)
	}
	if !json.Valid([]byte(`"` + strings.TrimSuffix(strings.TrimPrefix(got.Text, "{\n  \"s\": \""), "…") + `"`)) {
		t.Error("long value cut inside a character")
	}
	if cell := cellJSON.show([]byte(deep)); len(cell.Text) > jobPageDetailLimit+len("…") || !cell.Deep {
		t.Errorf("deep cell: %d bytes", len(cell.Text))
	}
	if got := panelJSON.show([]byte("not json")); got.Text != "not json" {
		t.Errorf("not JSON shown as %q", got.Text)
	}
}
