package queue_test

import (
	"strings"
	"testing"

	"github.com/leasehold/leasehold/queue"
)

func TestParseDeviceInfo(t *testing.T) {
	t.Parallel()
	info, err := queue.ParseDeviceInfo([]byte(" {\"serial\":\"R5CT\", \"model\":\"Pixel 7\",\"android\":\"14\",\"battery\":42,\"charging\":true,\"screen\":\"on\",\"adb\":\"device\",\"sim\":\"none\"}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if info.Model != "Pixel 7" || info.Android != "14" || info.Adb != "device" || *info.Battery != 42 || !*info.Charging {
		t.Errorf("%+v", info)
	}
	if string(info.Raw) != `{"serial":"R5CT","model":"Pixel 7","android":"14","battery":42,"charging":true,"screen":"on","adb":"device","sim":"none"}` {
		t.Errorf("raw %s (extra keys must be kept, whitespace dropped)", info.Raw)
	}
	if info, err := queue.ParseDeviceInfo([]byte(`{}`)); err != nil || info.Battery != nil || info.Charging != nil {
		t.Errorf("an empty object: %+v %v", info, err)
	}

	for _, tc := range []struct{ name, in, want string }{
		{"Empty", "", "empty"},
		{"NotJSON", "battery=80", "not a JSON object"},
		{"Array", `[1]`, "not a JSON object"},
		{"Null", `null`, "not a JSON object"},
		{"Two", `{"adb":"device"} {"adb":"offline"}`, "one JSON object"},
		{"Trailing", `{"adb":"device"} x`, "one JSON object"},
		{"BatteryString", `{"battery":"80"}`, `"battery" must be an integer from 0 to 100, not a string`},
		{"BatteryFraction", `{"battery":80.5}`, `"battery" must be an integer`},
		{"BatteryHigh", `{"battery":101}`, `"battery" must be an integer`},
		{"BatteryNegative", `{"battery":-1}`, `"battery" must be an integer`},
		{"BatteryNull", `{"battery":null}`, `not null`},
		{"ChargingString", `{"charging":"yes"}`, `"charging" must be true or false`},
		{"NumberModel", `{"model":7}`, `"model" must be a string, not 7`},
		{"ObjectExtra", `{"x":{"y":1}}`, `"x" must be a string, not an object`},
		{"LongValue", `{"x":"` + strings.Repeat("a", 1025) + `"}`, "over 1024 bytes"},
		{"LongKey", `{"` + strings.Repeat("k", 65) + `":"a"}`, "want 1 to 64 characters"},
		{"EmptyKey", `{"":"a"}`, "want 1 to 64 characters"},
		{"TooLarge", `{"x":"` + strings.Repeat("a", 9000) + `"}`, "over 8192 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := queue.ParseDeviceInfo([]byte(tc.in))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%q: %v, want an error saying %q", tc.in, err, tc.want)
			}
		})
	}
	var many strings.Builder
	many.WriteString("{")
	for i := range 65 {
		if i > 0 {
			many.WriteString(",")
		}
		many.WriteString(`"k` + strings.Repeat("x", i) + `":"v"`)
	}
	many.WriteString("}")
	if _, err := queue.ParseDeviceInfo([]byte(many.String())); err == nil || !strings.Contains(err.Error(), "at most 64") {
		t.Errorf("65 keys: %v", err)
	}
}

func TestDeviceHealth(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in     string
		min    int
		fit    bool
		reason string
	}{
		{`{"adb":"device","battery":80,"charging":false}`, 15, true, ""},
		{`{"adb":"offline","battery":80}`, 15, false, "adb offline"},
		{`{"adb":"unauthorized"}`, 15, false, "adb unauthorized"},
		{`{"adb":"device","battery":4,"charging":false}`, 15, false, "battery 4% (under 15%) and not charging"},
		{`{"adb":"device","battery":4}`, 15, false, "battery 4% (under 15%) and not charging"},
		{`{"adb":"device","battery":4,"charging":true}`, 15, true, ""},
		{`{"adb":"device","battery":15,"charging":false}`, 15, true, ""},
		{`{"adb":"device","battery":0,"charging":false}`, -1, true, ""},
		{`{"battery":50}`, 60, false, "battery 50% (under 60%) and not charging"},
		{`{"model":"Pixel 7"}`, 15, true, ""}, // facts not reported are not held against it
	} {
		info, err := queue.ParseDeviceInfo([]byte(tc.in))
		if err != nil {
			t.Fatal(err)
		}
		if fit, reason := queue.DeviceHealth(info, tc.min); fit != tc.fit || reason != tc.reason {
			t.Errorf("%s (min %d): %v %q, want %v %q", tc.in, tc.min, fit, reason, tc.fit, tc.reason)
		}
	}
}
