package worker

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime/multipart"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/leasehold/leasehold/queue"
)

// Remote is the Backend of a worker that reaches only the server, over
// HTTP(S): a phone's host behind a home router. It answers the same
// errors as Direct: 409 is queue.ErrLeaseLost, 404 queue.ErrNotFound.
//
// Writes are retried with backoff through dropped connections and a
// restarting server (5xx, 429), until the caller's context ends; the
// heartbeat's context ends before the lease could have run out, so a
// worker cut off from the server fences itself in time.
type Remote struct {
	base   *url.URL
	token  string
	client *http.Client
	log    *slog.Logger
	// ClaimWait is how long an empty claim waits on the server for a new
	// job (long polling). Default 25s.
	ClaimWait time.Duration
}

// NewRemote returns a Remote for the server at serverURL with a worker
// token.
func NewRemote(serverURL, token string, logger *slog.Logger) (*Remote, error) {
	u, err := url.Parse(strings.TrimRight(serverURL, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("--server-url %q: want http(s)://host[:port]", serverURL)
	}
	if token == "" {
		return nil, errors.New("--token is required with --server-url (server token create --role worker --name NAME)")
	}
	if logger == nil {
		logger = slog.Default()
	}
	return &Remote{base: u, token: token, client: &http.Client{}, log: logger, ClaimWait: 25 * time.Second}, nil
}

// ErrUnauthorized means the server refused the token (unknown or revoked).
var ErrUnauthorized = errors.New("the server refused the worker token (unknown or revoked)")

// statusError is an answer the server gave that retrying cannot change.
type statusError struct {
	status int
	msg    string
}

func (e *statusError) Error() string { return fmt.Sprintf("server answered %d: %s", e.status, e.msg) }

// Whoami returns the worker identity the server gives this token. It waits
// for a server that is not up yet; a refused token is ErrUnauthorized.
func (r *Remote) Whoami(ctx context.Context) (string, error) {
	var out struct {
		WorkerID string `json:"worker_id"`
	}
	err := r.call(ctx, http.MethodGet, "/api/v1/worker/whoami", nil, &out, true)
	return out.WorkerID, err
}

// Claim implements Backend, waiting up to ClaimWait on the server.
func (r *Remote) Claim(ctx context.Context, p queue.ClaimParams) ([]queue.Job, error) {
	var out struct {
		Jobs []queue.Job `json:"jobs"`
	}
	body := map[string]any{
		"queues": p.Queues, "devices": p.Devices, "limit": p.Limit,
		"lease_ms": p.Lease.Milliseconds(), "wait_ms": r.ClaimWait.Milliseconds(),
	}
	// Not retried: a claim whose answer was lost leased jobs nobody runs,
	// which the reaper takes back; the worker's loop simply claims again.
	err := r.call(ctx, http.MethodPost, "/api/v1/worker/claim", body, &out, false)
	return out.Jobs, err
}

// Heartbeat implements Backend.
func (r *Remote) Heartbeat(ctx context.Context, l queue.Lease) (queue.HeartbeatResult, error) {
	var out struct {
		LeaseUntil      time.Time `json:"lease_until"`
		CancelRequested bool      `json:"cancel_requested"`
		RemainingMs     int64     `json:"remaining_ms"`
	}
	err := r.call(ctx, http.MethodPost, r.jobPath(l, "heartbeat"), leaseBody(l, nil), &out, true)
	return queue.HeartbeatResult{
		LeaseUntil: out.LeaseUntil, CancelRequested: out.CancelRequested,
		Remaining: time.Duration(out.RemainingMs) * time.Millisecond,
	}, err
}

// Complete implements Backend.
func (r *Remote) Complete(ctx context.Context, l queue.Lease, result json.RawMessage) (queue.Job, error) {
	return r.jobWrite(ctx, l, "complete", map[string]any{"result": result})
}

// CompleteMany implements Backend, one request per completion.
func (r *Remote) CompleteMany(ctx context.Context, cs []queue.Completion) ([]error, error) {
	errs := make([]error, len(cs))
	for i, c := range cs {
		_, errs[i] = r.Complete(ctx, c.Lease, c.Result)
	}
	return errs, nil
}

// Fail implements Backend.
func (r *Remote) Fail(ctx context.Context, l queue.Lease, msg string, retryable bool) (queue.Job, error) {
	return r.jobWrite(ctx, l, "fail", map[string]any{"error": msg, "retryable": retryable})
}

// Release implements Backend.
func (r *Remote) Release(ctx context.Context, l queue.Lease) (queue.Job, error) {
	return r.jobWrite(ctx, l, "release", nil)
}

// AckCancel implements Backend.
func (r *Remote) AckCancel(ctx context.Context, l queue.Lease) (queue.Job, error) {
	return r.jobWrite(ctx, l, "cancelled", nil)
}

// Progress implements Backend.
func (r *Remote) Progress(ctx context.Context, l queue.Lease, fraction float64, message string) error {
	return r.call(ctx, http.MethodPost, r.jobPath(l, "progress"),
		leaseBody(l, map[string]any{"progress": fraction, "message": message}), nil, true)
}

// StartEffect implements Backend.
func (r *Remote) StartEffect(ctx context.Context, l queue.Lease, key string) (queue.EffectStart, error) {
	var out queue.EffectStart
	err := r.call(ctx, http.MethodPost, r.jobPath(l, "effects"),
		leaseBody(l, map[string]any{"action": "start", "key": key}), &out, true)
	return out, err
}

// FinishEffect implements Backend.
func (r *Remote) FinishEffect(ctx context.Context, l queue.Lease, key string, result json.RawMessage) error {
	return r.call(ctx, http.MethodPost, r.jobPath(l, "effects"),
		leaseBody(l, map[string]any{"action": "finish", "key": key, "result": result}), nil, true)
}

// WorkerSeen implements Backend; the server knows the worker by its token.
func (r *Remote) WorkerSeen(ctx context.Context, _ string, devices, queues []string) error {
	return r.call(ctx, http.MethodPost, "/api/v1/worker/presence",
		map[string]any{"devices": devices, "queues": queues}, nil, false)
}

// UploadArtifact implements Backend: the file is streamed as multipart,
// lease_token first, never held in memory. Not retried (the reader is
// consumed); an artifact is worth less than the attempt.
func (r *Remote) UploadArtifact(ctx context.Context, l queue.Lease, name string, body io.Reader) (queue.Artifact, error) {
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	go func() {
		err := mw.WriteField("lease_token", strconv.FormatInt(l.Token, 10))
		if err == nil {
			var part io.Writer
			if part, err = mw.CreateFormFile("file", name); err == nil {
				if _, err = io.Copy(part, body); err == nil {
					err = mw.Close()
				}
			}
		}
		pw.CloseWithError(err)
	}()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.base.String()+r.jobPath(l, "artifacts"), pr)
	if err != nil {
		pr.Close()
		return queue.Artifact{}, err
	}
	req.Header.Set("Content-Type", mw.FormDataContentType())
	var out queue.Artifact
	err = r.do(req, &out)
	pr.Close()
	return out, err
}

