package queue_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/leasehold/leasehold/queue"
)

// TestAppAndDeviceLimitsForEveryKind: payload.app (at most 255
// characters) and payload.device (at most 64) are checked for every kind,
// not only app_investigation, both alone and in a batch. A long app used
// to reach the jobs_app_id_idx index and fail there with a 500.
func TestAppAndDeviceLimitsForEveryKind(t *testing.T) {
	t.Parallel()
	f := setup(t, 4)
	payload := func(k, v string) json.RawMessage { return json.RawMessage(fmt.Sprintf(`{%q:%q}`, k, v)) }
	for _, tc := range []struct {
		name    string
		payload json.RawMessage
		field   string // "" when valid
	}{
		{"App255", payload("app", strings.Repeat("a", 255)), ""},
		{"App255MultiByte", payload("app", strings.Repeat("é", 255)), ""},
		{"App256", payload("app", strings.Repeat("a", 256)), "payload.app"},
		{"App2800", payload("app", strings.Repeat("x", 2800)), "payload.app"},
		{"Device64", payload("device", strings.Repeat("d", 64)), ""},
		{"Device65", payload("device", strings.Repeat("d", 65)), "payload.device"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := f.client.Insert(f.ctx, queue.NewJob{Kind: "x", Payload: tc.payload})
			checkField(t, err, tc.field)
			batch := []queue.NewJob{{Kind: "x"}, {Kind: "x", Payload: tc.payload}}
			_, err = f.client.InsertMany(f.ctx, batch)
			checkField(t, err, map[bool]string{true: "", false: "jobs[1]." + tc.field}[tc.field == ""])
		})
	}
	long := queue.NewJob{Kind: "app_investigation", Payload: payload("app", "com."+strings.Repeat("a", 2800))}
	if _, _, err := f.client.Insert(f.ctx, long); err == nil || !strings.Contains(err.Error(), "package name") {
		t.Errorf("long investigation app: %v", err)
	}
}

func checkField(t *testing.T, err error, field string) {
	t.Helper()
	var ve *queue.ValidationError
	switch {
	case field == "" && err != nil:
		t.Fatalf("refused: %v", err)
	case field != "" && (!errors.As(err, &ve) || ve.Field != field):
		t.Fatalf("got %v, want a ValidationError on %s", err, field)
	}
}
