package web

import (
	"encoding/json"

	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/workerapi"
)

// apiTime is a time as the API shows it: RFC 3339 in UTC with a fixed six
// fractional digits (PostgreSQL's precision), so that clients never see
// the fraction vanish when it happens to be zero. The worker API and the
// admin API show times and jobs alike, so both are workerapi's.
type apiTime = workerapi.Time

var apiTimePtr = workerapi.TimePtr

// jobView is a job as the API shows it; the names are SPEC's.
type jobView = workerapi.Job

func newJobView(j queue.Job) jobView { return workerapi.NewJob(j) }

func newJobViews(jobs []queue.Job) []jobView {
	views := make([]jobView, len(jobs))
	for i, j := range jobs {
		views[i] = newJobView(j)
	}
	return views
}

// attemptView is one attempt of a job.
type attemptView struct {
	Number      int32    `json:"number"`
	WorkerID    string   `json:"worker_id"`
	LeaseToken  int64    `json:"lease_token"`
	StartedAt   apiTime  `json:"started_at"`
	HeartbeatAt *apiTime `json:"heartbeat_at"`
	LeaseUntil  *apiTime `json:"lease_until"`
	EndedAt     *apiTime `json:"ended_at"`
	Outcome     *string  `json:"outcome"`
	Error       *string  `json:"error"`
}

// eventView is one entry of a job's timeline.
type eventView struct {
	At      apiTime         `json:"at"`
	Type    string          `json:"type"`
	Attempt *int32          `json:"attempt"`
	Detail  json.RawMessage `json:"detail"`
}

// artifactView is an artifact's metadata; its bytes are at
// /artifacts/{id}. The worker API shows it alike.
type artifactView = workerapi.Artifact

func newArtifactView(a queue.Artifact) artifactView { return workerapi.NewArtifact(a) }

// effectView is one entry of the side-effect ledger.
type effectView struct {
	Key       string          `json:"key"`
	Attempt   int32           `json:"attempt"`
	State     string          `json:"state"`
	Result    json.RawMessage `json:"result"`
	CreatedAt apiTime         `json:"created_at"`
}

// jobDetailView is a job with its history.
type jobDetailView struct {
	jobView
	Attempts  []attemptView  `json:"attempts"`
	Artifacts []artifactView `json:"artifacts"`
	Events    []eventView    `json:"events"`
	Effects   []effectView   `json:"effects"`
}

func newJobDetailView(d queue.JobDetail) jobDetailView {
	v := jobDetailView{
		jobView:   newJobView(d.Job),
		Attempts:  make([]attemptView, len(d.Attempts)),
		Artifacts: make([]artifactView, len(d.Artifacts)),
		Events:    make([]eventView, len(d.Events)),
		Effects:   make([]effectView, len(d.Effects)),
	}
	for i, a := range d.Artifacts {
		v.Artifacts[i] = newArtifactView(a)
	}
	for i, e := range d.Effects {
		v.Effects[i] = effectView{Key: e.Key, Attempt: e.Attempt, State: e.State, Result: e.Result, CreatedAt: apiTime(e.CreatedAt)}
	}
	for i, a := range d.Attempts {
		v.Attempts[i] = attemptView{
			Number: a.Number, WorkerID: a.WorkerID, LeaseToken: a.LeaseToken, StartedAt: apiTime(a.StartedAt),
			HeartbeatAt: apiTimePtr(a.HeartbeatAt), LeaseUntil: apiTimePtr(a.LeaseUntil),
			EndedAt: apiTimePtr(a.EndedAt), Outcome: a.Outcome, Error: a.Error,
		}
	}
	for i, e := range d.Events {
		v.Events[i] = eventView{At: apiTime(e.At), Type: e.Type, Attempt: e.Attempt, Detail: e.Detail}
	}
	return v
}

// workerView is a worker as /api/v1/stats shows it.
type workerView struct {
	ID       string   `json:"id"`
	LastSeen apiTime  `json:"last_seen"`
	Device   *string  `json:"device"`
	Queues   []string `json:"queues"`
	Running  int64    `json:"running"`
}
