package web_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/leasehold/leasehold/queue"
)

// manyNumbers is a JSON array of n copies of num: 170,000 of "1e999" is
// the 1 MiB payload that read back as 170 MB on every GET.
func manyNumbers(num string, n int) string {
	return "[" + strings.Repeat(num+",", n-1) + num + "]"
}

// wantInvalid checks a 400 answer with code invalid on field.
func wantInvalid(t *testing.T, what string, r *response, field string) {
	t.Helper()
	if r.status != http.StatusBadRequest {
		t.Fatalf("%s: status %d, want 400: %.300s", what, r.status, r.body)
	}
	body := r.json(t)
	if body["code"] != "invalid" || body["field"] != field {
		t.Fatalf("%s: %v, want code invalid on %q", what, body, field)
	}
}

// A document's 1 MiB bounds what it is as stored, not only its text:
// jsonb writes numbers out in full, so a number beyond float64 (1e999,
// 1,000 digits) or a payload of numbers that would be many times its
// size read back is refused, in a single job, a batch and a schedule.
func TestNumbersAreBoundedAsStored(t *testing.T) {
	t.Parallel()
	f := setup(t)
	amplifier := `{"n":` + manyNumbers("1e999", 170_000) + `}`
	if len(amplifier) > queue.MaxPayloadBytes {
		t.Fatalf("the amplifier is %d bytes: it must fit the byte limit", len(amplifier))
	}
	for _, tc := range []struct{ name, payload, errHas string }{
		{"Amplifier", amplifier, "1e999"},
		{"OneBeyondFloat64", `{"n":1e999}`, "float64"},
		{"JustBeyondFloat64", `{"n":1.8e308}`, "float64"},
		{"NegativeBeyondFloat64", `{"n":[1,{"m":-1e400}]}`, "float64"},
		{"UnderflowsToZero", `{"n":1e-400}`, "too small"},
		{"ZeroWithHugeExponent", `{"n":0e-99999}`, "exponent"},
		{"LongNumber", `{"n":` + strings.Repeat("1", 65) + `}`, "characters"},
		// Each within float64, but 309 digits each once stored.
		{"Float64Amplifier", `{"n":` + manyNumbers("1e308", 150_000) + `}`, "written out in full"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := f.post(t, "/api/v1/jobs", `{"kind":"noop","payload":`+tc.payload+`}`)
			wantInvalid(t, "job", r, "payload")
			if msg, _ := r.json(t)["error"].(string); !strings.Contains(msg, tc.errHas) {
				t.Errorf("error %q does not say %q", msg, tc.errHas)
			}
		})
	}
	t.Run("Batch", func(t *testing.T) {
		r := f.post(t, "/api/v1/jobs/batch", `{"jobs":[{"kind":"noop"},{"kind":"noop","payload":`+amplifier+`}]}`)
		wantInvalid(t, "batch", r, "jobs[1].payload")
	})
	t.Run("Schedule", func(t *testing.T) {
		r := f.post(t, "/api/v1/schedules", `{"name":"amp","cron":"@hourly","job":{"kind":"noop","payload":`+amplifier+`}}`)
		wantInvalid(t, "schedule", r, "job.payload")
		f.post(t, "/api/v1/schedules", `{"name":"amp","cron":"@hourly","job":{"kind":"noop"}}`).want(t, http.StatusCreated)
		r = f.do(t, call{method: http.MethodPatch, path: "/api/v1/schedules/amp", body: `{"job":{"kind":"noop","payload":{"n":1e999}}}`})
		wantInvalid(t, "schedule patch", r, "job.payload")
	})
	if n := f.totalJobs(t); n != 0 {
		t.Fatalf("%d jobs stored from refused payloads", n)
	}

	// What float64 holds is kept, exactly, and reads back small.
	edges := `{"max":1.7976931348623157e308,"min":-1.7976931348623157e308,"tiny":5e-324,"int":9223372036854775807,"frac":-0.000001,"e":1.5E+3}`
	j := f.submit(t, `{"kind":"noop","payload":`+edges+`}`)
	got := f.get(t, fmt.Sprintf("/api/v1/jobs/%d", j.ID)).want(t, http.StatusOK)
	if len(got.body) > 4000 {
		t.Errorf("a %d-byte payload reads back as %d bytes", len(edges), len(got.body))
	}
	var back struct {
		Payload map[string]float64 `json:"payload"`
	}
	got.decode(t, &back)
	if back.Payload["max"] != 1.7976931348623157e308 || back.Payload["tiny"] != 5e-324 || back.Payload["e"] != 1500 {
		t.Errorf("read back %v", back.Payload)
	}
}

