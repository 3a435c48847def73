package dashboard

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"regexp"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/templates"
	"github.com/leasehold/leasehold/web/httpx"
)

// newJobKeyPattern is what the submit form's idempotency key looks like:
// hex, as the form hands it out (crypto/rand, 128 bits).
var newJobKeyPattern = regexp.MustCompile(`^[0-9a-fA-F]{1,64}$`)

// The submit form's kind, and the queue it preselects.
const (
	newJobKind  = "app_investigation"
	newJobQueue = "default"
)

// NewJobForm shows an empty submit form. Every form gets a fresh
// idempotency key, so that its double submit makes one job while a new
// form makes a new one.
func (h *Handler) NewJobForm(c echo.Context) error {
	v := templates.NewJobView{Queue: newJobQueue, Priority: "0", MaxAttempts: strconv.Itoa(queue.DefaultMaxAttempts), ConcurrencyLimit: "1", IdempotencyKey: newJobKey()}
	return h.newJobRender(c, http.StatusOK, v)
}

// newJobRender shows the form with the known queues as the Queue
// field's suggestions (a new name is allowed, as in the API).
func (h *Handler) newJobRender(c echo.Context, status int, v templates.NewJobView) error {
	queues, err := h.queue.Queues(c.Request().Context())
	if err != nil {
		return fmt.Errorf("listing queues for the submit form: %w", err)
	}
	for _, q := range queues {
		v.Queues = append(v.Queues, q.Name)
	}
	return render(c, status, templates.NewJobForm(h.page(c, "New investigation", "new"), v))
}

// SubmitNewJob submits the form: 303 to the job (a new one, or the one
// this very form already created), 422 with the errors beside their
// fields and nothing created, 409 when the form's key belongs to a
// different job.
func (h *Handler) SubmitNewJob(c echo.Context) error {
	in := readNewJobInput(c)
	if !newJobKeyPattern.MatchString(in.IdempotencyKey) {
		return h.jobProblem(c, http.StatusBadRequest, "This form cannot be submitted",
			"It lacks the key that keeps a double submit from creating two jobs. Open a fresh form from “New investigation” and submit that.")
	}
	nj, errs, problem := newJobFromInput(in)
	if len(errs) > 0 || problem != "" {
		return h.newJobInvalid(c, in, errs, problem)
	}
	job, existed, err := h.queue.Insert(c.Request().Context(), nj)
	var ve *queue.ValidationError
	switch {
	case errors.Is(err, queue.ErrIdempotencyConflict):
		// The form was submitted before with other values (back, edit,
		// resend). Nothing was created; a new key lets the next submit
		// create the job these values describe.
		in.Notice = "This form was already used to submit an investigation with other values, so nothing new was created. " +
			"Check the values below and submit again to create a new one."
		in.ExistingJob = "/jobs/" + strconv.FormatInt(job.ID, 10)
		in.IdempotencyKey = newJobKey()
		return h.newJobRender(c, http.StatusConflict, in)
	case errors.As(err, &ve):
		if name := newJobFormField(ve.Field); newJobIsField(name) {
			return h.newJobInvalid(c, in, map[string]string{name: ve.Message}, "")
		}
		return h.newJobInvalid(c, in, nil, ve.Field+" "+ve.Message)
	case err != nil:
		return fmt.Errorf("submitting investigation: %w", err)
	}
	if !existed {
		h.logger.Info("job submitted", "job_id", job.ID, "by", httpx.CurrentSession(c).Username)
	}
	return c.Redirect(http.StatusSeeOther, "/jobs/"+strconv.FormatInt(job.ID, 10))
}

// newJobInvalid shows the form again with what was typed, each error
// beside its field and a summary above: 422, nothing created.
func (h *Handler) newJobInvalid(c echo.Context, in templates.NewJobView, errs map[string]string, problem string) error {
	in.Errors = errs
	switch {
	case problem != "":
		in.Notice = "The investigation was not submitted: " + problem + "."
	case len(errs) == 1:
		in.Notice = "The investigation was not submitted: one field needs a change."
	default:
		in.Notice = fmt.Sprintf("The investigation was not submitted: %d fields need a change.", len(errs))
	}
	return h.newJobRender(c, http.StatusUnprocessableEntity, in)
}

// readNewJobInput reads the posted form as typed, minus surrounding
// spaces and the CR of browsers' CRLF line breaks, so that the same text
// always makes the same payload.
func readNewJobInput(c echo.Context) templates.NewJobView {
	field := func(name string) string { return strings.TrimSpace(c.FormValue(name)) }
	return templates.NewJobView{
		Queue: field("queue"), App: field("app"), StoreURL: field("store_url"), Device: field("device"),
		Instructions:   strings.ReplaceAll(field("instructions"), "\r\n", "\n"),
		Priority:       field("priority"),
		MaxAttempts:    field("max_attempts"),
		ConcurrencyKey: field("concurrency_key"), ConcurrencyLimit: field("concurrency_limit"),
		MaxCost: field("max_cost"), MaxSteps: field("max_steps"),
		IdempotencyKey: c.FormValue("idempotency_key"),
	}
}

