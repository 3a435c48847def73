package cron_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/cron"
)

func mustCron(t *testing.T, expr, tz string) *cron.Schedule {
	t.Helper()
	c, err := cron.Parse(expr, tz)
	if err != nil {
		t.Fatalf("Parse(%q, %q): %v", expr, tz, err)
	}
	return c
}

func utc(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t.UTC()
}

func TestCronNext(t *testing.T) {
	t.Parallel()
	cases := []struct {
		expr, tz, after string
		want            []string // the ticks that follow, in order
	}{
		{"30 2 * * *", "", "2026-12-01T00:00:00Z", []string{"2026-12-01T02:30:00Z", "2026-12-02T02:30:00Z"}},
		{"30 2 * * *", "", "2026-12-01T02:30:00Z", []string{"2026-12-02T02:30:00Z"}}, // strictly after
		{"*/15 * * * *", "", "2026-12-01T10:07:59Z", []string{"2026-12-01T10:15:00Z", "2026-12-01T10:30:00Z", "2026-12-01T10:45:00Z", "2026-12-01T11:00:00Z"}},
		{"0 9 * * mon-fri", "", "2026-12-04T10:00:00Z", []string{"2026-12-07T09:00:00Z", "2026-12-08T09:00:00Z"}}, // Fri → Mon
		{"5,10-12/2 0 * * *", "", "2026-12-01T00:00:00Z", []string{"2026-12-01T00:05:00Z", "2026-12-01T00:10:00Z", "2026-12-01T00:12:00Z", "2026-12-02T00:05:00Z"}},
		// Both day fields restricted: either matches (the 13th, or a Friday).
		{"0 0 13 * fri", "", "2026-11-01T00:00:00Z", []string{"2026-11-06T00:00:00Z", "2026-11-13T00:00:00Z", "2026-11-20T00:00:00Z"}},
		{"0 0 1 jan,JUL *", "", "2026-02-01T00:00:00Z", []string{"2026-07-01T00:00:00Z", "2027-01-01T00:00:00Z"}},
		{"0 12 * * 7", "", "2026-12-01T00:00:00Z", []string{"2026-12-06T12:00:00Z"}}, // 7 is Sunday
		{"0 0 29 2 *", "", "2026-01-01T00:00:00Z", []string{"2028-02-29T00:00:00Z"}},
		{"@hourly", "", "2026-12-01T10:59:59Z", []string{"2026-12-01T11:00:00Z", "2026-12-01T12:00:00Z"}},
		{"@daily", "", "2026-12-01T10:00:00Z", []string{"2026-12-02T00:00:00Z"}},
		{"@weekly", "", "2026-12-01T10:00:00Z", []string{"2026-12-06T00:00:00Z", "2026-12-13T00:00:00Z"}},
		{"@monthly", "", "2026-12-01T10:00:00Z", []string{"2027-01-01T00:00:00Z"}},
		{"@yearly", "", "2026-12-01T10:00:00Z", []string{"2027-01-01T00:00:00Z"}},
		{"@annually", "", "2026-12-01T10:00:00Z", []string{"2027-01-01T00:00:00Z"}},
		{"@every 30s", "", "2026-12-01T12:00:10Z", []string{"2026-12-01T12:00:30Z", "2026-12-01T12:01:00Z"}},
		{"@every 1s", "", "2026-12-01T12:00:10.5Z", []string{"2026-12-01T12:00:11Z", "2026-12-01T12:00:12Z"}},
		{"@every 1h30m", "Europe/Berlin", "2026-12-01T00:00:00Z", []string{"2026-12-01T01:30:00Z", "2026-12-01T03:00:00Z"}},
		// In a timezone: 09:00 in Tokyo is 00:00 UTC.
		{"0 9 * * *", "Asia/Tokyo", "2026-12-01T01:00:00Z", []string{"2026-12-02T00:00:00Z"}},
		{"0 9 * * *", "America/New_York", "2026-12-01T00:00:00Z", []string{"2026-12-01T14:00:00Z"}},
	}
	for _, tc := range cases {
		t.Run(strings.ReplaceAll(tc.expr+"_"+tc.tz+"_"+tc.after, " ", "_"), func(t *testing.T) {
			c := mustCron(t, tc.expr, tc.tz)
			at := utc(tc.after)
			if strings.Contains(tc.after, ".") {
				at, _ = time.Parse(time.RFC3339Nano, tc.after)
			}
			for _, w := range tc.want {
				at = c.Next(at)
				if !at.Equal(utc(w)) {
					t.Fatalf("next tick %s, want %s", at.Format(time.RFC3339), w)
				}
			}
		})
	}
}

// ticks lists every tick in [from, to).
func ticks(c *cron.Schedule, from, to time.Time) []time.Time {
	var out []time.Time
	for at := c.Next(from.Add(-time.Nanosecond)); at.Before(to); at = c.Next(at) {
		out = append(out, at)
	}
	return out
}

