package queue

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/leasehold/leasehold/api"
)

// The one place where the queue's types become the wire types of package
// api and back: the server's handlers, the webhook sender and the remote
// worker all convert here, so a job is shown one way everywhere.

// API is the job as the API shows it.
func (j Job) API() api.Job {
	return api.Job{
		ID: j.ID, Kind: j.Kind, Queue: j.Queue, Priority: j.Priority, Payload: j.Payload,
		State: api.State(j.State), Attempt: j.Attempt, MaxAttempts: j.MaxAttempts, CountedAttempts: j.CountedAttempts,
		RunAt: api.Time(j.RunAt), LeaseOwner: j.LeaseOwner, LeaseUntil: api.TimePtr(j.LeaseUntil),
		LeaseToken: j.LeaseToken, LeaseMs: j.LeaseMs, HeartbeatAt: api.TimePtr(j.HeartbeatAt),
		TimeoutMs: j.TimeoutMs, CancelRequested: j.CancelRequested, IdempotencyKey: j.IdempotencyKey,
		BackoffBaseMs: j.BackoffBaseMs, BackoffMaxMs: j.BackoffMaxMs,
		ConcurrencyKey: j.ConcurrencyKey, ConcurrencyLimit: j.ConcurrencyLimit, RateLimits: nonNil(j.RateLimits),
		LastError: j.LastError, Result: j.Result, CreatedAt: api.Time(j.CreatedAt),
		FinishedAt: api.TimePtr(j.FinishedAt), Schedule: j.Schedule,
		Checkpoint: j.Checkpoint.API(),
		MaxCost:    j.MaxCost, MaxSteps: j.MaxSteps, CostSpentMicros: j.CostSpentMicros, StepsSpent: j.StepsSpent,
		FailureGroup: j.FailureGroup,
	}
}

// API is the checkpoint as the API shows it; nil for none.
func (cp *Checkpoint) API() *api.Checkpoint {
	if cp == nil {
		return nil
	}
	at := api.Time(cp.At)
	return &api.Checkpoint{Step: cp.Step, State: cp.State, Attempt: cp.Attempt, SavedAt: &at}
}

// checkpointFromAPI is the checkpoint a remote worker reads from its
// claim answer.
func checkpointFromAPI(cp *api.Checkpoint) *Checkpoint {
	if cp == nil {
		return nil
	}
	out := &Checkpoint{Step: cp.Step, State: cp.State, Attempt: cp.Attempt}
	if cp.SavedAt != nil {
		out.At = time.Time(*cp.SavedAt)
	}
	return out
}

// JobFromAPI is the job a remote worker reads from the server.
func JobFromAPI(j api.Job) Job {
	return Job{
		ID: j.ID, Kind: j.Kind, Queue: j.Queue, Priority: j.Priority, Payload: j.Payload,
		State: State(j.State), Attempt: j.Attempt, MaxAttempts: j.MaxAttempts, CountedAttempts: j.CountedAttempts,
		RunAt: time.Time(j.RunAt), LeaseOwner: j.LeaseOwner, LeaseUntil: api.StdTime(j.LeaseUntil),
		LeaseToken: j.LeaseToken, LeaseMs: j.LeaseMs, HeartbeatAt: api.StdTime(j.HeartbeatAt),
		TimeoutMs: j.TimeoutMs, CancelRequested: j.CancelRequested, IdempotencyKey: j.IdempotencyKey,
		BackoffBaseMs: j.BackoffBaseMs, BackoffMaxMs: j.BackoffMaxMs,
		ConcurrencyKey: j.ConcurrencyKey, ConcurrencyLimit: j.ConcurrencyLimit, RateLimits: j.RateLimits,
		LastError: j.LastError, Result: j.Result, CreatedAt: time.Time(j.CreatedAt),
		FinishedAt: api.StdTime(j.FinishedAt), Schedule: j.Schedule,
		Checkpoint: checkpointFromAPI(j.Checkpoint),
		MaxCost:    j.MaxCost, MaxSteps: j.MaxSteps, CostSpentMicros: j.CostSpentMicros, StepsSpent: j.StepsSpent,
		FailureGroup: j.FailureGroup,
	}
}

// JobsAPI is jobs as the API shows them.
func JobsAPI(jobs []Job) []api.Job {
	out := make([]api.Job, len(jobs))
	for i, j := range jobs {
		out[i] = j.API()
	}
	return out
}

// ClaimedAPI is a job just claimed as the claim answers it, with how long
// its lease had left by the database clock.
func (j Job) ClaimedAPI() api.ClaimedJob {
	c := api.ClaimedJob{Job: j.API()}
	if j.LeaseUntil != nil && j.HeartbeatAt != nil {
		// The claim sets heartbeat_at to its now(): the difference is
		// the database's own count of the lease.
		c.LeaseRemainingMs = max(j.LeaseUntil.Sub(*j.HeartbeatAt).Milliseconds(), 0)
	}
	return c
}

