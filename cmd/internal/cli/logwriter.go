package cli

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"time"
)

// logFlushEvery bounds how long a log line waits in logWriter's buffer.
const logFlushEvery = 100 * time.Millisecond

// logBufferSize is how much logWriter holds before it writes at once.
const logBufferSize = 64 << 10

// logWriter buffers log lines, writing them out logFlushEvery after the
// first one waiting, when the buffer fills, and at Flush. A busy worker
// logs a line per job: one write(2) per line was a tenth of its CPU at
// thousands of jobs a second.
type logWriter struct {
	mu      sync.Mutex
	out     io.Writer
	buf     []byte
	pending bool // a flush is scheduled
}

func newLogWriter(out io.Writer) *logWriter {
	return &logWriter{out: out, buf: make([]byte, 0, logBufferSize)}
}

func (w *logWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.buf)+len(p) > cap(w.buf) {
		w.flushLocked()
		if len(p) > cap(w.buf) {
			return w.out.Write(p)
		}
	}
	w.buf = append(w.buf, p...)
	if !w.pending {
		w.pending = true
		time.AfterFunc(logFlushEvery, w.Flush)
	}
	return len(p), nil
}

// Flush writes out what is buffered.
func (w *logWriter) Flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.flushLocked()
	w.pending = false
}

func (w *logWriter) flushLocked() {
	if len(w.buf) > 0 {
		_, _ = w.out.Write(w.buf) // nowhere to report a failed log write
		w.buf = w.buf[:0]
	}
}

// flushingHandler writes out a record of level Warn or above at once,
// with what was buffered before it: a warning is what one reads after a
// crash.
type flushingHandler struct {
	slog.Handler
	w *logWriter
}

func (h flushingHandler) Handle(ctx context.Context, r slog.Record) error {
	err := h.Handler.Handle(ctx, r)
	if r.Level >= slog.LevelWarn {
		h.w.Flush()
	}
	return err
}

func (h flushingHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return flushingHandler{h.Handler.WithAttrs(attrs), h.w}
}

func (h flushingHandler) WithGroup(name string) slog.Handler {
	return flushingHandler{h.Handler.WithGroup(name), h.w}
}

// FlushLog writes out what logger (from NewLogger) holds buffered. Call
// it before the process exits.
func FlushLog(logger *slog.Logger) {
	if h, ok := logger.Handler().(flushingHandler); ok {
		h.w.Flush()
	}
}
