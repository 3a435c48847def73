package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/leasehold/leasehold/artifact"
	"github.com/leasehold/leasehold/client"
	"github.com/leasehold/leasehold/queue"
)

// within fails unless a JavaScript expression turns true on the page
// within d, and says how long it took.
func (b *browserEnv) within(d time.Duration, what, expr string) time.Duration {
	b.t.Helper()
	start := time.Now()
	for {
		ctx, cancel := context.WithTimeout(b.ctx, time.Second)
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](expr))
		cancel()
		took := time.Since(start)
		if err == nil && ok {
			return took
		}
		if took > d {
			html, _ := chromedp.Run(b.ctx, chromedp.OuterHTML(chromedp.CSS("#job-live")))
			b.t.Fatalf("%s: not within %s (last error %v)\npart: %.3000s", what, d, err, html)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func testPNG(t *testing.T, step int) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 40, 40))
	for i := range img.Pix {
		img.Pix[i] = byte(step * 60)
	}
	img.Set(step, step, color.White)
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// A running job's page shows each screenshot and progress message within
// a second of its upload, without a reload, pushed by the server's event
// stream. The uploads are a direct worker's (straight to PostgreSQL and
// the shared artifact storage), so the server hears of them only from
// PostgreSQL's notifications.
func TestBrowserJobPageUpdatesLive(t *testing.T) {
	t.Parallel()
	b := newBrowserEnv(t)
	// A queue the sim worker does not serve: this test is the worker.
	payload, _ := json.Marshal(map[string]any{"app": "com.example.live", "instructions": "watch"})
	job, err := b.client().Submit(b.ctx, client.NewJob{Kind: "app_investigation", Queue: "live", Payload: payload})
	if err != nil {
		t.Fatal(err)
	}
	q := queue.NewClient(b.pool, nil)
	claimed, err := q.Claim(b.ctx, queue.ClaimParams{WorkerID: "phone-live", Queues: []string{"live"}, Limit: 1, Lease: 10 * time.Minute})
	if err != nil || len(claimed) != 1 {
		t.Fatalf("claiming: %v %v", claimed, err)
	}
	lease := queue.Lease{JobID: job.ID, Token: claimed[0].LeaseToken, WorkerID: "phone-live"}
	store, err := artifact.New(b.artifacts, q, artifact.Limits{})
	if err != nil {
		t.Fatal(err)
	}

	b.signIn()
	b.do(
		chromedp.Navigate(fmt.Sprintf("%s/jobs/%d", b.apiURL, job.ID)),
		chromedp.WaitVisible(chromedp.CSS("[data-testid=job-live][data-live=true]")),
	)
	// The part refreshes on the stream's events; it does not poll.
	b.waitJS("a live part driven by the stream", `document.querySelector("#job-live").getAttribute("hx-trigger") === "sse:job, sse:reset" &&
		document.querySelector("main").getAttribute("sse-connect").includes("job=`+fmt.Sprint(job.ID)+`")`)
	b.do(chromedp.Evaluate[chromedp.Void](`window.notReloaded = true`))

	shots := `[...document.querySelectorAll("[data-testid=screenshot] img, img[data-testid=screenshot]")]`
	for step := 1; step <= 3; step++ {
		if _, err := store.Put(b.ctx, lease, fmt.Sprintf("step-%02d.png", step), bytes.NewReader(testPNG(t, step))); err != nil {
			t.Fatal(err)
		}
		took := b.within(time.Second, fmt.Sprintf("screenshot %d shown", step),
			fmt.Sprintf(`(() => { const s = %s; return s.length === %d && s.every(i => i.complete && i.naturalWidth > 0); })()`, shots, step))
		t.Logf("screenshot %d shown %s after its upload", step, took.Round(time.Millisecond))

		msg := fmt.Sprintf("step %d: tapped button %d", step, step*7)
		if err := q.Progress(b.ctx, lease, float64(step)/3, msg); err != nil {
			t.Fatal(err)
		}
		took = b.within(time.Second, fmt.Sprintf("progress message %d shown", step),
			fmt.Sprintf(`[...document.querySelectorAll("[data-testid=event][data-type=progress]")].some(e => e.textContent.includes(%q))`, msg))
		t.Logf("progress %d shown %s after it was written", step, took.Round(time.Millisecond))
	}
	b.within(time.Second, "the same page, never reloaded", `window.notReloaded === true`)

	// Its end as well.
	if _, err := q.Complete(b.ctx, lease, json.RawMessage(`{"ok":true}`)); err != nil {
		t.Fatal(err)
	}
	b.within(time.Second, "the job shown succeeded", `document.querySelector("[data-testid=job-state]").dataset.state === "succeeded"`)
}

// A browser without EventSource polls instead.
func TestBrowserJobPagePollsWithoutEventSource(t *testing.T) {
	t.Parallel()
	b := newBrowserEnv(t)
	payload, _ := json.Marshal(map[string]any{"app": "com.example.old", "instructions": "watch"})
	job, err := b.client().Submit(b.ctx, client.NewJob{Kind: "app_investigation", Queue: "live", Payload: payload})
	if err != nil {
		t.Fatal(err)
	}
	q := queue.NewClient(b.pool, nil)
	claimed, err := q.Claim(b.ctx, queue.ClaimParams{WorkerID: "phone-old", Queues: []string{"live"}, Limit: 1, Lease: 10 * time.Minute})
	if err != nil || len(claimed) != 1 {
		t.Fatalf("claiming: %v %v", claimed, err)
	}
	lease := queue.Lease{JobID: job.ID, Token: claimed[0].LeaseToken, WorkerID: "phone-old"}
	b.signIn()
	b.do(
		func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
			_, err := cdp.Call(ctx, t, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: `delete window.EventSource`})
			return chromedp.Void{}, err
		},
		chromedp.Navigate(fmt.Sprintf("%s/jobs/%d", b.apiURL, job.ID)),
		chromedp.WaitVisible(chromedp.CSS("[data-testid=job-live][data-live=true]")),
	)
	b.waitJS("a polling live part", `document.querySelector("#job-live").getAttribute("hx-trigger") === "every 2s" &&
		!document.querySelector("main").hasAttribute("sse-connect")`)
	if err := q.Progress(b.ctx, lease, 0.5, "polled into view"); err != nil {
		t.Fatal(err)
	}
	b.within(5*time.Second, "the progress message, by polling", `[...document.querySelectorAll("[data-testid=event][data-type=progress]")].some(e => e.textContent.includes("polled into view"))`)
}
