// Package oapiuse makes the README's calls through a client that
// oapi-codegen generates from web/openapi.json with its default options.
// It exists to be compiled (a free-form object generated as an empty
// struct, or a cap that cannot be cleared with null, does not compile) and
// run against a real server (../cmd/runclients).
package oapiuse

import (
	"context"
	"fmt"
	"net/http"
	"reflect"

	"github.com/oapi-codegen/nullable"

	"github.com/leasehold/leasehold/tools/apiclients/gen/oapiclient"
)

func bearer(token string) oapiclient.RequestEditorFn {
	return func(_ context.Context, req *http.Request) error {
		req.Header.Set("Authorization", "Bearer "+token)
		return nil
	}
}

// Run submits the README's job with its payload, clears a queue's cap with
// null, creates a schedule, then claims, heartbeats and completes the job
// as a worker with a result, and reads payload and result back.
func Run(ctx context.Context, serverURL, adminToken, workerToken string, hc *http.Client) error {
	c, err := oapiclient.NewClientWithResponses(serverURL, oapiclient.WithHTTPClient(hc))
	if err != nil {
		return err
	}
	admin, worker := bearer(adminToken), bearer(workerToken)
	queue := "oapi-readme"

	// The README's first job.
	payload := map[string]any{
		"app":          "com.example.notes",
		"instructions": "Open settings",
		"sim":          map[string]any{"steps": 5.0, "step_ms": 800.0},
	}
	created, err := c.JobCreateWithResponse(ctx, &oapiclient.JobCreateParams{}, oapiclient.NewJob{
		Kind:    "app_investigation",
		Queue:   &queue,
		Payload: &payload,
	}, admin)
	if err != nil {
		return fmt.Errorf("submitting: %w", err)
	}
	if created.JSON201 == nil {
		return fmt.Errorf("submitting: answered %d %s, want 201", created.StatusCode(), created.Body)
	}
	job := created.JSON201
	if !reflect.DeepEqual(job.Payload, payload) {
		return fmt.Errorf("payload as submitted = %v, want %v", job.Payload, payload)
	}

	// Cap the queue, then clear the cap with null.
	capped, err := c.QueuePatchWithResponse(ctx, queue, oapiclient.QueuePatch{MaxRunning: nullable.NewNullableWithValue[int32](3)}, admin)
	if err != nil || capped.JSON200 == nil || capped.JSON200.MaxRunning == nil || *capped.JSON200.MaxRunning != 3 {
		return fmt.Errorf("capping: %v %s", err, body(capped))
	}
	uncapped, err := c.QueuePatchWithResponse(ctx, queue, oapiclient.QueuePatch{MaxRunning: nullable.NewNullNullable[int32]()}, admin)
	if err != nil || uncapped.JSON200 == nil || uncapped.JSON200.MaxRunning != nil {
		return fmt.Errorf("clearing the cap: %v %s", err, body(uncapped))
	}

	// The README's schedule.
	nightly := queue + "-nightly"
	sched, err := c.ScheduleCreateWithResponse(ctx, oapiclient.NewSchedule{
		Name: "oapi-nightly",
		Cron: "30 2 * * *",
		Job: oapiclient.NewScheduleJob{
			Kind:    "app_investigation",
			Queue:   &nightly,
			Payload: &map[string]any{"app": "com.example.notes"},
		},
	}, admin)
	if err != nil || sched.JSON201 == nil || sched.JSON201.Job.Payload["app"] != "com.example.notes" {
		return fmt.Errorf("creating a schedule: %v %s", err, body(sched))
	}

	// The worker protocol: claim, heartbeat, complete.
	leaseMs := int64(60000)
	claimed, err := c.WorkerClaimWithResponse(ctx, oapiclient.ClaimRequest{Queues: &[]string{queue}, LeaseMs: &leaseMs}, worker)
	if err != nil || claimed.JSON200 == nil || len(claimed.JSON200.Jobs) != 1 || claimed.JSON200.Jobs[0].Id != job.Id {
		return fmt.Errorf("claiming: %v %s", err, body(claimed))
	}
	lease := claimed.JSON200.Jobs[0]
	if !reflect.DeepEqual(lease.Payload, payload) {
		return fmt.Errorf("payload as claimed = %v, want %v", lease.Payload, payload)
	}
	hb, err := c.WorkerHeartbeatWithResponse(ctx, lease.Id, oapiclient.LeaseRequest{LeaseToken: lease.LeaseToken}, worker)
	if err != nil || hb.JSON200 == nil || hb.JSON200.RemainingMs <= 0 {
		return fmt.Errorf("heartbeat: %v %s", err, body(hb))
	}
	result := map[string]any{"verdict": "ok", "screens": 3.0}
	done, err := c.WorkerCompleteWithResponse(ctx, lease.Id, oapiclient.CompleteRequest{LeaseToken: lease.LeaseToken, Result: &result}, worker)
	if err != nil || done.JSON200 == nil || done.JSON200.State != oapiclient.Succeeded {
		return fmt.Errorf("completing: %v %s", err, body(done))
	}

	// Payload and result, read back.
	got, err := c.JobGetWithResponse(ctx, job.Id, admin)
	if err != nil || got.JSON200 == nil {
		return fmt.Errorf("reading the job: %v %s", err, body(got))
	}
	if !reflect.DeepEqual(got.JSON200.Payload, payload) {
		return fmt.Errorf("payload read back = %v, want %v", got.JSON200.Payload, payload)
	}
	if got.JSON200.Result == nil || !reflect.DeepEqual(*got.JSON200.Result, result) {
		return fmt.Errorf("result read back = %v, want %v", got.JSON200.Result, result)
	}
	return nil
}

// body shows an answer in an error: its status and raw body.
func body(r interface {
	StatusCode() int
}) string {
	if reflect.ValueOf(r).IsNil() {
		return "(no answer)"
	}
	return fmt.Sprintf("%d %s", r.StatusCode(), reflect.ValueOf(r).Elem().FieldByName("Body").Bytes())
}
