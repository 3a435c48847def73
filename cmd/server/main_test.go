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

// --help (before or after other flags) and `server help` print the usage
// with every flag, and succeed.
func TestHelpListsFlagsAndSucceeds(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"-h"}, {"help"}, {"--demo", "--help"}} {
		var err error
		out := captureStdout(t, func() { err = run(args) })
		if err != nil {
			t.Fatalf("run(%q) = %v, want nil", args, err)
		}
		for _, want := range []string{"server migrate", "-addr", "-artifacts", "-demo", "-migrate", "LEASEHOLD_"} {
			if !strings.Contains(out, want) {
				t.Errorf("run(%q) printed no %q:\n%s", args, want, out)
			}
		}
	}
}
