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

	"github.com/leasehold/leasehold/api"
	"github.com/leasehold/leasehold/queue"
)

// Remote is the Backend of a worker that reaches only the server, over
// HTTP(S): a phone's host behind a home router. It answers the same
// errors as Direct: code lease_lost is queue.ErrLeaseLost, not_found
// queue.ErrNotFound (it decides on the answer's code, never its text).
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
	// unreachable thins out the "server unreachable" warnings of an
	// outage, which every request in flight would give.
	unreachable *outageLog
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
	return &Remote{base: u, token: token, client: &http.Client{}, log: logger, ClaimWait: 25 * time.Second,
		unreachable: newOutageLog(logger, "server unreachable; retrying", "server reachable again")}, nil
}

// claimSlack is how much longer than its long poll a claim may take
// before the worker gives up on the answer.
const claimSlack = 15 * time.Second

// ErrUnauthorized means the server refused the token (unknown or revoked).
var ErrUnauthorized = errors.New("the server refused the worker token (unknown or revoked)")

// statusError is an answer the server gave that retrying cannot change,
// or (5xx, 429) may, after retryAfter when the server said.
type statusError struct {
	status     int
	msg        string
	retryAfter time.Duration
}

func (e *statusError) Error() string { return fmt.Sprintf("server answered %d: %s", e.status, e.msg) }

// unreachableError is a request that got no answer while its context was
// still live: an outage to wait out, whatever ended the try.
type unreachableError struct{ err error }

func (e *unreachableError) Error() string { return e.err.Error() }
func (e *unreachableError) Unwrap() error { return e.err }

// Whoami returns the worker identity the server gives this token. It waits
// for a server that is not up yet; a refused token is ErrUnauthorized.
func (r *Remote) Whoami(ctx context.Context) (string, error) {
	var out api.WhoamiResponse
	err := r.call(ctx, http.MethodGet, api.WhoamiPath, nil, &out, true)
	return out.WorkerID, err
}

// Claim implements Backend, waiting up to ClaimWait on the server. The
// server says how long it waited before the claim statement that leased
// the jobs (Claim.Waited) and how long each lease had then.
func (r *Remote) Claim(ctx context.Context, p queue.ClaimParams) (Claim, error) {
	var out api.ClaimResponse
	body := api.ClaimRequest{
		Queues: p.Queues, Devices: orEmpty(p.Devices), Limit: &p.Limit, WaitMs: r.ClaimWait.Milliseconds(),
	}
	if p.Lease != 0 { // 0 is queue's default lease: left out, the server's
		ms := p.Lease.Milliseconds()
		body.LeaseMs = &ms
	}
	// Not retried: a claim whose answer was lost leased jobs nobody runs,
	// which the reaper takes back; the worker's loop simply claims again.
	// Only a 429 is: the server refused it at once, leasing nothing,
	// because this token has as many claims open as it may (polls the
	// server still holds for connections this worker dropped, or another
	// process with the same token). It waits as told, longer each time.
	var delay time.Duration
	for {
		err := r.claimOnce(ctx, body, &out)
		var se *statusError
		if !errors.As(err, &se) || se.status != http.StatusTooManyRequests {
			if err != nil {
				return Claim{}, err
			}
			break
		}
		delay = min(max(se.retryAfter, 2*delay, time.Second), maxRetryAfter)
		r.log.Warn("the server refused the claim: this token has too many open; retrying", "err", err, "retry_in", delay)
		select {
		case <-ctx.Done():
			return Claim{}, errors.Join(err, ctx.Err())
		case <-time.After(delay):
		}
	}
	// Handed over whatever the server says: confirming costs a heartbeat,
	// and a server from before hand-overs (handover_ms 0) takes it too.
	claim := Claim{Jobs: make([]ClaimedJob, len(out.Jobs)), Waited: time.Duration(max(out.WaitedMs, 0)) * time.Millisecond, Handover: true}
	for i, j := range out.Jobs {
		job := queue.JobFromAPI(j.Job)
		remaining := time.Duration(j.LeaseRemainingMs) * time.Millisecond
		if j.LeaseRemainingMs <= 0 {
			remaining = dbLease(job) // a server from before lease_remaining_ms
		}
		claim.Jobs[i] = ClaimedJob{Job: job, Remaining: remaining}
	}
	return claim, nil
}

// claimOnce sends one claim, bounded: on a network that went silent (no
// reset) the answer may never come, and the worker must claim again once
// it is back.
func (r *Remote) claimOnce(ctx context.Context, body api.ClaimRequest, out *api.ClaimResponse) error {
	ctx, cancel := context.WithTimeout(ctx, r.ClaimWait+claimSlack)
	defer cancel()
	return r.call(ctx, http.MethodPost, api.ClaimPath, body, out, false)
}

