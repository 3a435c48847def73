package window_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/window"
)

func mustParse(t *testing.T, text string) *window.Window {
	t.Helper()
	w, err := window.Parse(text)
	if err != nil {
		t.Fatalf("Parse(%q): %v", text, err)
	}
	return w
}

func at(t *testing.T, zone, s string) time.Time {
	t.Helper()
	loc, err := time.LoadLocation(zone)
	if err != nil {
		t.Fatal(err)
	}
	v, err := time.ParseInLocation("2006-01-02 15:04", s, loc)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestParseSpans(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		text string
		zone string
		want []window.Span
	}{
		{"mon 09:00-17:00", "UTC", []window.Span{{540, 1020}}},
		// Overnight: Friday's night runs into Saturday, Sunday's into
		// Monday of the next week (and so from Monday 00:00 too).
		{"fri 22:00-07:00 Europe/Berlin", "Europe/Berlin", []window.Span{{4*1440 + 1320, 5*1440 + 420}}},
		{"sun 22:00-07:00", "UTC", []window.Span{{0, 420}, {6*1440 + 1320, window.Week + 420}}},
		// The example: Friday's night and the whole weekend merge
		// into one span from Friday 22:00 to Monday 00:00 (Sunday's
		// 24:00; the weekday nights start on Monday evening).
		{"mon-fri 22:00-07:00, sat-sun 00:00-24:00 Europe/Berlin", "Europe/Berlin", []window.Span{
			{1320, 1440 + 420}, {1440 + 1320, 2*1440 + 420}, {2*1440 + 1320, 3*1440 + 420},
			{3*1440 + 1320, 4*1440 + 420}, {4*1440 + 1320, window.Week}}},
		{"mon-sun 00:00-24:00", "UTC", []window.Span{{0, 0}}},
		{"fri-mon 10:00-11:00", "UTC", []window.Span{{600, 660}, {4*1440 + 600, 4*1440 + 660}, {5*1440 + 600, 5*1440 + 660}, {6*1440 + 600, 6*1440 + 660}}},
		{"MON 08:00-09:00,mon 09:00-10:00 America/New_York", "America/New_York", []window.Span{{480, 600}}},
	} {
		t.Run(tc.text, func(t *testing.T) {
			w := mustParse(t, tc.text)
			if w.Zone != tc.zone {
				t.Errorf("zone %q, want %q", w.Zone, tc.zone)
			}
			if len(w.Spans) != len(tc.want) {
				t.Fatalf("spans %v, want %v", w.Spans, tc.want)
			}
			for i := range tc.want {
				if w.Spans[i] != tc.want[i] {
					t.Fatalf("spans %v, want %v", w.Spans, tc.want)
				}
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		text string
		pos  int
		msg  string
	}{
		{"", 1, "empty"},
		{"   ", 1, "empty"},
		{"mon", 1, "want days and a time range"},
		{"09:00-17:00", 1, "want days and a time range"},
		{"09:00-17:00 mon", 1, `"09:00" is not a day`},
		{"mon 09:00-17:00 Mars", 17, "unknown time zone"},
		{"mon 09:00-17:00 Mars/Olympus", 17, "unknown time zone"},
		{"mon 09:00-17:00 Europe/Berlin;", 17, "not a time zone name"},
		{"mo 09:00-17:00", 1, `"mo" is not a day`},
		{"mon-fry 09:00-17:00", 5, `"fry" is not a day`},
		{"mon 9:00-17:00", 5, "not a time like"},
		{"mon 09:00-17:60", 14, "minute must be"},
		{"mon 25:00-17:00", 5, "hour must be"},
		{"mon 24:00-17:00", 5, "24:00 only ends"},
		{"mon 09:00-09:00", 5, "empty: it ends when it starts"},
		{"mon 09:00", 5, "not a time range"},
		{"mon 09:00-17:00 tue 09:00-17:00", 17, "want a comma"},
		{"mon 09:00-17:00,", 16, "nothing after the comma"},
		{"mon 09:00-17:00, tue", 18, "want days and a time range"},
		{strings.Repeat("mon 09:00-10:00, ", 40), window.MaxLen + 1, "longer than"},
	} {
		t.Run(tc.text, func(t *testing.T) {
			_, err := window.Parse(tc.text)
			var e *window.Error
			if !errors.As(err, &e) {
				t.Fatalf("Parse(%q) = %v, want a *window.Error", tc.text, err)
			}
			if e.Pos != tc.pos || !strings.Contains(e.Msg, tc.msg) {
				t.Errorf("Parse(%q) = %q at %d, want %q at %d", tc.text, e.Msg, e.Pos, tc.msg, tc.pos)
			}
		})
	}
}

// TestOpenAndClose walks the clock through weeks that hold a clock
// change: Europe/Berlin springs forward on 2026-03-29 and falls back on
// 2026-10-25, America/New_York on 2026-03-08 and 2026-11-01.
func TestOpenAndClose(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		text       string
		now        string
		open       bool
		closes     string // local, when open ("" for never)
		next       string // local
		closesDur  time.Duration
		nextInside time.Duration // now to next opening, when closed
	}{
		{name: "WeekdayDaytimeClosed", text: "mon-fri 22:00-07:00, sat-sun 00:00-24:00 Europe/Berlin",
			now: "2026-12-02 18:50", next: "2026-12-02 22:00", nextInside: 3*time.Hour + 10*time.Minute},
		{name: "OvernightOpenAfterMidnight", text: "mon-fri 22:00-07:00 Europe/Berlin",
			now: "2026-12-03 03:00", open: true, closes: "2026-12-03 07:00", closesDur: 4 * time.Hour},
		{name: "FridayNightRunsThroughWeekend", text: "mon-fri 22:00-07:00, sat-sun 00:00-24:00 Europe/Berlin",
			now: "2026-12-04 23:00", open: true, closes: "2026-12-07 00:00"},
		{name: "SundayNightIntoNextWeek", text: "sun 22:00-07:00 UTC",
			now: "2026-12-06 23:00", open: true, closes: "2026-12-07 07:00", closesDur: 8 * time.Hour},
		{name: "NextOpeningNextWeek", text: "mon 09:00-10:00 UTC",
			now: "2026-12-08 12:00", next: "2026-12-14 09:00"},
		{name: "AlwaysOpen", text: "mon-sun 00:00-24:00 Europe/Berlin", now: "2026-12-08 12:00", open: true},
		// The spring night is an hour shorter: 22:00 to 07:00 is 8 h.
		{name: "BerlinSpringForward", text: "sat 22:00-07:00 Europe/Berlin",
			now: "2026-03-28 22:00", open: true, closes: "2026-03-29 07:00", closesDur: 8 * time.Hour},
		// The autumn night is an hour longer: 10 h.
		{name: "BerlinFallBack", text: "sat 22:00-07:00 Europe/Berlin",
			now: "2026-10-24 22:00", open: true, closes: "2026-10-25 07:00", closesDur: 10 * time.Hour},
		{name: "BerlinClosedAcrossSpringForward", text: "sun 09:00-10:00 Europe/Berlin",
			now: "2026-03-29 01:00", next: "2026-03-29 09:00", nextInside: 7 * time.Hour},
		// Saturday 20:00 EST to Sunday 08:00 EDT: 11 h, not 12.
		{name: "NewYorkSpringForward", text: "sat-sun 20:00-08:00 America/New_York",
			now: "2026-03-07 20:00", open: true, closes: "2026-03-08 08:00", closesDur: 11 * time.Hour},
		{name: "NewYorkFallBackClosed", text: "sun 12:00-13:00 America/New_York",
			now: "2026-11-01 00:30", next: "2026-11-01 12:00", nextInside: 12*time.Hour + 30*time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := mustParse(t, tc.text)
			zone := w.Zone
			now := at(t, zone, tc.now)
			closes, open := w.ClosesAt(now)
			if open != tc.open {
				t.Fatalf("open at %s = %v, want %v", now, open, tc.open)
			}
			if open {
				if tc.closes == "" {
					if !closes.IsZero() {
						t.Errorf("closes %s, want never", closes)
					}
				} else if want := at(t, zone, tc.closes); !closes.Equal(want) {
					t.Errorf("closes %s, want %s", closes, want)
				}
				if tc.closesDur != 0 && closes.Sub(now) != tc.closesDur {
					t.Errorf("open for %s more, want %s", closes.Sub(now), tc.closesDur)
				}
				if next := w.NextOpen(now); !next.Equal(now) {
					t.Errorf("NextOpen while open = %s, want now", next)
				}
				return
			}
			next := w.NextOpen(now)
			if want := at(t, zone, tc.next); !next.Equal(want) {
				t.Errorf("next opening %s, want %s", next, want)
			}
			if tc.nextInside != 0 && next.Sub(now) != tc.nextInside {
				t.Errorf("opens in %s, want %s", next.Sub(now), tc.nextInside)
			}
			if _, open := w.ClosesAt(next); !open {
				t.Errorf("not open at its next opening %s", next)
			}
		})
	}
}
