package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/leasehold/leasehold/api"
	"github.com/leasehold/leasehold/client"
)

// -screenshots writes each page at phone size to docs/screenshots/ (go
// test ./e2e -run TestBrowserEveryPageAtPhoneAndDesktopSize -screenshots).
var screenshots = flag.Bool("screenshots", false, "write docs/screenshots/<page>.png at 390×844")

// viewport is a window size the dashboard must work at.
type viewport struct {
	name string
	w, h int64
}

var (
	phone   = viewport{"phone", 390, 844}
	desktop = viewport{"desktop", 1280, 900}
)

// Issue 18: the dashboard in a phone's browser. Signed in, with real data
// on every page (jobs in each state with screenshots, a paused queue with
// a cap, a schedule, a phone worker, a dead letter), every page at
// 390×844 and at 1280×900: the page is no wider than the window, no two
// boxes of the header overlap and none spills out of it onto the page, a
// wide table scrolls in its own box with its first column kept in view,
// images and the replay fit the width, every control is at least 44 px
// both ways at phone size (with the menu open too), and axe-core finds no
// violation.
func TestBrowserEveryPageAtPhoneAndDesktopSize(t *testing.T) {
	t.Parallel()
	axe := axeSource(t)
	b := newBrowserEnv(t)
	c := b.client()

	// A phone worker (examples/device-info.sh on a fake adb) next to the
	// sim worker the environment runs.
	script, err := filepath.Abs("../examples/device-info.sh")
	if err != nil {
		t.Fatal(err)
	}
	b.spawn("worker pixel-7-home", []string{"--id", "pixel-7-home", "--artifacts", b.artifacts, "--device", "pixel7",
		"--queues", "default,phones", "--lease", "5s", "--device-info", "/bin/sh " + script, "--device-info-every", "1s"},
		fakeADB(t), "FAKEADB_MODEL=Pixel 7", "FAKEADB_ANDROID=14", "FAKEADB_BATTERY=83")

	// Jobs: one that failed once and then succeeded (two attempts, the
	// replay), one dead with screenshots, one running, one cancelled,
	// one waiting for a phone nobody has, two held by the paused queue.
	replayed := b.submit(map[string]any{"app": "com.example.notes", "instructions": "Open the settings and check every toggle.",
		"sim": map[string]any{"steps": 3, "step_ms": 20, "fail_attempts": 1}})
	dead := b.submit(map[string]any{"app": "com.example.broken", "sim": map[string]any{"steps": 2, "step_ms": 20, "permanent": true}})
	running := b.submit(map[string]any{"app": "com.example.slow", "sim": map[string]any{"hang": true, "step_ms": 300}})
	// A job with more events than its page shows: the page then says
	// so in a paragraph with a link in its text.
	long := b.submit(map[string]any{"app": "com.example.long", "sim": map[string]any{"steps": 210, "step_ms": 2}})
	waiting := b.submit(map[string]any{"app": "com.example.tablet", "device": "pixel9", "sim": map[string]any{"steps": 1}})
	if _, err := c.PatchQueue(b.ctx, "phones", client.QueuePatch{Paused: api.Value(true), MaxRunning: api.Value(int32(2))}); err != nil {
		t.Fatal(err)
	}
	var held []int64
	for _, app := range []string{"com.example.maps", "com.example.camera"} {
		payload, _ := json.Marshal(map[string]any{"app": app, "sim": map[string]any{"steps": 1}})
		j, err := c.Submit(b.ctx, client.NewJob{Kind: "app_investigation", Queue: "phones", Payload: payload})
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, j.ID)
	}
	if _, err := c.Cancel(b.ctx, held[1]); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateSchedule(b.ctx, client.NewSchedule{Name: "nightly-notes", Cron: "30 2 * * *", Timezone: "Europe/Berlin",
		Job: api.NewJob{Kind: "app_investigation", Queue: "phones", Payload: json.RawMessage(`{"app":"com.example.notes"}`)}}); err != nil {
		t.Fatal(err)
	}
	b.waitFor(replayed, 60*time.Second, client.StateSucceeded)
	b.waitFor(dead, 60*time.Second, client.StateDead)
	b.waitFor(running, 60*time.Second, client.StateRunning)
	b.waitFor(long, 60*time.Second, client.StateSucceeded)
	b.eventually("the phone described", 30*time.Second, func() bool {
		return b.count("SELECT count(*) FROM workers WHERE id = 'pixel-7-home' AND info ? 'model'") == 1
	})

	pages := []struct {
		name, path string
		ready      string // a JavaScript expression true once the page shows its data
	}{
		{"overview", "/", `!!document.querySelector("[data-testid=dead-letter]") && !!document.querySelector("[data-testid=worker-online]")`},
		{"jobs", "/jobs", `document.querySelectorAll("[data-testid=job-row]").length >= 6`},
		{"job", fmt.Sprintf("/jobs/%d", replayed), `document.querySelectorAll("[data-testid=attempt]").length === 2 && !!document.querySelector("[data-testid=replay-shot]")`},
		{"job-running", fmt.Sprintf("/jobs/%d", running), `!!document.querySelector("[data-testid=lease-countdown]")`},
		{"job-long", fmt.Sprintf("/jobs/%d", long), `!!document.querySelector("[data-testid=events-earlier]")`},
		{"job-waiting", fmt.Sprintf("/jobs/%d", waiting), `!!document.querySelector("[data-testid=job-waiting]")`},
		{"new", "/jobs/new", `!!document.querySelector("[data-testid=new-job-form]")`},
		{"queues", "/queues", `!!document.querySelector("[data-testid=queue-phones] [data-testid=paused-by]")`},
		{"schedules", "/schedules", `!!document.querySelector("[data-testid=schedule-row][data-name=nightly-notes]")`},
		{"workers", "/workers", `!!document.querySelector("[data-worker-id=pixel-7-home] [data-testid=model]")`},
		{"dead", "/dead", `!!document.querySelector("[data-testid=dead-row] [data-testid=shots]")`},
		{"usage", "/usage", `!!document.querySelector("[data-testid=usage-filters]")`},
		{"users", "/users", `!!document.querySelector("[data-testid=user-row][data-name=admin]")`},
		{"audit", "/audit", `document.querySelectorAll("[data-testid=audit-row]").length >= 3`},
		{"job-missing", "/jobs/999999", `!!document.querySelector("[data-testid=problem]")`},
	}
	b.signIn()
	widths := map[string]int64{}
	for _, size := range []viewport{phone, desktop} {
		b.emulate(size)
		for _, p := range pages {
			b.do(chromedp.Navigate(b.apiURL + p.path))
			b.waitJS(p.name+" with its data", `document.readyState === "complete" && `+p.ready)
			b.waitJS(p.name+"'s images", imagesLoaded)
			widths[p.name+"@"+size.name] = b.checkLayout(p.name, size)
			t.Logf("%s at %s: %d px wide", p.name, size.name, widths[p.name+"@"+size.name])
			for _, v := range b.axe(axe) {
				t.Errorf("%s at %s: axe-core: %s", p.name, size.name, v)
			}
			if size == phone && *screenshots && !strings.HasPrefix(p.name, "job-") {
				b.screenshot(p.name, "")
				switch p.name {
				case "overview":
					b.do(chromedp.Click(chromedp.CSS("header [aria-controls=main-nav]")))
					b.screenshot("menu", "")
					b.do(chromedp.Click(chromedp.CSS("header [aria-controls=main-nav]")))
				case "job":
					b.screenshot("job-replay", "[data-testid=attempt]")
				}
			}
		}
	}
	// At phone size the menu leads to the other pages, and Sign out is in
	// it; then the sign-in page, signed out.
	b.emulate(phone)
	toggle := chromedp.CSS("header [aria-controls=main-nav]")
	b.do(chromedp.Navigate(b.apiURL+"/"), chromedp.Click(toggle), chromedp.Click(chromedp.CSS(`#main-nav a[href="/queues"]`)))
	b.waitJS("the queues page, from the menu", `location.pathname === "/queues" && document.readyState === "complete"`)
	b.do(chromedp.Click(toggle), chromedp.Click(chromedp.CSS(`form[action="/logout"] button`)), chromedp.WaitVisible(chromedp.CSS("#username")))
	for _, size := range []viewport{phone, desktop} {
		b.emulate(size)
		b.do(chromedp.Navigate(b.apiURL+"/login"), chromedp.WaitVisible(chromedp.CSS("#username")))
		widths["login@"+size.name] = b.checkLayout("login", size)
		for _, v := range b.axe(axe) {
			t.Errorf("login at %s: axe-core: %s", size.name, v)
		}
		if size == phone && *screenshots {
			b.screenshot("login", "")
		}
	}
	var report []string
	for _, p := range append([]string{"login"}, func() (ns []string) {
		for _, p := range pages {
			ns = append(ns, p.name)
		}
		return ns
	}()...) {
		report = append(report, fmt.Sprintf("%s %d/%d", p, widths[p+"@phone"], widths[p+"@desktop"]))
	}
	t.Logf("page widths at 390/1280: %s", strings.Join(report, ", "))
}