// maxRetryAfter bounds how long a Retry-After the worker obeys.
const maxRetryAfter = 30 * time.Second

// Heartbeat implements Backend.
func (r *Remote) Heartbeat(ctx context.Context, l queue.Lease) (queue.HeartbeatResult, error) {
	var out api.HeartbeatResponse
	err := r.call(ctx, http.MethodPost, jobPath(l, api.ActionHeartbeat), api.Lease(l.Token), &out, true)
	return queue.HeartbeatResultFromAPI(out), err
}

// Complete implements Backend.
func (r *Remote) Complete(ctx context.Context, l queue.Lease, result json.RawMessage) (queue.Job, error) {
	return r.jobWrite(ctx, l, api.ActionComplete, api.CompleteRequest{LeaseRequest: api.Lease(l.Token), Result: result})
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
	return r.jobWrite(ctx, l, api.ActionFail, api.FailRequest{LeaseRequest: api.Lease(l.Token), Error: clip(msg), Retryable: &retryable})
}

// Release implements Backend.
func (r *Remote) Release(ctx context.Context, l queue.Lease) (queue.Job, error) {
	return r.jobWrite(ctx, l, api.ActionRelease, api.Lease(l.Token))
}

// AckCancel implements Backend.
func (r *Remote) AckCancel(ctx context.Context, l queue.Lease) (queue.Job, error) {
	return r.jobWrite(ctx, l, api.ActionCancelled, api.Lease(l.Token))
}

// Progress implements Backend.
func (r *Remote) Progress(ctx context.Context, l queue.Lease, step int32, fraction float64, message string) error {
	req := api.ProgressRequest{LeaseRequest: api.Lease(l.Token), Progress: fraction, Message: clip(message)}
	if step != 0 {
		s := int64(step)
		req.Step = &s
	}
	return r.call(ctx, http.MethodPost, jobPath(l, api.ActionProgress), req, nil, true)
}

// Usage implements Backend.
func (r *Remote) Usage(ctx context.Context, l queue.Lease, u queue.Usage) error {
	req := api.UsageRequest{LeaseRequest: api.Lease(l.Token), Usage: u.API()}
	return r.call(ctx, http.MethodPost, jobPath(l, api.ActionUsage), req, nil, true)
}

// StartEffect implements Backend.
func (r *Remote) StartEffect(ctx context.Context, l queue.Lease, key string) (queue.EffectStart, error) {
	var out api.EffectStartResponse
	err := r.call(ctx, http.MethodPost, jobPath(l, api.ActionEffects),
		api.EffectRequest{LeaseRequest: api.Lease(l.Token), Action: api.EffectStart, Key: key}, &out, true)
	return queue.EffectStartFromAPI(out), err
}

// FinishEffect implements Backend.
func (r *Remote) FinishEffect(ctx context.Context, l queue.Lease, key string, result json.RawMessage) error {
	return r.call(ctx, http.MethodPost, jobPath(l, api.ActionEffects),
		api.EffectRequest{LeaseRequest: api.Lease(l.Token), Action: api.EffectFinish, Key: key, Result: result}, nil, true)
}

// Checkpoint implements Backend.
func (r *Remote) Checkpoint(ctx context.Context, l queue.Lease, step int, state json.RawMessage) error {
	s := int64(step)
	return r.call(ctx, http.MethodPost, jobPath(l, api.ActionCheckpoint),
		api.CheckpointRequest{LeaseRequest: api.Lease(l.Token), Step: &s, State: state}, nil, true)
}

// WorkerSeen implements Backend; the server knows the worker by its token.
func (r *Remote) WorkerSeen(ctx context.Context, p queue.Presence) error {
	req := p.API()
	req.Devices = orEmpty(req.Devices)
	return r.call(ctx, http.MethodPost, api.PresencePath, req, nil, false)
}

// SetAvailability sets the worker's own availability window through the
// worker API (worker --available); "" removes it.
func (r *Remote) SetAvailability(ctx context.Context, text string) error {
	return r.call(ctx, http.MethodPut, api.AvailabilityPath, api.AvailabilityPut{Window: text}, nil, true)
}

// orEmpty is list, or an empty list for nil: the description's devices
// are an array, and a validating proxy refuses null.
func orEmpty(list []string) []string {
	if list == nil {
		return []string{}
	}
	return list
}

