package workerapi

import (
	"errors"
	"io"
	"mime/multipart"
	"net/http"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/leasehold/leasehold/api"
	"github.com/leasehold/leasehold/artifact"
	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/web/httpx"
)

// leaseTokenHeader carries the lease token of an upload whose parts the
// worker cannot order (see UploadArtifact).
const leaseTokenHeader = api.LeaseTokenHeader

// multipartOverhead is what an upload may carry besides the file: part
// headers, boundaries and the lease_token field.
const multipartOverhead = 64 << 10

// UploadArtifact stores a screenshot or text file of the attempt
// that the lease token names: 201 with the artifact, 409 "lease lost" when
// the token is not current, 413 too large, 415 not an acceptable image
// or text, 400 for a malformed body.
//
// The body is multipart/form-data and is streamed, never buffered: the
// file goes straight to storage as it arrives, and its record is fenced by
// the lease. So the field lease_token must come BEFORE the part file (the
// order of the form's fields), or be sent in the X-Lease-Token header, in
// which case the file part may come first. Other parts are skipped.
func (h *Handler) UploadArtifact(c echo.Context) error {
	if h.artifacts == nil {
		return httpx.ErrNoArtifactStorage
	}
	id, err := httpx.JobID(c)
	if err != nil {
		return err
	}
	req := c.Request()
	req.Body = http.MaxBytesReader(c.Response(), req.Body, h.artifacts.Limits().MaxBytes()+multipartOverhead)
	mr, err := req.MultipartReader()
	if err != nil {
		return httpx.BadRequest("", "the body must be multipart/form-data with the fields lease_token and file: %v", err)
	}
	l := queue.Lease{JobID: id, WorkerID: workerName(c)}
	haveToken := false
	var step int32
	if v := req.Header.Get(leaseTokenHeader); v != "" {
		if l.Token, err = parseLeaseToken(v); err != nil {
			return err
		}
		haveToken = true
	}
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			return httpx.BadRequest("file", "is required: a part named file holding the artifact")
		}
		if err != nil {
			return uploadReadError(err)
		}
		switch part.FormName() {
		case api.ArtifactTokenField:
			v, err := io.ReadAll(io.LimitReader(part, 64))
			if err != nil {
				return uploadReadError(err)
			}
			tok, err := parseLeaseToken(string(v))
			if err != nil {
				return err
			}
			if haveToken && tok != l.Token {
				return httpx.BadRequest("lease_token", "differs from the %s header", leaseTokenHeader)
			}
			l.Token, haveToken = tok, true
		case api.ArtifactStepField:
			v, err := io.ReadAll(io.LimitReader(part, 64))
			if err != nil {
				return uploadReadError(err)
			}
			if step, err = parseStep(string(v)); err != nil {
				return err
			}
		case api.ArtifactFileField:
			if !haveToken {
				return httpx.BadRequest("lease_token", "must come before the file part, or be sent in the %s header", leaseTokenHeader)
			}
			return h.storeUpload(c, l, step, part)
		default:
			if _, err := io.Copy(io.Discard, part); err != nil {
				return uploadReadError(err)
			}
		}
	}
}

// storeUpload streams the file part into storage and answers.
func (h *Handler) storeUpload(c echo.Context, l queue.Lease, step int32, part *multipart.Part) error {
	body := &readTracker{r: part}
	a, err := h.artifacts.PutStep(c.Request().Context(), l, part.FileName(), step, body)
	var rejected *artifact.RejectedError
	switch {
	case body.err != nil:
		// The body broke off or was malformed: the client's doing.
		return uploadReadError(body.err)
	case errors.As(err, &rejected):
		return &httpx.Error{Status: http.StatusUnsupportedMediaType, Field: "file", Message: rejected.Reason}
	case errors.Is(err, artifact.ErrTooLarge):
		return &httpx.Error{Status: http.StatusRequestEntityTooLarge, Field: "file", Message: err.Error()}
	case err != nil:
		// queue.ErrLeaseLost is 409 "lease lost" (the queue has recorded
		// the refusal on the job), queue.ErrNotFound 404.
		return err
	}
	return c.JSON(http.StatusCreated, a.API())
}

// parseLeaseToken reads a lease token sent as text.
func parseLeaseToken(v string) (int64, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, httpx.BadRequest("lease_token", "is required")
	}
	tok, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, httpx.BadRequest("lease_token", "must be an integer")
	}
	return tok, nil
}

// uploadReadError answers a failure to read the request body: 413 past
// the body limit, 400 for anything else, which is a malformed or
// interrupted body.
func uploadReadError(err error) error {
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		return err
	}
	return httpx.BadRequest("", "malformed multipart body: %v", err)
}

// readTracker remembers the error of the reader it wraps, so that a body
// that breaks off is told apart from a storage failure.
type readTracker struct {
	r   io.Reader
	err error
}

func (t *readTracker) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	if err != nil && !errors.Is(err, io.EOF) {
		t.err = err
	}
	return n, err
}

// parseStep reads the step field: the attempt's step the artifact belongs
// to, an integer from 1 to queue.MaxStep.
func parseStep(v string) (int32, error) {
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil || n < 1 || n > queue.MaxStep {
		return 0, httpx.BadRequest(api.ArtifactStepField, "must be an integer from 1 to %d", queue.MaxStep)
	}
	return int32(n), nil
}