// imagesLoaded is true once every image near the top of the page has its
// bytes (lazy ones further down load only when scrolled to).
const imagesLoaded = `[...document.images].filter(i => i.getBoundingClientRect().top < 2 * innerHeight).every(i => i.complete && i.naturalWidth > 0)`

func (b *browserEnv) emulate(size viewport) {
	b.t.Helper()
	if size == phone {
		b.do(chromedp.EmulateViewport(size.w, size.h, chromedp.EmulateMobile, chromedp.EmulateTouch, chromedp.EmulatePortrait))
	} else {
		b.do(chromedp.EmulateViewport(size.w, size.h))
	}
}

// layoutProblems lists what is wrong with the page's layout at the
// window's size; it returns {width, problems}.
const layoutProblems = `((W) => {
	const out = [];
	const name = el => {
		const t = (el.getAttribute("aria-label") || el.textContent || el.value || "").trim().replace(/\s+/g, " ").slice(0, 30);
		return el.tagName.toLowerCase() + (el.className && typeof el.className === "string" ? "." + el.className.trim().split(/\s+/).join(".") : "") + (t ? ' "' + t + '"' : "");
	};
	const shown = el => {
		for (let e = el; e; e = e.parentElement) {
			const s = getComputedStyle(e);
			if (s.display === "none" || s.visibility === "hidden") return false;
		}
		const r = el.getBoundingClientRect();
		return r.width > 0 && r.height > 0 && !el.closest(".sr-only");
	};
	const overlap = (a, b) => {
		const r = a.getBoundingClientRect(), q = b.getBoundingClientRect();
		return Math.min(r.right, q.right) - Math.max(r.left, q.left) > 0.5 && Math.min(r.bottom, q.bottom) - Math.max(r.top, q.top) > 0.5;
	};
	// W is the window's width: a phone's browser widens its viewport
	// (innerWidth) to a page wider than the screen, and zooms out.
	const width = Math.max(document.documentElement.scrollWidth, innerWidth);
	if (width > W) {
		const wide = [...document.querySelectorAll("body *")].filter(el => shown(el) && el.getBoundingClientRect().right > W + 0.5 &&
			![...el.children].some(c => c.getBoundingClientRect().right > W + 0.5));
		out.push("the page is " + width + " px wide in a " + W + " px window; widest: " + wide.slice(0, 4).map(name).join(", "));
	}

	// The header: its visible boxes, and the boxes of each of them, do not
	// overlap; all stay inside it, and the page starts below it.
	const header = document.querySelector("header.topbar");
	if (header) {
		const h = header.getBoundingClientRect();
		const groups = [[...header.children]];
		for (const child of header.children) groups.push([...child.querySelectorAll("a, button, span, input, select")]);
		for (const group of groups) {
			const vis = group.filter(shown);
			for (let i = 0; i < vis.length; i++) for (let j = i + 1; j < vis.length; j++) {
				if (vis[i].contains(vis[j]) || vis[j].contains(vis[i])) continue;
				if (overlap(vis[i], vis[j])) out.push("in the header, " + name(vis[i]) + " overlaps " + name(vis[j]));
			}
		}
		for (const el of header.querySelectorAll("*")) {
			if (!shown(el)) continue;
			const r = el.getBoundingClientRect();
			if (r.bottom > h.bottom + 0.5 || r.top < h.top - 0.5 || r.right > W + 0.5 || r.left < -0.5) {
				out.push(name(el) + " spills out of the header (" + Math.round(r.left) + "," + Math.round(r.top) + "–" + Math.round(r.right) + "," + Math.round(r.bottom) + "; header ends at " + Math.round(h.bottom) + ")");
			}
		}
		const main = document.querySelector("main");
		if (main && main.getBoundingClientRect().top < h.bottom - 0.5) out.push("the page starts at " + Math.round(main.getBoundingClientRect().top) + " px, under the header (ends at " + Math.round(h.bottom) + ")");
	}

	// A wide table scrolls in its own box, and its first column (the one
	// after the checkboxes) stays in view when scrolled to the end.
	for (const wrap of document.querySelectorAll(".table-wrap")) {
		if (!shown(wrap)) continue;
		const w = wrap.getBoundingClientRect();
		if (w.right > W + 0.5) out.push("a table's box ends at " + Math.round(w.right) + " px");
		if (wrap.scrollWidth <= wrap.clientWidth) continue;
		wrap.scrollLeft = wrap.scrollWidth;
		const cells = [...wrap.querySelectorAll("tr")].map(tr => [...tr.children].find(td => !td.classList.contains("check"))).filter(Boolean);
		const box = wrap.getBoundingClientRect();
		for (const td of cells) {
			const r = td.getBoundingClientRect();
			if (r.left < box.left - 0.5 || r.right > box.right + 0.5) { out.push("scrolled to its end, a table's first column is out of view: " + name(td)); break; }
		}
		wrap.scrollLeft = 0;
	}

	// Screenshots and the replay fit the width (thumbnails in a table's
	// box scroll with it).
	for (const el of document.querySelectorAll("main img, .replay")) {
		if (!shown(el) || el.closest(".table-wrap")) continue;
		const r = el.getBoundingClientRect();
		if (r.left < -0.5 || r.right > W + 0.5) out.push(name(el) + " is cut by the window (" + Math.round(r.left) + "–" + Math.round(r.right) + " px)");
	}
	return {width, problems: out};
})`

