package cli

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// logOutput is what a test logger has written out. logWriter writes to
// its output only while holding its lock, the flush timer's goroutine
// included, so the test reads it under the same lock.
type logOutput struct {
	w *logWriter
	b bytes.Buffer
}

func (o *logOutput) String() string {
	o.w.mu.Lock()
	defer o.w.mu.Unlock()
	return o.b.String()
}

func newTestLogger() (*slog.Logger, *logOutput) {
	out := &logOutput{}
	out.w = newLogWriter(&out.b)
	return slog.New(flushingHandler{slog.NewTextHandler(out.w, nil), out.w}), out
}

// On the bubble's clock: a flush interval passes exactly, and
// synctest.Wait lets the flush timer's goroutine finish first.
func TestLogLinesWaitAtMostAFlushInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		logger, out := newTestLogger()
		logger.Info("first", "n", 1)
		logger.With("job_id", 7).Info("second")
		if got := out.String(); got != "" {
			t.Fatalf("written before the flush: %q", got)
		}
		time.Sleep(logFlushEvery)
		synctest.Wait()
		if !strings.Contains(out.String(), "second") {
			t.Fatalf("not written within a flush interval (%v): %q", logFlushEvery, out.String())
		}
		if got := out.String(); strings.Index(got, "first") > strings.Index(got, "second") || !strings.Contains(got, "job_id=7") {
			t.Errorf("lines out of order or changed: %q", got)
		}
		// And again after a flush: the next line schedules its own.
		logger.Info("third")
		time.Sleep(logFlushEvery)
		synctest.Wait()
		if !strings.Contains(out.String(), "third") {
			t.Fatalf("a line after a flush was never written: %q", out.String())
		}
	})
}

func TestWarningsAreWrittenAtOnce(t *testing.T) {
	logger, out := newTestLogger()
	logger = logger.With("worker", "w1")
	logger.Info("before")
	logger.Warn("lease lost")
	got := out.String()
	if !strings.Contains(got, "before") || !strings.Contains(got, "lease lost") || !strings.Contains(got, "worker=w1") {
		t.Fatalf("a warning and what came before it must be out at once: %q", got)
	}
}

func TestFlushLogAndLongLines(t *testing.T) {
	logger, out := newTestLogger()
	long := strings.Repeat("x", 2*logBufferSize)
	logger.Info("short")
	logger.Info("long", "v", long)
	if got := out.String(); !strings.Contains(got, "short") || !strings.Contains(got, long) {
		t.Fatalf("a line longer than the buffer must be written at once, after what waited: %d bytes", len(got))
	}
	logger.Info("last")
	FlushLog(logger)
	if !strings.HasSuffix(out.String(), "msg=last\n") {
		t.Fatalf("FlushLog left a line behind: %q", out.String()[len(out.String())-40:])
	}
	FlushLog(slog.New(slog.DiscardHandler)) // any logger
}

// Durations read as "30s" in both formats, in a group and through With,
// and a value that is not a duration keeps its JSON type.
func TestLogDurationsAsStrings(t *testing.T) {
	for _, format := range []string{"json", "text"} {
		t.Run(format, func(t *testing.T) {
			out := &logOutput{}
			out.w = newLogWriter(&out.b)
			logger := newLogger(out.w, format, slog.LevelInfo)
			logger.With("lease", 30*time.Second).Info("claimed",
				slog.Group("timing", "heartbeat", 10*time.Second+500*time.Millisecond), "attempt", 3)
			FlushLog(logger)
			got := out.String()
			want := []string{`"lease":"30s"`, `"heartbeat":"10.5s"`, `"attempt":3`}
			if format == "text" {
				want = []string{"lease=30s", "timing.heartbeat=10.5s", "attempt=3"}
			}
			for _, w := range want {
				if !strings.Contains(got, w) {
					t.Errorf("want %s in %s", w, got)
				}
			}
			if strings.Contains(got, "30000000000") {
				t.Errorf("a duration in nanoseconds: %s", got)
			}
		})
	}
}
