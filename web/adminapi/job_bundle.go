package adminapi

import (
	"archive/zip"
	"compress/flate"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"net"
	"net/http"
	"strconv"
	"syscall"

	"github.com/labstack/echo/v4"

	"github.com/leasehold/leasehold/api"
	"github.com/leasehold/leasehold/artifact"
	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/web/httpx"
)

// bundleFile is an artifact as attempt.json lists it: its metadata, and
// the entry of the zip that holds its bytes ("" when its file is missing).
type bundleFile struct {
	api.Artifact
	File string `json:"file"`
}

// bundleStep is a replay step in attempt.json (see queue.ReplaySteps).
type bundleStep struct {
	Step      int    `json:"step"`
	File      string `json:"file"`
	Artifact  int64  `json:"artifact_id"`
	ElapsedMS int64  `json:"elapsed_ms"`
	Message   string `json:"message"`
}

// attempt.json is the attempt as the API shows it ("attempt"), its
// timeline ("events"), its progress events alone ("progress"), its files
// ("artifacts", each with its entry in the zip, "" when its file is
// missing) and its replay steps ("steps"). It is written as it is read:
// the events a page at a time, each encoded straight into the zip, so
// that an attempt of 200 progress messages of 64 KB (or, written before
// the cap, 2,000) costs a page of them, not the whole manifest in memory.

// GetAttemptBundle streams one attempt as a zip: each artifact as
// NNN-KIND-NAME in upload order (a name any system unpacks as itself, see
// artifact.EntryName), then attempt.json. The archive is written straight
// to the response, file by file, and flushed after each: memory stays at
// copy buffers and a page of events whatever the attempt holds. Once the
// first byte is out the status cannot change, so a failure midway aborts
// the connection and the client sees a truncated (invalid) zip rather
// than a complete-looking one. A client that goes away midway is logged
// at info: that is not the server's failure.
func (h *Handler) GetAttemptBundle(c echo.Context) error {
	if h.artifacts == nil {
		return httpx.ErrNoArtifactStorage
	}
	id, err := httpx.JobID(c)
	if err != nil {
		return err
	}
	n, err := strconv.ParseInt(c.Param("n"), 10, 32)
	if err != nil || n < 1 {
		return httpx.BadRequest("n", "must be a positive integer (attempts count from 1)")
	}
	ctx := c.Request().Context()
	rec, err := h.queue.AttemptHistory(ctx, id, int32(n))
	switch {
	case errors.Is(err, queue.ErrNotFound):
		return &httpx.Error{Status: http.StatusNotFound, Message: "job not found"}
	case errors.Is(err, queue.ErrNoAttempt):
		return &httpx.Error{Status: http.StatusNotFound, Message: fmt.Sprintf("job %d has no attempt %d", id, n)}
	case err != nil:
		return err
	}

	name := fmt.Sprintf("job-%d-attempt-%d.zip", id, n)
	hdr := c.Response().Header()
	hdr.Set(echo.HeaderContentType, "application/zip")
	hdr.Set(echo.HeaderContentDisposition, mime.FormatMediaType("attachment", map[string]string{"filename": name}))
	hdr.Set(echo.HeaderXContentTypeOptions, "nosniff")
	hdr.Set("Cache-Control", "private, no-store") // a running attempt's bundle grows
	c.Response().WriteHeader(http.StatusOK)

	zw := zip.NewWriter(c.Response())
	// Fast compression: attempt.json of a long attempt is hundreds of
	// megabytes of text, and the default level made its bundle CPU-bound.
	zw.RegisterCompressor(zip.Deflate, func(out io.Writer) (io.WriteCloser, error) {
		return flate.NewWriter(out, flate.BestSpeed)
	})
	abort := func(what string, err error) {
		if clientGone(ctx, err) {
			h.logger.Info("attempt bundle: the client went away", "job_id", id, "attempt", n, "what", what, "err", err)
		} else {
			h.logger.Error("writing attempt bundle", "job_id", id, "attempt", n, "what", what, "err", err)
		}
		panic(http.ErrAbortHandler)
	}
	files := make(map[int64]string, len(rec.Artifacts))
	manifest := make([]bundleFile, 0, len(rec.Artifacts))
	for i, a := range rec.Artifacts {
		entry := artifact.EntryName(fmt.Sprintf("%03d-%s-", i+1, a.Kind), a.Name)
		switch err := h.bundleAdd(c, zw, entry, a); {
		case errors.Is(err, fs.ErrNotExist), errors.Is(err, queue.ErrNotFound):
			// The row outlived its file, or was pruned meanwhile.
			h.logger.Warn("attempt bundle: artifact file missing", "artifact_id", a.ID, "err", err)
			entry = ""
		case err != nil:
			abort(entry, err)
		}
		files[a.ID] = entry
		manifest = append(manifest, bundleFile{Artifact: a.API(), File: entry})
	}
	w, err := zw.CreateHeader(&zip.FileHeader{Name: "attempt.json", Method: zip.Deflate})
	if err != nil {
		abort("attempt.json", err)
	}
	if err := h.writeManifest(ctx, w, id, rec, manifest, files); err != nil {
		abort("attempt.json", err)
	}
	if err := zw.Close(); err != nil {
		abort("central directory", err)
	}
	return nil
}

