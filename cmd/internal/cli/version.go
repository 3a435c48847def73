package cli

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

// version is the release version, set when building a release:
//
//	go build -ldflags "-X github.com/leasehold/leasehold/cmd/internal/cli.version=v1.2.0"
var version string

// Version describes this build for --version: the release version (from
// -ldflags, else the module version Go recorded, else "devel"), the commit
// it was built from and whether that checkout had uncommitted changes
// (from the VCS stamp of a go build in a git checkout), and the Go version
// and platform.
func Version(program string) string {
	bi, _ := debug.ReadBuildInfo()
	return describeVersion(program, version, bi)
}

func describeVersion(program, release string, bi *debug.BuildInfo) string {
	settings := map[string]string{}
	if bi != nil {
		for _, s := range bi.Settings {
			settings[s.Key] = s.Value
		}
		if release == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			release = bi.Main.Version
		}
	}
	if release == "" {
		release = "devel"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s", program, release)
	if rev := settings["vcs.revision"]; rev != "" {
		fmt.Fprintf(&b, " commit %s", rev)
		if t := settings["vcs.time"]; t != "" {
			fmt.Fprintf(&b, " (%s)", t)
		}
		if settings["vcs.modified"] == "true" {
			b.WriteString(" with uncommitted changes")
		}
	} else {
		b.WriteString(" commit unknown (built without VCS information)")
	}
	fmt.Fprintf(&b, ", %s %s/%s", runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return b.String()
}
