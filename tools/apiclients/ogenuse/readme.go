// Package ogenuse makes the README's calls through a client that ogen
// generates from web/openapi.json with its default options. It exists to
// be compiled (a free-form object generated as an empty struct, or a field
// that cannot be sent as null, does not compile) and run against a real
// server (../cmd/runclients).
package ogenuse

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"

	"github.com/go-faster/jx"
	"github.com/ogen-go/ogen/ogenerrors"

	"github.com/leasehold/leasehold/tools/apiclients/gen/ogenclient"
)

// tokens answers each operation's security: the admin token for the admin
// API, the worker token for the worker API, no dashboard session.
type tokens struct{ admin, worker string }

func (t tokens) AdminToken(context.Context, ogenclient.OperationName) (ogenclient.AdminToken, error) {
	return ogenclient.AdminToken{Token: t.admin}, nil
}

func (t tokens) WorkerToken(context.Context, ogenclient.OperationName) (ogenclient.WorkerToken, error) {
	return ogenclient.WorkerToken{Token: t.worker}, nil
}

func (tokens) Session(context.Context, ogenclient.OperationName) (ogenclient.Session, error) {
	return ogenclient.Session{}, ogenerrors.ErrSkipClientSecurity
}

// Run submits the README's job with its payload, clears a queue's cap with
// null, creates a schedule, then claims, heartbeats and completes the job
// as a worker with a result, and reads payload and result back.
func Run(ctx context.Context, serverURL, adminToken, workerToken string, hc *http.Client) error {
	c, err := ogenclient.NewClient(serverURL, tokens{adminToken, workerToken}, ogenclient.WithClient(hc))
	if err != nil {
		return err
	}
	queue := "ogen-readme"

	// The README's first job.
	payload := ogenclient.NewJobPayload{
		"app":          jx.Raw(`"com.example.notes"`),
		"instructions": jx.Raw(`"Open settings"`),
		"sim":          jx.Raw(`{"steps":5,"step_ms":800}`),
	}
	created, err := c.JobCreate(ctx, &ogenclient.NewJob{
		Kind:    "app_investigation",
		Queue:   ogenclient.NewOptString(queue),
		Payload: ogenclient.NewOptNewJobPayload(payload),
	}, ogenclient.JobCreateParams{})
	if err != nil {
		return fmt.Errorf("submitting: %w", err)
	}
	c201, ok := created.(*ogenclient.JobCreateCreated)
	if !ok {
		return fmt.Errorf("submitting: answered %T %+v, want 201", created, created)
	}
	job := c201.Response
	if err := sameJSON("payload as submitted", map[string]jx.Raw(job.Payload), map[string]jx.Raw(payload)); err != nil {
		return err
	}

	// Cap the queue, then clear the cap with null.
	var capped ogenclient.QueuePatch
	capped.MaxRunning.SetTo(3)
	cappedRes, err := c.QueuePatch(ctx, &capped, ogenclient.QueuePatchParams{Name: queue})
	if err != nil {
		return fmt.Errorf("capping: %w", err)
	}
	if q, ok := cappedRes.(*ogenclient.Queue); !ok || q.MaxRunning.Null || q.MaxRunning.Value != 3 {
		return fmt.Errorf("capping: answered %T %+v, want max_running 3", cappedRes, cappedRes)
	}
	var uncapped ogenclient.QueuePatch
	uncapped.MaxRunning.SetToNull()
	patched, err := c.QueuePatch(ctx, &uncapped, ogenclient.QueuePatchParams{Name: queue})
	if err != nil {
		return fmt.Errorf("clearing the cap: %w", err)
	}
	q, ok := patched.(*ogenclient.Queue)
	if !ok || !q.MaxRunning.Null {
		return fmt.Errorf("clearing the cap: answered %T %+v, want max_running null", patched, patched)
	}

	// The README's schedule.
	sched, err := c.ScheduleCreate(ctx, &ogenclient.NewSchedule{
		Name: "ogen-nightly",
		Cron: "30 2 * * *",
		Job: ogenclient.NewJob{
			Kind:    "app_investigation",
			Queue:   ogenclient.NewOptString(queue + "-nightly"),
			Payload: ogenclient.NewOptNewJobPayload(ogenclient.NewJobPayload{"app": jx.Raw(`"com.example.notes"`)}),
		},
	})
	if err != nil {
		return fmt.Errorf("creating a schedule: %w", err)
	}
	if s, ok := sched.(*ogenclient.ScheduleHeaders); !ok || string(s.Response.Job.Payload["app"]) != `"com.example.notes"` {
		return fmt.Errorf("creating a schedule: answered %T %+v", sched, sched)
	}

	// The worker protocol: claim, heartbeat, complete.
	claimed, err := c.WorkerClaim(ctx, &ogenclient.ClaimRequest{
		Queues:  []string{queue},
		LeaseMs: ogenclient.NewOptInt64(60000),
	})
	if err != nil {
		return fmt.Errorf("claiming: %w", err)
	}
	cr, ok := claimed.(*ogenclient.ClaimResponse)
	if !ok || len(cr.Jobs) != 1 || cr.Jobs[0].ID != job.ID {
		return fmt.Errorf("claiming: answered %T %+v, want job %d", claimed, claimed, job.ID)
	}
	lease := cr.Jobs[0]
	if err := sameJSON("payload as claimed", map[string]jx.Raw(lease.Payload), map[string]jx.Raw(payload)); err != nil {
		return err
	}
	hb, err := c.WorkerHeartbeat(ctx, &ogenclient.LeaseRequest{LeaseToken: lease.LeaseToken}, ogenclient.WorkerHeartbeatParams{ID: lease.ID})
	if err != nil {
		return fmt.Errorf("heartbeat: %w", err)
	}
	if h, ok := hb.(*ogenclient.Heartbeat); !ok || h.RemainingMs <= 0 {
		return fmt.Errorf("heartbeat: answered %T %+v", hb, hb)
	}
	result := ogenclient.CompleteRequestResult{"verdict": jx.Raw(`"ok"`), "screens": jx.Raw(`3`)}
	done, err := c.WorkerComplete(ctx, &ogenclient.CompleteRequest{
		LeaseToken: lease.LeaseToken,
		Result:     ogenclient.NewOptNilCompleteRequestResult(result),
	}, ogenclient.WorkerCompleteParams{ID: lease.ID})
	if err != nil {
		return fmt.Errorf("completing: %w", err)
	}
	if d, ok := done.(*ogenclient.JobFields); !ok || d.State != ogenclient.StateSucceeded {
		return fmt.Errorf("completing: answered %T %+v", done, done)
	}

	// Payload and result, read back.
	got, err := c.JobGet(ctx, ogenclient.JobGetParams{ID: job.ID})
	if err != nil {
		return fmt.Errorf("reading the job: %w", err)
	}
	detail, ok := got.(*ogenclient.JobDetail)
	if !ok {
		return fmt.Errorf("reading the job: answered %T %+v", got, got)
	}
	if err := sameJSON("payload read back", map[string]jx.Raw(detail.Payload), map[string]jx.Raw(payload)); err != nil {
		return err
	}
	if detail.Result.Null {
		return fmt.Errorf("result read back is null, want %v", result)
	}
	return sameJSON("result read back", map[string]jx.Raw(detail.Result.Value), map[string]jx.Raw(result))
}

// sameJSON compares two objects by their decoded values, so that the
// server's own spacing and key order do not matter.
func sameJSON(what string, got, want map[string]jx.Raw) error {
	decode := func(m map[string]jx.Raw) (any, error) {
		b, err := json.Marshal(m)
		if err != nil {
			return nil, err
		}
		var v any
		return v, json.Unmarshal(b, &v)
	}
	g, err := decode(got)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	w, err := decode(want)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if !reflect.DeepEqual(g, w) {
		return fmt.Errorf("%s = %v, want %v", what, g, w)
	}
	return nil
}
