package web_test

import (
	"bytes"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/templates/htmltest"
)

// Issue 17: the page of a job whose attempt has 2,000 progress messages of
// 64 KB took 2.4 s and 118 MB to show 200 of them. It now reads what it
// shows: the allocation of one render stays far below what the events
// weigh (130 MB), the answer is a few hundred KB, it says how many
// earlier events it leaves out and where they are. Not parallel: the
// allocation measured is this process's.
func TestJobPageOfAHugeAttemptReadsWhatItShows(t *testing.T) {
	f := setup(t)
	b := f.signIn(t, "alice")
	j := f.submitInvestigation(t, "com.example.notes")
	l := f.claimInvestigation(t, j.ID)
	const events, messageBytes = 2000, 65536
	// The newest message has a right-to-left override (written first:
	// the rows below are older, and by SQL, which no cap applies to): on the timeline it
	// shows as an escape, in the replay it stays inside its <bdi>.
	if err := f.queue.Progress(f.ctx, l, 0.9, "tap \u202egnp.exe then Save"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.queue.RecordArtifact(f.ctx, l, queue.Artifact{Kind: queue.ArtifactScreenshot, Name: "s.png",
		ContentType: "image/png", Size: 10, SHA256: strings.Repeat("c", 64)}); err != nil {
		t.Fatal(err)
	}

	if _, err := f.pool.Exec(f.ctx, `
		INSERT INTO events (job_id, type, attempt, at, detail)
		SELECT $1, 'progress', 1, now() - interval '1 hour' + i * interval '1 ms',
		       jsonb_build_object('progress', 0.5, 'message', left(repeat(md5(i::text), $2 / 32 + 1), $2))
		FROM generate_series(1, $3) i`, j.ID, messageBytes, events); err != nil {
		t.Fatal(err)
	}
	b.get(t, jobPagePath(j.ID)).want(t, 200) // warm: templates, plans
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	start := time.Now()
	r := b.get(t, jobPagePath(j.ID)).want(t, 200)
	took := time.Since(start)
	runtime.ReadMemStats(&after)
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("job page: %d bytes in %v, %d MB allocated", len(r.body), took.Round(time.Millisecond), alloc>>20)
	if alloc > 32<<20 {
		t.Errorf("one render allocated %d MB, want under 32 MB (the events weigh %d MB)", alloc>>20, events*messageBytes>>20)
	}
	if len(r.body) > 512<<10 {
		t.Errorf("page is %d KB, want under 512 KB", len(r.body)>>10)
	}
	if took > 5*time.Second {
		t.Errorf("page took %v", took)
	}
	doc := parseHTML(t, r)
	if n := len(doc.All("event")); n != 200 {
		t.Errorf("%d events shown, want 200", n)
	}
	earlier := htmltest.Text(doc.One(t, "events-earlier"))
	if !strings.Contains(earlier, strconv.Itoa(events+3-200)+" earlier events not shown") || !strings.Contains(earlier, "API") {
		t.Errorf("events-earlier: %q", earlier)
	}
	// Every raw override on the page is in a <bdi>; the timeline has the escape.
	raw := bytes.Count(r.body, []byte("\u202e"))
	isolated := len(regexp.MustCompile("<bdi[^>]*>[^<]*\u202e[^<]*</bdi>").FindAll(r.body, -1))
	if raw == 0 || raw != isolated {
		t.Errorf("%d right-to-left overrides on the page, %d of them isolated in a <bdi>", raw, isolated)
	}
	if !bytes.Contains(r.body, []byte(`tap \u202egnp.exe`)) {
		t.Error("the timeline does not show the override as an escape")
	}
	if got := htmltest.Text(doc.One(t, "replay-message")); !strings.Contains(got, "gnp.exe then Save") {
		t.Errorf("replay message %q, want the progress before the screenshot", got)
	}
}
