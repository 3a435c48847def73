package api_test

import (
	"os/exec"
	"strings"
	"testing"
)

// The wire types, the webhook signature and the cron parser are leaves: a receiver or a
// generated client imports them without the server's dependencies (pgx,
// migrations) or any other package of ours.
func TestLeavesImportOnlyTheStandardLibrary(t *testing.T) {
	const module = "github.com/leasehold/leasehold/"
	leaves := []string{module + "api", module + "webhooksig", module + "cron", module + "role"}
	for _, leaf := range leaves {
		out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}} {{.Standard}}", leaf).CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps %s: %v\n%s", leaf, err, out)
		}
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			path, std, _ := strings.Cut(line, " ")
			if path == leaf {
				continue
			}
			if std != "true" {
				t.Errorf("%s imports %s, which is not the standard library", leaf, path)
			}
		}
	}
}
