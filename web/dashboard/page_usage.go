package dashboard

import (
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/leasehold/leasehold/queue"
	"github.com/leasehold/leasehold/templates"
)

// UsagePage is GET /usage: what the attempts used from ?from= to ?to=
// (dates or RFC 3339 times; the last 30 days by default), summed per
// app, kind or day (?group_by=), as GET /api/v1/usage answers it. A
// query the queue refuses is shown with status 400, the form kept.
func (h *Handler) UsagePage(c echo.Context) error {
	from, to, group := c.QueryParam("from"), c.QueryParam("to"), c.QueryParam("group_by")
	v := templates.UsageView{From: from, To: to, GroupBy: group, Groups: queue.UsageGroups}
	page := h.page(c, "Usage", "usage")
	q, err := queue.ParseUsageQuery(from, to, group, time.Now())
	var ve *queue.ValidationError
	if errors.As(err, &ve) {
		v.Problem, v.Field = ve.Message, ve.Field
		return render(c, http.StatusBadRequest, templates.Usage(page, v))
	}
	if err != nil {
		return err
	}
	v.GroupBy = q.GroupBy
	if v.From == "" {
		v.From = q.From.UTC().Format(time.DateOnly)
	}
	rows, err := h.read(c).UsageSummary(c.Request().Context(), q)
	if err != nil {
		return fmt.Errorf("usage: %w", err)
	}
	totals := map[string]templates.UsageTotal{}
	for _, r := range rows {
		v.Rows = append(v.Rows, templates.UsageRowView{
			Key: r.Key, Currency: r.Currency, Jobs: r.Jobs, InputTokens: r.InputTokens, OutputTokens: r.OutputTokens, CostMicros: r.CostMicros,
		})
		t := totals[r.Currency]
		t.Currency, t.CostMicros = r.Currency, t.CostMicros+r.CostMicros
		t.InputTokens, t.OutputTokens = t.InputTokens+r.InputTokens, t.OutputTokens+r.OutputTokens
		totals[r.Currency] = t
	}
	for _, cur := range slices.Sorted(maps.Keys(totals)) {
		v.Totals = append(v.Totals, totals[cur])
	}
	return render(c, http.StatusOK, templates.Usage(page, v))
}

// overviewUsage is what executors reported, all time, per currency: from
// the totals /metrics reads (a handful of rows), never a sum over usage.
func overviewUsage(totals []queue.UsageTotal) []templates.UsageTotal {
	by := map[string]templates.UsageTotal{}
	for _, t := range totals {
		s := by[t.Currency]
		s.Currency, s.CostMicros = t.Currency, s.CostMicros+t.CostMicros
		s.InputTokens, s.OutputTokens = s.InputTokens+t.InputTokens, s.OutputTokens+t.OutputTokens
		by[t.Currency] = s
	}
	out := make([]templates.UsageTotal, 0, len(by))
	for _, cur := range slices.Sorted(maps.Keys(by)) {
		out = append(out, by[cur])
	}
	return out
}

// jobUsageView is a job's usage per attempt and in total (per model and
// currency), and its budget.
func jobUsageView(j queue.Job, usage []queue.AttemptUsage) templates.JobUsageView {
	var v templates.JobUsageView
	type key struct{ model, currency string }
	totals := map[key]templates.UsageLine{}
	var order []key
	for _, u := range usage {
		v.Lines = append(v.Lines, templates.UsageLine{
			Attempt: u.Attempt, Model: u.Model, Currency: u.Currency, InputTokens: u.InputTokens,
			OutputTokens: u.OutputTokens, CostMicros: u.CostMicros, Counters: usageCounters(u.Counters),
		})
		k := key{u.Model, u.Currency}
		t, seen := totals[k]
		if !seen {
			order = append(order, k)
		}
		t.Model, t.Currency = u.Model, u.Currency
		t.InputTokens, t.OutputTokens, t.CostMicros = t.InputTokens+u.InputTokens, t.OutputTokens+u.OutputTokens, t.CostMicros+u.CostMicros
		totals[k] = t
	}
	for _, k := range order {
		v.Totals = append(v.Totals, totals[k])
	}
	var budget []string
	if j.MaxCost != nil {
		budget = append(budget, fmt.Sprintf("cost %d of %d micro-units", j.CostSpentMicros, *j.MaxCost))
	}
	if j.MaxSteps != nil {
		budget = append(budget, fmt.Sprintf("steps %d of %d", j.StepsSpent, *j.MaxSteps))
	}
	v.Budget = strings.Join(budget, "; ")
	return v
}

// usageCounters is "screens 5, taps 7", by name.
func usageCounters(m map[string]int64) string {
	parts := make([]string, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}