// API is the job with its history as the API shows it.
func (d JobDetail) API() api.JobDetail {
	v := api.JobDetail{
		Job:       d.Job.API(),
		Attempts:  make([]api.Attempt, len(d.Attempts)),
		Artifacts: make([]api.Artifact, len(d.Artifacts)),
		Events:    make([]api.Event, len(d.Events)),
		Effects:   make([]api.Effect, len(d.Effects)),
		Usage:     make([]api.AttemptUsage, len(d.Usage)),
	}
	for i, u := range d.Usage {
		v.Usage[i] = u.API()
	}
	for i, a := range d.Attempts {
		v.Attempts[i] = a.API()
	}
	for i, a := range d.Artifacts {
		v.Artifacts[i] = a.API()
	}
	for i, e := range d.Events {
		v.Events[i] = e.API()
	}
	for i, e := range d.Effects {
		v.Effects[i] = e.API()
	}
	return v
}

// API is the reason as the API shows it.
func (w Waiting) API() *api.Waiting {
	v := &api.Waiting{Kind: api.WaitKind(w.Kind), Queue: w.Queue, Unfit: w.Unfit}
	if w.Device != "" {
		v.Device = &w.Device
	}
	switch w.Kind {
	case WaitQueuePaused:
		v.PausedBy, v.PausedAt = w.PausedBy, api.TimePtr(w.PausedAt)
	case WaitQueueAtCap:
		v.Running, v.Limit = &w.Running, &w.Limit
	case WaitKeyHeld:
		v.Running, v.Limit, v.ConcurrencyKey, v.HeldBy = &w.Running, &w.Limit, &w.Key, &w.HeldBy
	case WaitBackoff, WaitScheduled:
		v.Until = api.TimePtr(w.Until)
	case WaitRateLimited:
		v.RateLimitKey, v.Until = &w.Key, api.TimePtr(w.Until)
	case WaitDevicesUnfit:
		v.DevicesOnline = &w.Online
	case WaitOutsideWindow:
		v.Until = api.TimePtr(w.Until)
		if w.Window != nil {
			v.Window, v.WindowOf = &w.Window.Text, &w.WindowOf
		}
	}
	return v
}

// API is the attempt as the API shows it.
func (a Attempt) API() api.Attempt {
	return api.Attempt{
		Number: a.Number, WorkerID: a.WorkerID, LeaseToken: a.LeaseToken, StartedAt: api.Time(a.StartedAt),
		HeartbeatAt: api.TimePtr(a.HeartbeatAt), LeaseUntil: api.TimePtr(a.LeaseUntil),
		EndedAt: api.TimePtr(a.EndedAt), Outcome: a.Outcome, Error: a.Error,
	}
}

// API is the event as the API shows it.
func (e Event) API() api.Event {
	return api.Event{At: api.Time(e.At), Type: e.Type, Attempt: e.Attempt, Detail: e.Detail}
}

// API is the effect as the API shows it.
func (e Effect) API() api.Effect {
	return api.Effect{Key: e.Key, Attempt: e.Attempt, State: e.State, Result: e.Result, CreatedAt: api.Time(e.CreatedAt)}
}

// API is the artifact's metadata as the API shows it; its bytes are at
// /artifacts/{id}.
func (a Artifact) API() api.Artifact {
	return api.Artifact{
		ID: a.ID, Attempt: a.Attempt, Kind: a.Kind, Name: a.Name, ContentType: a.ContentType, Size: a.Size,
		SHA256: a.SHA256, Width: a.Width, Height: a.Height, Step: a.Step, URL: fmt.Sprintf("/artifacts/%d", a.ID),
		CreatedAt: api.Time(a.CreatedAt),
	}
}

// ArtifactFromAPI is the artifact of job jobID that the server answered an
// upload with.
func ArtifactFromAPI(jobID int64, a api.Artifact) Artifact {
	return Artifact{
		ID: a.ID, JobID: jobID, Attempt: a.Attempt, Kind: a.Kind, Name: a.Name, ContentType: a.ContentType,
		Size: a.Size, SHA256: a.SHA256, Width: a.Width, Height: a.Height, Step: a.Step, CreatedAt: time.Time(a.CreatedAt),
	}
}

// NewJobFromAPI is the job a client submits.
func NewJobFromAPI(j api.NewJob) NewJob {
	return NewJob{
		Kind: j.Kind, Queue: j.Queue, Priority: j.Priority, Payload: j.Payload, MaxAttempts: j.MaxAttempts,
		RunAt: j.RunAt, TimeoutMs: j.TimeoutMs, IdempotencyKey: j.IdempotencyKey,
		BackoffBaseMs: j.BackoffBaseMs, BackoffMaxMs: j.BackoffMaxMs,
		ConcurrencyKey: j.ConcurrencyKey, ConcurrencyLimit: j.ConcurrencyLimit,
		MaxCost: j.MaxCost, MaxSteps: j.MaxSteps,
		RateLimits: j.RateLimits,
	}
}