// A daily 02:30 in Europe/Berlin fires exactly once on both days the clock
// changes: in spring 02:30 does not exist and the job runs at 03:30 summer
// time; in autumn 02:30 happens twice and the job runs at the first.
func TestCronBerlinDST(t *testing.T) {
	t.Parallel()
	c := mustCron(t, "30 2 * * *", "Europe/Berlin")
	berlin, _ := time.LoadLocation("Europe/Berlin")
	for _, tc := range []struct {
		name string
		from string
		want []string
	}{
		{"Spring", "2026-03-28T00:00:00+01:00", []string{
			"2026-03-28T02:30:00+01:00", "2026-03-29T03:30:00+02:00", "2026-03-30T02:30:00+02:00"}},
		{"Autumn", "2026-10-24T00:00:00+02:00", []string{
			"2026-10-24T02:30:00+02:00", "2026-10-25T02:30:00+02:00", "2026-10-26T02:30:00+01:00"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			from, _ := time.Parse(time.RFC3339, tc.from)
			got := ticks(c, from, from.AddDate(0, 0, 3))
			if len(got) != len(tc.want) {
				t.Fatalf("ticks %v, want %v", got, tc.want)
			}
			for i, w := range tc.want {
				wt, _ := time.Parse(time.RFC3339, w)
				if !got[i].Equal(wt) {
					t.Errorf("tick %d: %s, want %s", i, got[i].In(berlin).Format(time.RFC3339), w)
				}
			}
		})
	}
	// Hourly on those days: every wall-clock hour once. Spring has 23
	// (02:00 does not exist and 03:00 is a tick anyway), autumn 24 in 25
	// hours (02:00 happens twice and fires once).
	hourly := mustCron(t, "0 * * * *", "Europe/Berlin")
	for day, want := range map[string]int{"2026-03-29": 23, "2026-10-25": 24, "2026-12-01": 24} {
		from, _ := time.ParseInLocation("2006-01-02", day, berlin)
		to := time.Date(from.Year(), from.Month(), from.Day()+1, 0, 0, 0, 0, berlin)
		if n := len(ticks(hourly, from, to)); n != want {
			t.Errorf("%s: %d hourly ticks, want %d", day, n, want)
		}
	}
}

func TestCronPrev(t *testing.T) {
	t.Parallel()
	c := mustCron(t, "0 * * * *", "")
	since := utc("2026-12-01T02:00:00Z")
	tick, ok := c.Prev(since, utc("2026-12-01T05:10:00Z"))
	if !ok || !tick.Equal(utc("2026-12-01T05:00:00Z")) {
		t.Fatalf("Prev = %v %v, want 05:00", tick, ok)
	}
	// A month of downtime of a minutely schedule: found quickly.
	m := mustCron(t, "* * * * *", "")
	start := time.Now()
	tick, ok = m.Prev(since, since.AddDate(0, 1, 0).Add(30*time.Second))
	if !ok || !tick.Equal(since.AddDate(0, 1, 0)) || time.Since(start) > time.Second {
		t.Fatalf("Prev = %v %v in %v", tick, ok, time.Since(start))
	}
	if _, ok := c.Prev(since, since.Add(30*time.Minute)); ok {
		t.Fatal("no tick in (02:00, 02:30], yet Prev found one")
	}
	e := mustCron(t, "@every 10s", "")
	if tick, ok := e.Prev(since, since.Add(25*time.Second)); !ok || !tick.Equal(since.Add(20*time.Second)) {
		t.Fatalf("@every Prev = %v %v", tick, ok)
	}
}

func TestCronInvalid(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ expr, tz, field, msg string }{
		{"", "", "cron", "is required"},
		{"* * *", "", "cron", "five fields"},
		{"* * * * * *", "", "cron", "five fields"},
		{"61 * * * *", "", "cron", "minute field"},
		{"* 24 * * *", "", "cron", "hour field"},
		{"* * 0 * *", "", "cron", "day of month"},
		{"* * * 13 *", "", "cron", "month field"},
		{"* * * * 8", "", "cron", "day of week"},
		{"*/0 * * * *", "", "cron", "step"},
		{"5-1 * * * *", "", "cron", "backwards"},
		{"a * * * *", "", "cron", "not a value"},
		{"0 0 31 2 *", "", "cron", "never fires"},
		{"@fortnightly", "", "cron", "unknown descriptor"},
		{"@every 500ms", "", "cron", "whole seconds"},
		{"@every 0s", "", "cron", "whole seconds"},
		{"@every 1.5s", "", "cron", "whole seconds"},
		{"@every -5s", "", "cron", "whole seconds"},
		{"@every 9000h", "", "cron", "whole seconds"},
		{"@every soon", "", "cron", "duration"},
		{"@every", "", "cron", "duration"},
		{strings.Repeat("1,", 200) + "1 * * * *", "", "cron", "at most"},
		{"@daily", "Mars/Olympus_Mons", "timezone", "unknown timezone"},
		{"@daily", "Local", "timezone", "IANA"},
		{"@daily", "../../etc/passwd", "timezone", "IANA"},
		{"@daily", "Europe/Berlin\x00", "timezone", "IANA"},
		{"@daily", strings.Repeat("A", 65), "timezone", "IANA"},
	} {
		_, err := cron.Parse(tc.expr, tc.tz)
		var ve *cron.Error
		if !errors.As(err, &ve) || ve.Field != tc.field || !strings.Contains(ve.Message, tc.msg) {
			t.Errorf("Parse(%q, %q) = %v, want a %s error saying %q", tc.expr, tc.tz, err, tc.field, tc.msg)
		}
	}
}
