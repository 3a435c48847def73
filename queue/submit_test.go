package queue_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/leasehold/leasehold/queue"
)

func TestNormalizeRefusesWhatJsonbCannotStore(t *testing.T) {
	t.Parallel()
	deep := strings.Repeat(`{"a":`, 130) + "1" + strings.Repeat("}", 130)
	for _, tc := range []struct {
		name, kind, payload string
		field               string // "" when valid
	}{
		{"Empty", "test", ``, ""},
		{"EscapedBackslashBeforeU0000", "test", `{"path":"C:\\u0000"}`, ""},
		{"NUL", "test", `{"s":"a\u0000b"}`, "payload"},
		{"NULInKey", "test", `{"\u0000":1}`, "payload"},
		{"LoneSurrogate", "test", `{"s":"\ud800"}`, "payload"},
		{"PairedSurrogate", "test", `{"s":"\ud83d\ude00"}`, ""},
		{"HugeExponent", "test", `{"n":1e131071}`, "payload"},
		{"TooDeep", "test", deep, "payload"},
		{"NotAnObject", "test", `[1,2]`, "payload"},
		{"BadKind", "Bad Kind", `{}`, "kind"},
		{"InvestigationWithoutApp", "app_investigation", `{"instructions":"x"}`, "payload.app"},
		{"InvestigationBadPackage", "app_investigation", `{"app":"../../etc"}`, "payload.app"},
		{"InvestigationBadStoreURL", "app_investigation", `{"app":"com.example.notes","store_url":"javascript:alert(1)"}`, "payload.store_url"},
		{"InvestigationBadDevice", "app_investigation", `{"app":"com.example.notes","device":"<script>"}`, "payload.device"},
		{"Investigation", "app_investigation", `{"app":"com.example.notes","store_url":"https://play.google.com/store/apps/details?id=com.example.notes","device":"pixel7"}`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nj := queue.NewJob{Kind: tc.kind, Payload: json.RawMessage(tc.payload)}
			err := nj.Normalize()
			var ve *queue.ValidationError
			switch {
			case tc.field == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.field != "" && (!errors.As(err, &ve) || ve.Field != tc.field):
				t.Fatalf("got %v, want a ValidationError on %s", err, tc.field)
			}
		})
	}
}