func (r *Remote) jobWrite(ctx context.Context, l queue.Lease, action string, fields map[string]any) (queue.Job, error) {
	var job queue.Job
	err := r.call(ctx, http.MethodPost, r.jobPath(l, action), leaseBody(l, fields), &job, true)
	return job, err
}

func (r *Remote) jobPath(l queue.Lease, action string) string {
	return fmt.Sprintf("/api/v1/worker/jobs/%d/%s", l.JobID, action)
}

func leaseBody(l queue.Lease, fields map[string]any) map[string]any {
	body := map[string]any{"lease_token": l.Token}
	for k, v := range fields {
		body[k] = v
	}
	return body
}

// call sends a JSON request and decodes the answer into out. With retry,
// transport errors and 5xx/429 answers are retried with backoff until ctx
// ends.
func (r *Remote) call(ctx context.Context, method, path string, body, out any, retry bool) error {
	var payload []byte
	if body != nil {
		var err error
		if payload, err = json.Marshal(body); err != nil {
			return fmt.Errorf("encoding request: %w", err)
		}
	}
	delay := 100 * time.Millisecond
	for {
		req, err := http.NewRequestWithContext(ctx, method, r.base.String()+path, bytes.NewReader(payload))
		if err != nil {
			return fmt.Errorf("building request: %w", err)
		}
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		err = r.do(req, out)
		var se *statusError
		transient := err != nil && ctx.Err() == nil &&
			(!errors.As(err, &se) || se.status >= 500 || se.status == http.StatusTooManyRequests) &&
			!errors.Is(err, queue.ErrLeaseLost) && !errors.Is(err, queue.ErrNotFound) && !errors.Is(err, ErrUnauthorized)
		if !retry || !transient {
			return err
		}
		r.log.Warn("server unreachable; retrying", "path", path, "err", err, "retry_in", delay)
		select {
		case <-ctx.Done():
			return errors.Join(err, ctx.Err())
		case <-time.After(delay):
		}
		delay = min(delay*2, 2*time.Second)
	}
}

func (r *Remote) do(req *http.Request, out any) error {
	req.Header.Set("Authorization", "Bearer "+r.token)
	req.Header.Set("User-Agent", "leasehold-worker")
	resp, err := r.client.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", req.Method, req.URL.Path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return fmt.Errorf("%s %s: reading answer: %w", req.Method, req.URL.Path, err)
	}
	if resp.StatusCode >= 300 {
		var e struct {
			Error string `json:"error"`
		}
		_ = json.Unmarshal(raw, &e)
		switch {
		case resp.StatusCode == http.StatusConflict && e.Error == "lease lost":
			return queue.ErrLeaseLost
		case resp.StatusCode == http.StatusNotFound && strings.Contains(req.URL.Path, "/jobs/"):
			return queue.ErrNotFound
		case resp.StatusCode == http.StatusUnauthorized:
			return ErrUnauthorized
		}
		return &statusError{status: resp.StatusCode, msg: cmp.Or(e.Error, strings.TrimSpace(string(raw)))}
	}
	if out != nil && resp.StatusCode != http.StatusNoContent {
		if err := json.Unmarshal(raw, out); err != nil {
			return fmt.Errorf("%s %s: decoding answer: %w", req.Method, req.URL.Path, err)
		}
	}
	return nil
}
