package e2e

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha512"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// axe-core, the accessibility checker the browser tests run on each page,
// comes from the npm registry at this version (`npm pack`), checked
// against the registry's integrity hash and kept in the user's cache
// directory. It is evaluated in the page through the DevTools protocol:
// nothing is loaded from elsewhere, and the page's CSP is not loosened.
const (
	axeVersion   = "4.10.3"
	axeIntegrity = "sha512-Xm7bpRXnDSX2YE2YFfBk2FnF0ep6tmG7xPh8iHee8MIcrgq762Nkce856dYtJYLkuIoYZvGfTs/PbZhideTcEg=="
)

// axeSource returns axe.min.js. It fails the test when axe-core cannot be
// had on a machine that has npm or in CI, and skips it only where
// neither holds.
func axeSource(t *testing.T) string {
	t.Helper()
	cache, err := os.UserCacheDir()
	if err != nil {
		t.Fatalf("axe-core: no user cache directory: %v", err)
	}
	tgz := filepath.Join(cache, "leasehold", "axe-core-"+axeVersion+".tgz")
	b, err := os.ReadFile(tgz)
	if err != nil || checkIntegrity(b) != nil {
		b = axeFetch(t, cache, tgz)
	}
	src, err := axeExtract(b)
	if err != nil {
		t.Fatalf("axe-core %s: %v", axeVersion, err)
	}
	return src
}

func axeFetch(t *testing.T, cache, tgz string) []byte {
	t.Helper()
	npm, err := exec.LookPath("npm")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("axe-core: npm missing (%v): .ci/run installs it", err)
		}
		t.Skip("axe-core: npm not installed (apt-get install npm)")
	}
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, npm, "pack", "axe-core@"+axeVersion, "--pack-destination", dir, "--silent", "--no-audit", "--no-fund")
	cmd.Env = append(os.Environ(), "npm_config_cache="+filepath.Join(cache, "npm"))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("axe-core: npm pack axe-core@%s: %v\n%s", axeVersion, err, out)
	}
	b, err := os.ReadFile(filepath.Join(dir, "axe-core-"+axeVersion+".tgz"))
	if err != nil {
		t.Fatalf("axe-core: %v", err)
	}
	if err := checkIntegrity(b); err != nil {
		t.Fatalf("axe-core: %v", err)
	}
	if err := os.MkdirAll(filepath.Dir(tgz), 0o755); err != nil {
		t.Fatalf("axe-core: %v", err)
	}
	tmp := tgz + ".tmp" + fmt.Sprint(os.Getpid())
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		t.Fatalf("axe-core: %v", err)
	}
	if err := os.Rename(tmp, tgz); err != nil {
		t.Fatalf("axe-core: %v", err)
	}
	return b
}

func checkIntegrity(b []byte) error {
	sum := sha512.Sum512(b)
	if got := "sha512-" + base64.StdEncoding.EncodeToString(sum[:]); got != axeIntegrity {
		return fmt.Errorf("the package's hash is %s, want %s", got, axeIntegrity)
	}
	return nil
}

// axeExtract reads package/axe.min.js out of the package's tarball.
func axeExtract(tgz []byte) (string, error) {
	zr, err := gzip.NewReader(bytes.NewReader(tgz))
	if err != nil {
		return "", err
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return "", errors.New("no package/axe.min.js in the package")
		}
		if err != nil {
			return "", err
		}
		if h.Name == "package/axe.min.js" {
			b, err := io.ReadAll(tr)
			return string(b), err
		}
	}
}

// axeViolation is one rule axe-core found broken, with the elements.
type axeViolation struct {
	ID     string   `json:"id"`
	Impact string   `json:"impact"`
	Help   string   `json:"help"`
	Nodes  []string `json:"nodes"`
}

func (v axeViolation) String() string {
	return fmt.Sprintf("%s (%s): %s: %s", v.ID, v.Impact, v.Help, strings.Join(v.Nodes, "; "))
}

// axe runs axe-core's default rules on the page in the tab and returns
// what it found. A live refresh can replace nodes under a run: then it
// runs again.
func (b *browserEnv) axe(src string) []axeViolation {
	b.t.Helper()
	const runAxe = `axe.run(document, {resultTypes: ["violations"]}).then(r => JSON.stringify(r.violations.map(v => ({
		id: v.id, impact: v.impact || "", help: v.help,
		nodes: v.nodes.map(n => n.target.join(" ") + " — " + (n.failureSummary || "").replace(/\s+/g, " ")),
	}))))`
	var last error
	for range 3 {
		ctx, cancel := context.WithTimeout(b.ctx, 60*time.Second)
		// Evaluated as a script of its own, not through the page's eval,
		// which the CSP forbids.
		out, err := chromedp.Run(ctx, chromedp.Evaluate[string](`typeof axe`))
		if err == nil && out == "undefined" {
			_, err = chromedp.Run(ctx, chromedp.Evaluate[string](src+"\n;\"loaded\""))
		}
		if err == nil {
			out, err = chromedp.Run(ctx, chromedp.Evaluate[string](runAxe, chromedp.EvalAwaitPromise))
		}
		cancel()
		if err == nil {
			var vs []axeViolation
			if err := json.Unmarshal([]byte(out), &vs); err != nil {
				b.t.Fatalf("axe-core's answer: %v", err)
			}
			return vs
		}
		last = err
	}
	b.t.Fatalf("axe-core did not run: %v", last)
	return nil
}
