package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/leasehold/leasehold/client"
)

// Issue 17: a 900-character reason made a job page 9,409 px wide and a
// 1,000-character serial pushed /workers' columns off the screen. Worker
// strings wrap and are cut (whole in their title): at a phone's size and
// a desktop's, neither page is wider than the window, and on the desktop
// /workers' table fits its box.
func TestBrowserLongWorkerStringsStayOnScreen(t *testing.T) {
	b := newBrowserEnv(t)
	reason := strings.Repeat("r", 900)
	serial := strings.Repeat("S", 1000)
	info, _ := json.Marshal(map[string]any{"model": strings.Repeat("M", 300), "serial": serial})
	if _, err := b.pool.Exec(b.ctx, `
		INSERT INTO workers (id, device, queues, last_seen, info, info_at, claiming, not_claiming, info_error)
		VALUES ($1, 'pixel7', '{default}', now(), $2, now(), false, $3, $4)`,
		"phone-"+strings.Repeat("w", 300), info, reason, strings.Repeat("e", 900)); err != nil {
		t.Fatal(err)
	}
	// A job for that phone waits, and its page says why: the reason.
	job, err := b.client().Submit(b.ctx, client.NewJob{Kind: "app_investigation",
		Payload: json.RawMessage(`{"app":"com.example.notes","instructions":"x","device":"pixel7"}`)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.pool.Exec(b.ctx, `INSERT INTO events (job_id, type, detail) VALUES ($1, 'progress', jsonb_build_object('message', $2::text))`,
		job.ID, strings.Repeat("m", 900)); err != nil {
		t.Fatal(err)
	}
	b.signIn()
	for _, size := range []struct {
		name string
		w, h int64
	}{{"phone", 390, 844}, {"desktop", 1280, 900}} {
		b.do(chromedp.EmulateViewport(size.w, size.h))
		for _, page := range []string{fmt.Sprintf("/jobs/%d", job.ID), "/workers"} {
			b.do(chromedp.Navigate(b.apiURL + page))
			b.waitJS(page+" loaded", `document.readyState === "complete"`)
			if page != "/workers" {
				b.waitJS("the waiting reason", `!!document.querySelector("[data-testid=job-waiting]")`)
			}
			width := run(b, chromedp.Evaluate[int64](`document.documentElement.scrollWidth`))
			if width > size.w {
				t.Errorf("%s at %s (%d px): the page is %d px wide", page, size.name, size.w, width)
			}
		}
		if size.name == "desktop" {
			// /workers is still loaded: its table needs no sideways scroll.
			over := run(b, chromedp.Evaluate[int64](`(() => { const w = document.querySelector("[data-testid=workers-table]").parentElement; return w.scrollWidth - w.clientWidth })()`))
			if over > 0 {
				t.Errorf("/workers at desktop size: the table is %d px wider than its box", over)
			}
			title := run(b, chromedp.Evaluate[string](`document.querySelector("[data-testid=serial] bdi").title`))
			if title != serial {
				t.Errorf("the cut serial's title is %d characters, want the whole %d", len(title), len(serial))
			}
		}
	}
}
