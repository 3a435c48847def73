package dashboard

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/templates"
	"github.com/leasehold/leasehold/web/httpx"
)

// Sizes of the list pages.
const (
	jobsPageSize = 50
	// deadPageSize is smaller: each dead letter shows screenshots.
	deadPageSize    = 20
	deadShotsPerJob = 6
	// errorPreview is how much of an error a list shows before "…".
	errorPreview = 200
)

// listQuery is a list page's query string, checked: the filters, the
// cursor, and what was wrong with them.
type listQuery struct {
	filter templates.ListFilter
	cursor int64
	// fieldErrors are per filter field, problems about the rest.
	fieldErrors map[string]string
	problems    []string
}

func (q listQuery) invalid() bool { return len(q.fieldErrors) > 0 || len(q.problems) > 0 }

// parseListQuery reads the filters (when withFilters) and the cursor of a
// list page. Bad input becomes a message for the page, never a 500.
func parseListQuery(c echo.Context, withFilters bool) listQuery {
	q := listQuery{fieldErrors: map[string]string{}}
	if withFilters {
		if st := c.QueryParam("state"); st != "" {
			if queue.State(st).Valid() {
				q.filter.State = st
			} else {
				q.fieldErrors["state"] = fmt.Sprintf("There is no state %q: pick one from the list.", listClip(st, 40))
			}
		}
		for _, f := range []struct {
			name string
			dst  *string
		}{{"kind", &q.filter.Kind}, {"queue", &q.filter.Queue}, {"app", &q.filter.App}} {
			*f.dst = c.QueryParam(f.name)
			if err := httpx.CheckText(f.name, *f.dst); err != nil {
				q.fieldErrors[f.name] = "At most 255 printable characters."
			}
		}
		if text := strings.TrimSpace(c.QueryParam("q")); text != "" {
			q.filter.Q = text
			if queue.CheckSearch("q", text) != nil {
				q.filter.Q = listClip(text, queue.MaxSearchLen)
				q.fieldErrors["q"] = fmt.Sprintf("Search for %d to %d printable characters.", queue.MinSearchLen, queue.MaxSearchLen)
			}
		}
	}
	if v := c.QueryParam("cursor"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 {
			q.problems = append(q.problems, "This page link is broken: cursor must be a job id. Start again from the newest page.")
		} else {
			q.cursor = n
		}
	}
	return q
}

// listURL is the address of a list page: path with the filter and cursor
// in its query string, plus extra.
func listURL(path string, f templates.ListFilter, cursor int64, extra url.Values) string {
	v := url.Values{}
	for k, val := range map[string]string{"state": f.State, "kind": f.Kind, "queue": f.Queue, "app": f.App, "q": f.Q} {
		if val != "" {
			v.Set(k, val)
		}
	}
	if cursor > 0 {
		v.Set("cursor", strconv.FormatInt(cursor, 10))
	}
	for k, vals := range extra {
		v[k] = vals
	}
	if len(v) == 0 {
		return path
	}
	return path + "?" + v.Encode()
}

// listFlashParams are the parameters of listFlashNotices in the request,
// for a page whose notices sit inside the part that refreshes itself:
// its refreshes ask with them, or the first refresh (at once after a
// retry, which changes the list) would take the notice away.
func listFlashParams(c echo.Context) url.Values {
	v := url.Values{}
	for _, k := range []string{"done", "skipped", "stopping"} {
		if p := c.QueryParam(k); p != "" {
			v.Set(k, p)
		}
	}
	return v
}

// listFlashNotices turns the done= parameter a bulk action redirects with
// (done=retried:3, done=cancelled:1, done=none; skipped=N, stopping=N)
// into notices. Flashes travel in the URL, not in server-side state; a
// value that does not parse shows nothing.
func listFlashNotices(c echo.Context) []templates.ListNotice {
	done := c.QueryParam("done")
	if done == "none" {
		return []templates.ListNotice{{Kind: "error", Text: "Select jobs first, then choose an action."}}
	}
	verb, count, ok := strings.Cut(done, ":")
	n, err := strconv.Atoi(count)
	if !ok || err != nil || n < 0 {
		return nil
	}
	skipped, _ := strconv.Atoi(c.QueryParam("skipped"))
	stopping, _ := strconv.Atoi(c.QueryParam("stopping"))
	var text string
	switch verb {
	case "retried":
		if n == 0 {
			return []templates.ListNotice{{Kind: "error", Text: "No job was retried: " + queue.RetryRefusal + "."}}
		}
		text = fmt.Sprintf("%s retried.", listPlural(n, "job"))
		if skipped > 0 {
			text += fmt.Sprintf(" %s skipped: %s.", listPlural(skipped, "job"), queue.RetryRefusal)
		}
	case "cancelled":
		if n == 0 {
			return []templates.ListNotice{{Kind: "error", Text: "No job was cancelled: " + queue.CancelRefusal + "."}}
		}
		text = fmt.Sprintf("%s cancelled.", listPlural(n, "job"))
		if stopping > 0 {
			text += fmt.Sprintf(" %s still running will stop at the next heartbeat.", listPlural(stopping, "job"))
		}
		if skipped > 0 {
			text += fmt.Sprintf(" %s skipped: %s.", listPlural(skipped, "job"), queue.CancelRefusal)
		}
	default:
		return nil
	}
	return []templates.ListNotice{{Kind: "ok", Text: text}}
}

func listPlural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}

// listPayloadApp is the payload's app (an app_investigation names one), or "".
func listPayloadApp(payload json.RawMessage) string {
	var p struct {
		App any `json:"app"`
	}
	if json.Unmarshal(payload, &p) != nil {
		return ""
	}
	app, _ := p.App.(string)
	return app
}

// listErrorLine is the first line of an error, cut to errorPreview runes.
func listErrorLine(msg *string) string {
	if msg == nil {
		return ""
	}
	line, _, _ := strings.Cut(strings.TrimSpace(*msg), "\n")
	return listClip(strings.TrimSpace(line), errorPreview)
}

// listClip cuts s to at most n runes, marking the cut.
func listClip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n]) + "…"
}

func listStateNames() []string {
	names := make([]string, len(queue.States))
	for i, st := range queue.States {
		names[i] = string(st)
	}
	return names
}

// listWorkerCommand is how to start a worker against this server, shown where
// no worker is.
func listWorkerCommand(c echo.Context) string {
	return "server token create --role worker --name phone-1\n" +
		"worker --server-url " + c.Scheme() + "://" + c.Request().Host + " --token TOKEN --device pixel7"
}

// listDeref is *p, or "" for nil.
func listDeref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}