// smallTargets lists the controls smaller than 44×44 px: buttons, button
// links, form controls (a checkbox by its label) and the header's links.
const smallTargets = `(() => {
	const out = [];
	const shown = el => {
		for (let e = el; e; e = e.parentElement) {
			const s = getComputedStyle(e);
			if (s.display === "none" || s.visibility === "hidden") return false;
		}
		const r = el.getBoundingClientRect();
		return r.width > 0 && r.height > 0 && !el.closest(".sr-only");
	};
	for (const el of document.querySelectorAll("button, .btn, input:not([type=hidden]), select, textarea, summary, header.topbar a")) {
		if (!shown(el)) continue;
		const target = (el.type === "checkbox" || el.type === "radio") && el.closest("label") || el;
		const r = target.getBoundingClientRect();
		if (r.width < 44 || r.height < 44) {
			const t = (el.getAttribute("aria-label") || el.textContent || el.name || "").trim().replace(/\s+/g, " ").slice(0, 30);
			out.push(el.tagName.toLowerCase() + ' "' + t + '" is ' + Math.round(r.width) + "×" + Math.round(r.height) + " px");
		}
	}
	return out;
})()`

type layoutReport struct {
	Width    int64    `json:"width"`
	Problems []string `json:"problems"`
}

// checkLayout reports what is wrong with the page at size, with the
// phone's menu closed and open, and returns the page's width.
func (b *browserEnv) checkLayout(page string, size viewport) int64 {
	b.t.Helper()
	check := fmt.Sprintf("%s(%d)", layoutProblems, size.w)
	r := run(b, chromedp.Evaluate[layoutReport](check))
	for _, p := range r.Problems {
		b.t.Errorf("%s at %s: %s", page, size.name, p)
	}
	if size != phone {
		return r.Width
	}
	for _, p := range run(b, chromedp.Evaluate[[]string](smallTargets)) {
		b.t.Errorf("%s at %s: tap target %s", page, size.name, p)
	}
	if page == "login" {
		return r.Width
	}
	// At phone size the menu is behind a button.
	toggle := `document.querySelector("header [aria-controls=main-nav]")`
	if !run(b, chromedp.Evaluate[bool](`(() => { const t = `+toggle+`; return !!t && t.getBoundingClientRect().width > 0 })()`)) {
		b.t.Errorf("%s at %s: no menu button in the header", page, size.name)
		return r.Width
	}
	if run(b, chromedp.Evaluate[bool](`document.getElementById("main-nav").getBoundingClientRect().height > 0`)) {
		b.t.Errorf("%s at %s: the menu is open before its button is pressed", page, size.name)
	}
	b.do(chromedp.Click(chromedp.CSS("header [aria-controls=main-nav]")))
	b.waitJS("the menu open", `document.querySelector("header [aria-controls=main-nav]").getAttribute("aria-expanded") === "true" &&
		[...document.querySelectorAll("#main-nav a")].every(a => a.getBoundingClientRect().height > 0)`)
	open := run(b, chromedp.Evaluate[layoutReport](check))
	for _, p := range open.Problems {
		b.t.Errorf("%s at %s, menu open: %s", page, size.name, p)
	}
	for _, p := range run(b, chromedp.Evaluate[[]string](smallTargets)) {
		b.t.Errorf("%s at %s, menu open: tap target %s", page, size.name, p)
	}
	b.do(chromedp.Click(chromedp.CSS("header [aria-controls=main-nav]")))
	b.waitJS("the menu closed", `document.getElementById("main-nav").getBoundingClientRect().height === 0`)
	return r.Width
}

