package adminapi

import (
	"errors"
	"io/fs"
	"mime"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/leasehold/leasehold/artifact"
	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/web/httpx"
)

// GetArtifact serves an artifact's bytes, to admin tokens and signed-in
// people (the dashboard shows screenshots from it).
//
// The bytes come from workers, so the answer is hardened for a browser
// that opens it directly: the stored Content-Type (PNG, JPEG, WebP or
// plain text; checked by content at upload) with nosniff, a CSP that lets
// nothing load or run, and text as a download, never rendered. Files are
// content-addressed, so they never change and can be cached for good.
func (h *Handler) GetArtifact(c echo.Context) error {
	if h.artifacts == nil {
		return httpx.ErrNoArtifactStorage
	}
	id, err := httpx.JobID(c)
	if err != nil {
		return err
	}
	a, f, err := h.artifacts.Open(c.Request().Context(), id)
	if errors.Is(err, queue.ErrNotFound) {
		return &httpx.Error{Status: http.StatusNotFound, Message: "artifact not found"}
	}
	if errors.Is(err, fs.ErrNotExist) {
		// The row outlived its file (removed by hand, or a lost disk).
		h.logger.Warn("artifact file missing", "artifact_id", id, "err", err)
		return &httpx.Error{Status: http.StatusNotFound, Message: "artifact file is missing"}
	}
	if err != nil {
		return err
	}
	defer f.Close()

	hdr := c.Response().Header()
	hdr.Set(echo.HeaderContentType, a.ContentType)
	hdr.Set(echo.HeaderXContentTypeOptions, "nosniff")
	hdr.Set(echo.HeaderContentSecurityPolicy, "default-src 'none'; sandbox")
	hdr.Set("Cache-Control", "private, max-age=31536000, immutable")
	hdr.Set("ETag", `"`+a.SHA256+`"`)
	disposition := "inline"
	if a.Kind == queue.ArtifactText {
		disposition = "attachment"
	}
	// FormatMediaType quotes the name, or encodes it (RFC 2231) when it is
	// not plain ASCII; it gives "" for what it cannot encode.
	if v := mime.FormatMediaType(disposition, map[string]string{"filename": artifact.CleanName(a.Name)}); v != "" {
		disposition = v
	}
	hdr.Set(echo.HeaderContentDisposition, disposition)
	// ServeContent answers Range, HEAD and If-None-Match from the file.
	w := &rangeRefusal{ResponseWriter: c.Response()}
	http.ServeContent(w, c.Request(), "", a.CreatedAt, f)
	if w.refused {
		// Only Content-Range ("bytes */SIZE") belongs to the refusal; the
		// rest described the bytes that are not sent.
		for _, k := range []string{echo.HeaderContentType, echo.HeaderContentDisposition, echo.HeaderContentLength, "Cache-Control", "ETag", echo.HeaderLastModified} {
			hdr.Del(k)
		}
		return &httpx.Error{Status: http.StatusRequestedRangeNotSatisfiable, Message: "requested range not satisfiable: the artifact is " + strconv.FormatInt(a.Size, 10) + " bytes"}
	}
	return nil
}

// rangeRefusal keeps http.ServeContent's plain-text 416 from the client,
// so that the refusal is answered as JSON like every other error.
type rangeRefusal struct {
	http.ResponseWriter
	refused bool
}

func (w *rangeRefusal) WriteHeader(status int) {
	if status == http.StatusRequestedRangeNotSatisfiable {
		w.refused = true
		return
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *rangeRefusal) Write(p []byte) (int, error) {
	if w.refused {
		return len(p), nil
	}
	return w.ResponseWriter.Write(p)
}