// writeManifest writes attempt.json to w, its events as it reads them.
func (h *Handler) writeManifest(ctx context.Context, w io.Writer, jobID int64, rec queue.AttemptRecord,
	artifacts []bundleFile, files map[int64]string) error {
	j := &jsonWriter{w: w}
	j.raw("{\n")
	j.field("job_id", jobID, false)
	j.field("attempt", rec.Attempt.API(), false)
	number := rec.Attempt.Number
	for _, progressOnly := range []bool{false, true} {
		key := "events"
		if progressOnly {
			key = "progress"
		}
		j.open(key)
		if err := h.queue.AttemptEvents(ctx, jobID, number, progressOnly, func(e queue.Event) error {
			j.item(e.API())
			return j.err
		}); err != nil {
			return err
		}
		j.close(false)
	}
	j.open("artifacts")
	for _, a := range artifacts {
		j.item(a)
	}
	j.close(false)
	// The steps pair each screenshot with the progress before it: one more
	// pass over the progress events, a page at a time.
	j.open("steps")
	stepper := queue.NewReplayStepper(number, rec.Attempt.StartedAt, rec.Artifacts)
	i := 0
	emit := func(steps []queue.ReplayStep) {
		for _, st := range steps {
			i++
			j.item(bundleStep{Step: i, File: files[st.Shot.ID], Artifact: st.Shot.ID,
				ElapsedMS: st.Elapsed.Milliseconds(), Message: st.Message})
		}
	}
	if stepper.Pending() > 0 {
		err := h.queue.AttemptEvents(ctx, jobID, number, true, func(e queue.Event) error {
			emit(stepper.Event(e))
			if j.err == nil && stepper.Pending() == 0 {
				return errStepsDone // the rest of the events pair with no screenshot
			}
			return j.err
		})
		if err != nil && !errors.Is(err, errStepsDone) {
			return err
		}
	}
	emit(stepper.Rest())
	j.close(true)
	j.raw("}\n")
	return j.err
}

// errStepsDone ends the walk over the events once every step is formed.
var errStepsDone = errors.New("every screenshot has its step")

// jsonWriter writes one JSON object a member, or an array element, at a
// time; the first error sticks and ends the writing.
type jsonWriter struct {
	w     io.Writer
	err   error
	first bool // no element yet in the open array
}

func (j *jsonWriter) raw(s string) {
	if j.err == nil {
		_, j.err = io.WriteString(j.w, s)
	}
}

func (j *jsonWriter) value(v any, indent string) {
	if j.err != nil {
		return
	}
	b, err := json.MarshalIndent(v, indent, "  ")
	if err != nil {
		j.err = err
		return
	}
	_, j.err = j.w.Write(b)
}

func (j *jsonWriter) field(key string, v any, last bool) {
	j.raw("  " + strconv.Quote(key) + ": ")
	j.value(v, "  ")
	j.raw(map[bool]string{false: ",\n", true: "\n"}[last])
}

func (j *jsonWriter) open(key string) {
	j.raw("  " + strconv.Quote(key) + ": [")
	j.first = true
}

func (j *jsonWriter) item(v any) {
	if j.first {
		j.raw("\n    ")
	} else {
		j.raw(",\n    ")
	}
	j.first = false
	j.value(v, "    ")
}

func (j *jsonWriter) close(last bool) {
	if !j.first {
		j.raw("\n  ")
	}
	j.raw("]")
	j.raw(map[bool]string{false: ",\n", true: "\n"}[last])
}

// clientGone reports whether err is the client going away (the request's
// context ended, or the connection broke) rather than a failure here.
func clientGone(ctx context.Context, err error) bool {
	return ctx.Err() != nil || errors.Is(err, context.Canceled) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, net.ErrClosed)
}

// bundleAdd copies one artifact's file into the zip and flushes it to the
// client. Images are stored as they are (already compressed), text is
// deflated.
func (h *Handler) bundleAdd(c echo.Context, zw *zip.Writer, entry string, a queue.Artifact) error {
	_, f, err := h.artifacts.Open(c.Request().Context(), a.ID)
	if err != nil {
		return err
	}
	defer f.Close()
	method := zip.Store
	if a.Kind == queue.ArtifactText {
		method = zip.Deflate
	}
	w, err := zw.CreateHeader(&zip.FileHeader{Name: entry, Method: method, Modified: a.CreatedAt})
	if err != nil {
		return fmt.Errorf("zip entry: %w", err)
	}
	if _, err := io.Copy(w, f); err != nil {
		return fmt.Errorf("copying artifact %d: %w", a.ID, err)
	}
	if err := zw.Flush(); err != nil {
		return fmt.Errorf("flushing: %w", err)
	}
	c.Response().Flush()
	return nil
}
