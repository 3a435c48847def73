package main

import (
	"strings"
	"testing"
)

// A hand-over deadline outside its bounds stops the server before it
// touches a database, by flag and by LEASEHOLD_HANDOVER alike.
func TestHandoverOutOfBoundsRefusedAtStart(t *testing.T) {
	for name, tc := range map[string]struct {
		args []string
		env  string
		want string
	}{
		"TooShort":    {args: []string{"--handover", "100ms"}, want: "--handover: hand-over deadline 100ms: must be between 500ms and 1m0s"},
		"TooLong":     {args: []string{"--handover", "2m"}, want: "must be between 500ms and 1m0s"},
		"EnvZero":     {env: "0s", want: "must be between 500ms and 1m0s"},
		"EnvNotATime": {env: "soon", want: "LEASEHOLD_HANDOVER"},
	} {
		t.Run(name, func(t *testing.T) {
			if tc.env != "" {
				t.Setenv("LEASEHOLD_HANDOVER", tc.env)
			}
			t.Setenv("DATABASE_URL", "postgres://nobody@127.0.0.1:1/none?connect_timeout=1")
			err := run(tc.args)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("run(%q) with LEASEHOLD_HANDOVER=%q = %v, want an error naming %s", tc.args, tc.env, err, tc.want)
			}
		})
	}
}
