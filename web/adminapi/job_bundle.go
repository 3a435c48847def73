package adminapi

import (
	"archive/zip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"net/http"
	"strconv"

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

// bundleManifest is attempt.json: the attempt as the API shows it, its
// timeline, its progress events alone, its files and its replay steps.
type bundleManifest struct {
	JobID     int64        `json:"job_id"`
	Attempt   api.Attempt  `json:"attempt"`
	Events    []api.Event  `json:"events"`
	Progress  []api.Event  `json:"progress"`
	Artifacts []bundleFile `json:"artifacts"`
	Steps     []bundleStep `json:"steps"`
}

// GetAttemptBundle streams one attempt as a zip: each artifact as
// NNN-KIND-NAME in upload order, then attempt.json. The archive is
// written straight to the response, file by file, and flushed after each:
// memory stays at copy buffers whatever the attempt holds. Once the first
// byte is out the status cannot change, so a failure midway aborts the
// connection and the client sees a truncated (invalid) zip rather than a
// complete-looking one.
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
	abort := func(what string, err error) {
		h.logger.Error("writing attempt bundle", "job_id", id, "attempt", n, "what", what, "err", err)
		panic(http.ErrAbortHandler)
	}
	files := make(map[int64]string, len(rec.Artifacts))
	m := bundleManifest{JobID: id, Attempt: rec.Attempt.API(), Events: []api.Event{}, Progress: []api.Event{},
		Artifacts: []bundleFile{}, Steps: []bundleStep{}}
	for i, a := range rec.Artifacts {
		entry := fmt.Sprintf("%03d-%s-%s", i+1, a.Kind, artifact.CleanName(a.Name))
		switch err := h.bundleAdd(c, zw, entry, a); {
		case errors.Is(err, fs.ErrNotExist), errors.Is(err, queue.ErrNotFound):
			// The row outlived its file, or was pruned meanwhile.
			h.logger.Warn("attempt bundle: artifact file missing", "artifact_id", a.ID, "err", err)
			entry = ""
		case err != nil:
			abort(entry, err)
		}
		files[a.ID] = entry
		m.Artifacts = append(m.Artifacts, bundleFile{Artifact: a.API(), File: entry})
	}
	for _, e := range rec.Events {
		ev := e.API()
		m.Events = append(m.Events, ev)
		if e.Type == "progress" {
			m.Progress = append(m.Progress, ev)
		}
	}
	for i, st := range queue.ReplaySteps(rec.Attempt.Number, rec.Attempt.StartedAt, rec.Events, rec.Artifacts) {
		m.Steps = append(m.Steps, bundleStep{Step: i + 1, File: files[st.Shot.ID], Artifact: st.Shot.ID,
			ElapsedMS: st.Elapsed.Milliseconds(), Message: st.Message})
	}
	w, err := zw.CreateHeader(&zip.FileHeader{Name: "attempt.json", Method: zip.Deflate})
	if err != nil {
		abort("attempt.json", err)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(m); err != nil {
		abort("attempt.json", err)
	}
	if err := zw.Close(); err != nil {
		abort("central directory", err)
	}
	return nil
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