// A result, from a remote worker (the worker API) or a direct one (the
// queue), and an effect's result meet the same rule as a payload.
func TestResultNumbersAreBoundedAsStored(t *testing.T) {
	t.Parallel()
	f := setup(t)
	job := f.submit(t, `{"kind":"test"}`)
	// A lease that outlasts the test on a loaded machine, confirmed at
	// once: an unconfirmed hand-over ends after 5 s, and these writes of
	// 1-2 MB each took 2-3 s apiece on CI.
	tok := f.claimAs(t, f.worker, `{"lease_ms":600000}`)[0].LeaseToken
	base := fmt.Sprintf("/api/v1/worker/jobs/%d/", job.ID)
	f.workerPost(t, base+"heartbeat", fmt.Sprintf(`{"lease_token":%d}`, tok)).want(t, http.StatusOK)
	amplifier := `{"n":` + manyNumbers("1e999", 170_000) + `}`
	for _, result := range []string{`{"n":1e999}`, amplifier, `{"n":` + manyNumbers("1e308", 150_000) + `}`} {
		r := f.workerPost(t, base+"complete", fmt.Sprintf(`{"lease_token":%d,"result":%s}`, tok, result))
		wantInvalid(t, "complete", r, "result")
		f.workerPost(t, base+"effects", fmt.Sprintf(`{"lease_token":%d,"action":"start","key":"k"}`, tok)).want(t, http.StatusOK)
		r = f.workerPost(t, base+"effects", fmt.Sprintf(`{"lease_token":%d,"action":"finish","key":"k","result":%s}`, tok, result))
		wantInvalid(t, "effect finish", r, "result")

		l := queue.Lease{JobID: job.ID, Token: tok, WorkerID: "worker"}
		var ve *queue.ValidationError
		if _, err := f.queue.Complete(f.ctx, l, json.RawMessage(result)); !errors.As(err, &ve) || ve.Field != "result" {
			t.Fatalf("direct complete: %v, want a validation error on result", err)
		}
		if err := f.queue.FinishEffect(f.ctx, l, "k", json.RawMessage(result)); !errors.As(err, &ve) || ve.Field != "result" {
			t.Fatalf("direct effect finish: %v, want a validation error on result", err)
		}
	}
	if j, _ := f.queue.Get(f.ctx, job.ID); j.State != queue.StateRunning {
		t.Fatalf("a refused result changed the job: %s", j.State)
	}
}

