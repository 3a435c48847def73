package cli

import (
	"runtime/debug"
	"strings"
	"testing"
)

func TestDescribeVersion(t *testing.T) {
	t.Parallel()
	stamped := &debug.BuildInfo{
		Main: debug.Module{Path: "github.com/leasehold/leasehold", Version: "(devel)"},
		Settings: []debug.BuildSetting{
			{Key: "vcs", Value: "git"},
			{Key: "vcs.revision", Value: "4b8d96aebf69c7fed66369a6e5b2539487a57846"},
			{Key: "vcs.time", Value: "2026-12-01T08:35:02Z"},
			{Key: "vcs.modified", Value: "true"},
		},
	}
	for name, tc := range map[string]struct {
		release string
		bi      *debug.BuildInfo
		want    string
	}{
		"Release":  {"v1.2.0", stamped, "worker v1.2.0 commit 4b8d96aebf69c7fed66369a6e5b2539487a57846 (2026-12-01T08:35:02Z) with uncommitted changes, go"},
		"Checkout": {"", stamped, "worker devel commit 4b8d96aebf69c7fed66369a6e5b2539487a57846 (2026-12-01T08:35:02Z) with uncommitted changes, go"},
		"GoInstall": {"", &debug.BuildInfo{Main: debug.Module{Version: "v0.3.1"}},
			"worker v0.3.1 commit unknown (built without VCS information), go"},
		"NoBuildInfo": {"", nil, "worker devel commit unknown (built without VCS information), go"},
	} {
		if got := describeVersion("worker", tc.release, tc.bi); !strings.HasPrefix(got, tc.want) {
			t.Errorf("%s: %q, want it to start with %q", name, got, tc.want)
		}
	}
}