// screenshot writes the window (the top of the page as a phone shows
// it, or scrolled to the element sel names) to docs/screenshots/<name>.png,
// in at most 256 colours to keep the files small.
func (b *browserEnv) screenshot(name, sel string) {
	b.t.Helper()
	if sel == "" {
		b.do(chromedp.Evaluate[chromedp.Void](`scrollTo(0, 0)`))
	} else {
		b.do(chromedp.Evaluate[chromedp.Void](`document.querySelector(` + "`" + sel + "`" + `).scrollIntoView()`))
		b.waitJS("the images in view", imagesLoaded)
	}
	shot, err := png.Decode(bytes.NewReader(run(b, chromedp.CaptureScreenshot())))
	if err != nil {
		b.t.Fatal(err)
	}
	var out bytes.Buffer
	enc := png.Encoder{CompressionLevel: png.BestCompression}
	if err := enc.Encode(&out, paletted(shot)); err != nil {
		b.t.Fatal(err)
	}
	if err := os.MkdirAll("../docs/screenshots", 0o755); err != nil {
		b.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join("../docs/screenshots", name+".png"), out.Bytes(), 0o644); err != nil {
		b.t.Fatal(err)
	}
}

// paletted is img in its 256 most frequent colours, each other colour
// drawn in the nearest of them: a page is mostly flat colour, and text
// edges lose little.
func paletted(img image.Image) *image.Paletted {
	r := img.Bounds()
	count := map[color.RGBA]int{}
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			count[color.RGBAModel.Convert(img.At(x, y)).(color.RGBA)]++
		}
	}
	colours := make([]color.RGBA, 0, len(count))
	for c := range count {
		colours = append(colours, c)
	}
	slices.SortFunc(colours, func(a, b color.RGBA) int { return count[b] - count[a] })
	pal := make(color.Palette, 0, 256)
	for _, c := range colours[:min(256, len(colours))] {
		pal = append(pal, c)
	}
	out := image.NewPaletted(r, pal)
	index := map[color.RGBA]uint8{}
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			c := color.RGBAModel.Convert(img.At(x, y)).(color.RGBA)
			i, ok := index[c]
			if !ok {
				i = uint8(pal.Index(c))
				index[c] = i
			}
			out.SetColorIndex(x, y, i)
		}
	}
	return out
}