// Presence refuses what the workers table cannot store, 400 naming the
// field, never 500: NUL in the facts (jsonb refuses \u0000), in a key or
// in the texts (text refuses NUL), an unpaired surrogate in the facts
// (jsonb refuses it), a number beyond float64. In a text field an
// unpaired surrogate escape is decoded as U+FFFD, which is stored.
func TestPresenceRefusesWhatTheDatabaseCannotStore(t *testing.T) {
	t.Parallel()
	f := setup(t)
	for _, tc := range []struct{ name, body, field string }{
		{"InfoNUL", `{"info":{"serial":"a\u0000b"}}`, "info"},
		{"InfoKeyNUL", `{"info":{"\u0000":"x"}}`, "info"},
		{"InfoLoneSurrogate", `{"info":{"serial":"\ud800"}}`, "info"},
		{"InfoKeyLoneSurrogate", `{"info":{"\udc00x":"y"}}`, "info"},
		{"InfoBatteryBeyondFloat64", `{"info":{"battery":1e999}}`, "info"},
		{"InfoErrorNUL", `{"info_error":"exit 1: \u0000"}`, "info_error"},
		{"ReasonNUL", `{"claiming":false,"reason":"adb \u0000"}`, "reason"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := f.workerPost(t, "/api/v1/worker/presence", tc.body)
			wantInvalid(t, tc.body, r, tc.field)
		})
	}
	if ws := f.workers(t); len(ws) != 0 {
		t.Fatalf("a refused presence recorded a worker: %v", ws)
	}
	f.workerPost(t, "/api/v1/worker/presence", `{"info":{"serial":"R58M"},"info_error":"x\ud800","claiming":false,"reason":"\udfff"}`).
		want(t, http.StatusNoContent)
	ws := f.workers(t)
	if w := ws["worker"]; len(ws) != 1 || w.InfoError == nil || *w.InfoError != "x\uFFFD" || !w.Online {
		t.Fatalf("workers %+v, want the one with its error as decoded", ws)
	}
}

// Every text a worker sends is refused with a 400 naming it when the
// database could not store it (NUL), never a 500, and the lease stands.
func TestWorkerTextsRefuseNUL(t *testing.T) {
	t.Parallel()
	f := setup(t)
	job := f.submit(t, `{"kind":"test"}`)
	// A lease that outlasts the test on a loaded machine, confirmed at
	// once: an unconfirmed hand-over ends after 5 s, and these writes of
	// 1-2 MB each took 2-3 s apiece on CI.
	tok := f.claimAs(t, f.worker, `{"lease_ms":600000}`)[0].LeaseToken
	base := fmt.Sprintf("/api/v1/worker/jobs/%d/", job.ID)
	f.workerPost(t, base+"heartbeat", fmt.Sprintf(`{"lease_token":%d}`, tok)).want(t, http.StatusOK)
	for _, tc := range []struct{ name, path, body, field string }{
		{"ProgressMessage", "progress", `"progress":0.5,"message":"step \u0000 done"`, "message"},
		{"FailError", "fail", `"error":"boom\u0000"`, "error"},
		{"EffectStartKey", "effects", `"action":"start","key":"k\u0000"`, "key"},
		{"EffectFinishKey", "effects", `"action":"finish","key":"k\u0000","result":{}`, "key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := f.workerPost(t, base+tc.path, fmt.Sprintf(`{"lease_token":%d,%s}`, tok, tc.body))
			wantInvalid(t, tc.name, r, tc.field)
		})
	}
	l := queue.Lease{JobID: job.ID, Token: tok, WorkerID: "worker"}
	var ve *queue.ValidationError
	if err := f.queue.Progress(f.ctx, l, 0.5, "a\x00b"); !errors.As(err, &ve) || ve.Field != "message" {
		t.Fatalf("direct progress with NUL: %v", err)
	}
	if err := f.queue.Progress(f.ctx, l, 0.5, "a\xffb"); !errors.As(err, &ve) || ve.Field != "message" {
		t.Fatalf("direct progress with invalid UTF-8: %v", err)
	}
	if _, err := f.queue.Fail(f.ctx, l, "a\x00b", true); !errors.As(err, &ve) || ve.Field != "error" {
		t.Fatalf("direct fail with NUL: %v", err)
	}
	// A lone surrogate escape decodes as U+FFFD: stored.
	f.workerPost(t, base+"progress", fmt.Sprintf(`{"lease_token":%d,"progress":0.5,"message":"half \ud800"}`, tok)).want(t, http.StatusNoContent)
	if j, _ := f.queue.Get(f.ctx, job.ID); j.State != queue.StateRunning {
		t.Fatalf("refused texts changed the job: %s", j.State)
	}
	f.workerPost(t, base+"fail", fmt.Sprintf(`{"lease_token":%d,"error":"boom"}`, tok)).want(t, http.StatusOK)
}
