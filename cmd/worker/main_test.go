package main

import (
	"io"
	"os"
	"strings"
	"testing"
)

// captureStdout runs fn with os.Stdout redirected and returns what it wrote.
func captureStdout(t *testing.T, fn func()) string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	saved := os.Stdout
	os.Stdout = w
	defer func() { os.Stdout = saved }()
	done := make(chan string)
	go func() { b, _ := io.ReadAll(r); done <- string(b) }()
	fn()
	w.Close()
	return <-done
}

// --help is an answer, not a failure: usage and every flag on stdout, and
// run returns nil (main then exits 0).
func TestHelpListsFlagsAndSucceeds(t *testing.T) {
	for _, arg := range []string{"-h", "--help"} {
		var err error
		out := captureStdout(t, func() { err = run([]string{arg}) })
		if err != nil {
			t.Fatalf("run(%s) = %v, want nil", arg, err)
		}
		for _, want := range []string{"usage: worker", "-concurrency", "-server-url", "-lease", "LEASEHOLD_"} {
			if !strings.Contains(out, want) {
				t.Errorf("run(%s) printed no %q:\n%s", arg, want, out)
			}
		}
	}
}

// An SSL_CERT_FILE the worker cannot use stops it at start with the file
// named, rather than every request failing as "unknown authority".
func TestCertFileChecked(t *testing.T) {
	dir := t.TempDir()
	missing := dir + "/caddy-root.crt"
	if err := checkCertFile(missing); err == nil || !strings.Contains(err.Error(), missing) || !strings.Contains(err.Error(), "SSL_CERT_FILE") {
		t.Errorf("missing file: %v", err)
	}
	garbage := dir + "/garbage.crt"
	if err := os.WriteFile(garbage, []byte("not a certificate\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := checkCertFile(garbage); err == nil || !strings.Contains(err.Error(), "no PEM certificate") {
		t.Errorf("file without a certificate: %v", err)
	}
	if err := checkCertFile(""); err != nil {
		t.Errorf("unset: %v", err)
	}
	// A real root, as Caddy writes it.
	if err := checkCertFile("testdata/root.crt"); err != nil {
		t.Errorf("a PEM root: %v", err)
	}
}