// Without scripts the Menu button could open nothing: at phone size the
// navigation is shown open instead, and the button is not shown.
func TestBrowserPhoneMenuWithoutScripts(t *testing.T) {
	t.Parallel()
	b := newBrowserEnv(t)
	b.signIn()
	b.emulate(phone)
	b.do(
		func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
			_, err := cdp.Call(ctx, t, emulation.SetScriptExecutionDisabled, emulation.SetScriptExecutionDisabledParams{Value: true})
			return chromedp.Void{}, err
		},
		chromedp.Navigate(b.apiURL+"/jobs"),
		chromedp.WaitReady(chromedp.CSS(`#main-nav a[href="/queues"]`)),
	)
	shown := run(b, chromedp.Evaluate[[]bool](`[
		document.querySelector("[aria-controls=main-nav]").getBoundingClientRect().width > 0,
		[...document.querySelectorAll("#main-nav a")].every(a => a.getBoundingClientRect().height >= 44),
		document.querySelector("[data-testid=current-user]").getBoundingClientRect().height > 0,
		typeof htmx !== "undefined",
	]`))
	if shown[0] || !shown[1] || !shown[2] || shown[3] {
		t.Fatalf("without scripts at phone size: menu button shown %v, every link shown and 44 px %v, user shown %v, htmx ran %v", shown[0], shown[1], shown[2], shown[3])
	}
	if r := run(b, chromedp.Evaluate[layoutReport](fmt.Sprintf("%s(%d)", layoutProblems, phone.w))); len(r.Problems) > 0 {
		t.Errorf("without scripts at phone size: %s", strings.Join(r.Problems, "; "))
	}
}