// UploadArtifact implements Backend: the file is streamed as multipart,
// lease_token first, never held in memory. Not retried here (the reader
// is consumed): the worker retries from its spool (uploads), reading the
// file again for each try.
func (r *Remote) UploadArtifact(ctx context.Context, l queue.Lease, name string, step int32, body io.Reader) (queue.Artifact, error) {
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	go func() {
		err := mw.WriteField(api.ArtifactTokenField, strconv.FormatInt(l.Token, 10))
		if err == nil && step != 0 {
			err = mw.WriteField(api.ArtifactStepField, strconv.FormatInt(int64(step), 10))
		}
		if err == nil {
			var part io.Writer
			if part, err = mw.CreateFormFile(api.ArtifactFileField, name); err == nil {
				if _, err = io.Copy(part, body); err == nil {
					err = mw.Close()
				}
			}
		}
		pw.CloseWithError(err)
	}()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.base.String()+jobPath(l, api.ActionArtifacts), pr)
	if err != nil {
		pr.Close()
		return queue.Artifact{}, err
	}
	req.Header.Set("Content-Type", mw.FormDataContentType())
	var out api.Artifact
	err = r.do(req, &out)
	pr.Close()
	return queue.ArtifactFromAPI(l.JobID, out), err
}

func (r *Remote) jobWrite(ctx context.Context, l queue.Lease, action string, body any) (queue.Job, error) {
	var job api.Job
	err := r.call(ctx, http.MethodPost, jobPath(l, action), body, &job, true)
	return queue.JobFromAPI(job), err
}

// clip makes a message what the server takes (queue.CheckText), as
// Direct does: a long stderr, or one with a NUL byte, must not turn a
// failure into a refused write and an expired lease.
func clip(msg string) string { return queue.CleanText(msg, api.MaxMessageBytes) }

func jobPath(l queue.Lease, action string) string { return api.JobPath(l.JobID, action) }

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
		if err == nil {
			r.unreachable.ok()
		}
		if !retry || ctx.Err() != nil || !transient(err) {
			return err
		}
		wait := delay
		if se := (*statusError)(nil); errors.As(err, &se) {
			wait = max(wait, se.retryAfter) // the server said when
		}
		r.unreachable.failed(err, "path", path, "retry_in", wait)
		select {
		case <-ctx.Done():
			return errors.Join(err, ctx.Err())
		case <-time.After(wait):
		}
		delay = min(delay*2, 2*time.Second)
	}
}

func (r *Remote) do(req *http.Request, out any) error {
	req.Header.Set("Authorization", "Bearer "+r.token)
	req.Header.Set("User-Agent", "leasehold-worker")
	resp, err := r.client.Do(req)
	if err != nil {
		err = fmt.Errorf("%s %s: %w", req.Method, req.URL.Path, err)
		if req.Context().Err() == nil {
			// The transport's own timeout (a dial or a DNS lookup that got
			// no answer), whose error matches context.DeadlineExceeded as
			// the caller's deadline would: the server is unreachable.
			return &unreachableError{err}
		}
		return err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return fmt.Errorf("%s %s: reading answer: %w", req.Method, req.URL.Path, err)
	}
	if resp.StatusCode >= 300 {
		var e api.Error
		_ = json.Unmarshal(raw, &e)
		switch {
		case e.Code == api.CodeLeaseLost:
			return queue.ErrLeaseLost
		case e.Code == api.CodeBudgetSpent:
			return queue.ErrBudgetSpent
		case e.Code == api.CodeNotFound && strings.Contains(req.URL.Path, "/jobs/"):
			return queue.ErrNotFound
		case resp.StatusCode == http.StatusUnauthorized:
			return ErrUnauthorized
		case (e.Code == api.CodeInvalid || e.Code == api.CodeTooLarge) && e.Field != "":
			// The same error a direct worker gets from the queue.
			return &queue.ValidationError{Field: e.Field, Message: e.Error}
		}
		return &statusError{status: resp.StatusCode, msg: cmp.Or(e.Error, strings.TrimSpace(string(raw))),
			retryAfter: retryAfter(resp.Header.Get("Retry-After"))}
	}
	if out != nil && resp.StatusCode != http.StatusNoContent {
		if err := json.Unmarshal(raw, out); err != nil {
			return fmt.Errorf("%s %s: decoding answer: %w", req.Method, req.URL.Path, err)
		}
	}
	return nil
}

// retryAfter reads a Retry-After of seconds; 0 when there is none.
func retryAfter(v string) time.Duration {
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n < 0 {
		return 0
	}
	return min(time.Duration(n)*time.Second, maxRetryAfter)
}
