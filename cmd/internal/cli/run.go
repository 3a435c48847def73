package cli

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

// SignalContext ends the context at the first SIGTERM or SIGINT, for a
// graceful shutdown, and exits the process at the second.
func SignalContext(logger *slog.Logger) (context.Context, func()) {
	ctx, cancel := context.WithCancel(context.Background())
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		sig := <-sigs
		logger.Info("signal: shutting down gracefully (send again to exit at once)", "signal", sig.String())
		cancel()
		sig = <-sigs
		logger.Warn("second signal: exiting at once", "signal", sig.String())
		FlushLog(logger)
		os.Exit(1)
	}()
	return ctx, func() { signal.Stop(sigs); cancel() }
}

// NewLogger returns a logger to stderr in format "text" or "json" that
// writes records of level and above. Lines below Warn may wait up to
// logFlushEvery in a buffer: call FlushLog before exiting.
func NewLogger(format string, level slog.Leveler) *slog.Logger {
	return newLogger(newLogWriter(os.Stderr), format, level)
}

func newLogger(w *logWriter, format string, level slog.Leveler) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level, ReplaceAttr: durationAsString}
	var h slog.Handler
	if format == "json" {
		h = slog.NewJSONHandler(w, opts)
	} else {
		h = slog.NewTextHandler(w, opts)
	}
	return slog.New(flushingHandler{h, w})
}

// durationAsString writes a time.Duration as "30s" rather than the
// JSON handler's bare nanoseconds ("lease":30000000000), which a person
// reading the log, or a query over it, would have to divide to read. The
// text handler already writes "30s"; both go through here so the two
// formats agree.
func durationAsString(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		a.Value = slog.StringValue(a.Value.Duration().String())
	}
	return a
}

// SplitList splits a comma-separated flag value, dropping empty parts.
func SplitList(s string) []string {
	var out []string
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	return out
}