// newJobFromInput builds the job a form describes. errs maps form fields
// to what is wrong with them; problem is what is wrong with none in
// particular.
func newJobFromInput(in templates.NewJobView) (nj queue.NewJob, errs map[string]string, problem string) {
	errs = map[string]string{}
	priority, msg := newJobNumber(in.Priority, 0, math.MinInt32, math.MaxInt32)
	if msg != "" {
		errs["priority"] = msg
	}
	maxAttempts, msg := newJobNumber(in.MaxAttempts, queue.DefaultMaxAttempts, 1, queue.MaxAttemptsLimit)
	if msg != "" {
		errs["max_attempts"] = msg
	}
	concurrencyLimit, msg := newJobNumber(in.ConcurrencyLimit, 1, 1, queue.MaxConcurrencyLimit)
	if msg != "" {
		errs["concurrency_limit"] = msg
	}
	var maxCost *int64
	if in.MaxCost != "" {
		n, msg := newJobNumber(in.MaxCost, 0, 1, queue.MaxCostLimit)
		if msg != "" {
			errs["max_cost"] = msg
		}
		maxCost = &n
	}
	var maxSteps *int32
	if in.MaxSteps != "" {
		n, msg := newJobNumber(in.MaxSteps, 0, 1, queue.MaxStepsLimit)
		if msg != "" {
			errs["max_steps"] = msg
		}
		maxSteps = new(int32(n))
	}
	var concurrencyKey *string
	if in.ConcurrencyKey != "" {
		key := in.ConcurrencyKey
		concurrencyKey = &key
		check := queue.NewJob{ConcurrencyKey: concurrencyKey}
		var ve *queue.ValidationError
		if errors.As(check.NormalizeConcurrency(), &ve) && ve.Field == "concurrency_key" {
			errs["concurrency_key"] = ve.Message
		}
	}
	p := queue.InvestigationPayload{App: in.App, StoreURL: in.StoreURL, Device: in.Device, Instructions: in.Instructions}
	// The queue is checked by queue's own rule (and message), as the API
	// checks it; empty is the default queue, as in the API.
	queueName := in.Queue
	payload, err := json.Marshal(p)
	if err != nil {
		return queue.NewJob{}, errs, "its fields cannot be encoded"
	}
	// queue's checks stop at the first problem; to show every wrong field
	// at once, set each one it names aside and check again.
	for range 5 {
		probe, _ := json.Marshal(p)
		trial := queue.NewJob{Kind: newJobKind, Queue: queueName, Payload: probe}
		var ve *queue.ValidationError
		if !errors.As(trial.Normalize(), &ve) {
			break
		}
		name := newJobFormField(ve.Field)
		if !newJobIsField(name) || errs[name] != "" {
			problem = ve.Field + " " + ve.Message
			break
		}
		errs[name] = ve.Message
		switch name {
		case "queue":
			queueName = newJobQueue
		case "app":
			p.App = "com.example.placeholder"
		case "store_url":
			p.StoreURL = ""
		case "device":
			p.Device = ""
		case "instructions":
			p.Instructions = ""
		}
	}
	key := in.IdempotencyKey
	nj = queue.NewJob{
		Kind: newJobKind, Queue: in.Queue, Priority: int32(priority), Payload: payload,
		MaxAttempts: new(int32(maxAttempts)), IdempotencyKey: &key,
		ConcurrencyKey: concurrencyKey, ConcurrencyLimit: new(int32(concurrencyLimit)),
		MaxCost: maxCost, MaxSteps: maxSteps,
	}
	return nj, errs, problem
}

// newJobFormField is the form field of a queue validation field: the
// form's app is the payload's ("payload.app").
func newJobFormField(name string) string { return strings.TrimPrefix(name, "payload.") }

// newJobIsField reports whether a queue validation field is one of the
// form's.
func newJobIsField(name string) bool {
	switch name {
	case "queue", "app", "store_url", "device", "instructions", "priority", "max_attempts", "concurrency_key", "concurrency_limit", "max_cost", "max_steps":
		return true
	}
	return false
}

// newJobNumber reads a whole number field; empty takes the default.
func newJobNumber(s string, def, lo, hi int64) (int64, string) {
	if s == "" {
		return def, ""
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return def, "must be a whole number"
	}
	if err != nil || n < lo || n > hi {
		return def, fmt.Sprintf("must be between %d and %d", lo, hi)
	}
	return n, ""
}

// newJobKey is a fresh idempotency key for a submit form: 128 random
// bits, hex. (crypto/rand.Read never fails; it would crash the program
// rather than return an error.)
func newJobKey() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
