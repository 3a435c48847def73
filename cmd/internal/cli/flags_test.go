package cli

import (
	"bytes"
	"errors"
	"flag"
	"strings"
	"testing"
)

func newFlags() (*flag.FlagSet, *int, *string) {
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	n := fs.Int("concurrency", 1, "jobs held at once")
	q := fs.String("queues", "default", "queues to take jobs from")
	return fs, n, q
}

func TestEnvironmentSetsFlagsNotGiven(t *testing.T) {
	t.Setenv("LEASEHOLD_CONCURRENCY", "4")
	t.Setenv("LEASEHOLD_QUEUES", "from-env")
	fs, n, q := newFlags()
	var stdout, stderr bytes.Buffer
	if err := parseFlags(fs, []string{"--queues", "from-flag"}, &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	if *n != 4 || *q != "from-flag" {
		t.Fatalf("concurrency %d, queues %q: want 4 from the environment and from-flag from the command line", *n, *q)
	}
}

// An operator who set LEASEHOLD_CONCURRENCY=four must be told which
// variable and which value, not only "parse error".
func TestEnvironmentErrorNamesVariableAndValue(t *testing.T) {
	t.Setenv("LEASEHOLD_CONCURRENCY", "four")
	fs, _, _ := newFlags()
	var stdout, stderr bytes.Buffer
	err := parseFlags(fs, nil, &stdout, &stderr)
	if err == nil {
		t.Fatal("LEASEHOLD_CONCURRENCY=four was accepted")
	}
	for _, want := range []string{"LEASEHOLD_CONCURRENCY", `"four"`, "concurrency"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %s", err, want)
		}
	}
}

func TestHelpGoesToStdout(t *testing.T) {
	for _, arg := range []string{"-h", "-help", "--help"} {
		t.Run(arg, func(t *testing.T) {
			fs, _, _ := newFlags()
			var stdout, stderr bytes.Buffer
			err := parseFlags(fs, []string{arg}, &stdout, &stderr)
			if !errors.Is(err, flag.ErrHelp) {
				t.Fatalf("err = %v, want flag.ErrHelp", err)
			}
			if !strings.Contains(stdout.String(), "-concurrency") || !strings.Contains(stdout.String(), "-queues") {
				t.Fatalf("help on stdout does not list the flags:\n%s", stdout.String())
			}
			if stderr.Len() != 0 {
				t.Fatalf("help wrote to stderr: %q", stderr.String())
			}
		})
	}
}

func TestBadFlagGoesToStderr(t *testing.T) {
	fs, _, _ := newFlags()
	var stdout, stderr bytes.Buffer
	if err := parseFlags(fs, []string{"--no-such-flag"}, &stdout, &stderr); err == nil || errors.Is(err, flag.ErrHelp) {
		t.Fatalf("err = %v, want an error", err)
	}
	if stdout.Len() != 0 || !strings.Contains(stderr.String(), "no-such-flag") {
		t.Fatalf("stdout %q, stderr %q: a bad flag belongs on stderr", stdout.String(), stderr.String())
	}
}