// nonNil is keys, or an empty list for none: the API always shows one.
func nonNil(keys []string) []string {
	if keys == nil {
		return []string{}
	}
	return keys
}

// API is the budgets of a key as the API shows them.
func (r RateLimit) API() api.RateLimit {
	v := api.RateLimit{Key: r.Key, Budgets: make([]api.RateBudget, len(r.Budgets))}
	for i, b := range r.Budgets {
		v.Budgets[i] = api.RateBudget{
			Budget: b.String(), Limit: b.Limit, WindowSeconds: int(b.Window / time.Second),
			Used: b.Used, WindowEnd: api.Time(b.WindowEnd), UpdatedAt: api.Time(b.UpdatedAt), UpdatedBy: b.UpdatedBy,
		}
	}
	return v
}

// API is the queue as the API shows it.
func (q QueueInfo) API() api.Queue {
	return api.Queue{
		Name: q.Name, Paused: q.Paused, PausedBy: q.PausedBy, PausedAt: api.TimePtr(q.PausedAt), MaxRunning: q.MaxRunning,
		Pending: q.Pending, PendingOver: q.PendingOver, Running: q.Running,
	}
}

// API is the schedule as the API shows it.
func (s Schedule) API() api.Schedule {
	sj := s.Job
	return api.Schedule{
		Name: s.Name, Cron: s.Cron, Timezone: s.Timezone, Paused: s.Paused,
		Job: api.ScheduleJob{
			Kind: sj.Kind, Queue: sj.Queue, Priority: sj.Priority, Payload: sj.Payload, MaxAttempts: sj.MaxAttempts,
			TimeoutMs: sj.TimeoutMs, BackoffBaseMs: sj.BackoffBaseMs, BackoffMaxMs: sj.BackoffMaxMs,
			ConcurrencyKey: sj.ConcurrencyKey, ConcurrencyLimit: sj.ConcurrencyLimit, RateLimits: sj.RateLimits,
		},
		NextRunAt: api.TimePtr(s.NextRunAt), LastRunAt: api.TimePtr(s.LastRunAt), LastJobID: s.LastJobID,
		CreatedAt: api.Time(s.CreatedAt), UpdatedAt: api.Time(s.UpdatedAt),
	}
}

// API is the worker as GET /api/v1/stats shows it.
func (w Worker) API() api.Worker {
	return api.Worker{ID: w.ID, LastSeen: api.Time(w.LastSeen), Device: w.Device, Queues: w.Queues, Running: w.Running}
}

// API is the answer to a heartbeat.
func (h HeartbeatResult) API() api.HeartbeatResponse {
	return api.HeartbeatResponse{
		LeaseUntil: api.Time(h.LeaseUntil), CancelRequested: h.CancelRequested, RemainingMs: h.Remaining.Milliseconds(),
	}
}

// HeartbeatResultFromAPI is what a remote worker's heartbeat tells it.
func HeartbeatResultFromAPI(r api.HeartbeatResponse) HeartbeatResult {
	return HeartbeatResult{
		LeaseUntil: time.Time(r.LeaseUntil), CancelRequested: r.CancelRequested,
		Remaining: time.Duration(r.RemainingMs) * time.Millisecond,
	}
}

// API is the answer to an effect's start.
func (e EffectStart) API() api.EffectStartResponse {
	return api.EffectStartResponse{Done: e.Done, Result: e.Result, IdempotencyKey: e.IdempotencyKey}
}

// EffectStartFromAPI is what a remote worker's effect start tells it.
func EffectStartFromAPI(r api.EffectStartResponse) EffectStart {
	return EffectStart{Done: r.Done, Result: r.Result, IdempotencyKey: r.IdempotencyKey}
}

// API is the request that says p.
func (p Presence) API() api.PresenceRequest {
	r := api.PresenceRequest{Queues: p.Queues, Devices: p.Devices, Starting: p.Starting}
	if d := p.Device; d != nil {
		r.InfoError, r.Claiming, r.Reason = d.Error, &d.Claiming, d.Reason
		if d.Info != nil {
			age := d.InfoAge.Milliseconds()
			r.Info, r.InfoAgeMs = d.Info, &age
		}
	}
	return r
}

// DeviceReportFromAPI is the device report of a presence request; nil when
// it has none.
func DeviceReportFromAPI(r api.PresenceRequest) *DeviceReport {
	info := r.Info
	if string(info) == "null" {
		info = nil
	}
	if info == nil && r.InfoError == "" && r.Claiming == nil && r.Reason == "" {
		return nil
	}
	d := &DeviceReport{Info: json.RawMessage(info), Error: r.InfoError, Claiming: r.Claiming == nil || *r.Claiming, Reason: r.Reason}
	if r.InfoAgeMs != nil {
		d.InfoAge = time.Duration(*r.InfoAgeMs) * time.Millisecond
	}
	return d
}
