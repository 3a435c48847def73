// Package window parses the weekly availability windows of phones
// ("mon-fri 22:00-07:00, sat-sun 00:00-24:00 Europe/Berlin") and says
// when one is open, when it closes and when it opens next.
package window

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// A window is a set of spans of wall-clock time in one time zone, each
// given as minutes since Monday 00:00 of a week. Wall-clock time, like a
// schedule's: "22:00-07:00" is from 22:00 to 07:00 local time on the
// nights a clock changes too (that night is an hour shorter or longer).
// A wall-clock time that does not exist (02:30 on the spring night in
// Europe/Berlin) is read as the time package reads it, as much later as
// the clock jumped.

// Bounds of a window's text.
const (
	MaxLen = 500
	// Week is a week in minutes.
	Week = 7 * 24 * 60
)

// Span is [Start, End) in minutes since Monday 00:00 of a week, Start in
// [0, Week). End may pass Week when the span runs on into the next week
// (sun 22:00-07:00 ends at Week+420); End is 0 for a window open all the
// time, whose one span never closes.
type Span struct{ Start, End int }

// Window is a parsed availability window.
type Window struct {
	// Text is the window as written, trimmed.
	Text string
	// Zone is the time zone's name (UTC when the text names none).
	Zone string
	// Spans are sorted by Start and do not overlap. A span that runs on
	// into the next week is also given from Monday 00:00 as a span of its
	// own, so that a minute of the week is in exactly one span.
	Spans []Span

	loc *time.Location
}

// Always reports whether w is open all week.
func (w *Window) Always() bool { return len(w.Spans) == 1 && w.Spans[0].End == 0 }

// Error is a window that does not parse: Pos is the byte offset in the
// text (from 1) where the problem is.
type Error struct {
	Pos int
	Msg string
}

func (e *Error) Error() string { return fmt.Sprintf("at %d: %s", e.Pos, e.Msg) }

var days = map[string]int{"mon": 0, "tue": 1, "wed": 2, "thu": 3, "fri": 4, "sat": 5, "sun": 6}

var (
	zonePattern = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_+/-]{0,63}$`)
	timePattern = regexp.MustCompile(`^([0-9]{2}):([0-9]{2})$`)
)

// Parse reads a window: items separated by commas, each a day or a range
// of days (mon, mon-fri, fri-mon) and a time range (22:00-07:00, 24:00
// ends a day), then an optional time zone name (UTC when absent). A range
// that ends before it starts runs overnight into the next day.
func Parse(text string) (*Window, error) {
	if len(text) > MaxLen {
		return nil, &Error{Pos: MaxLen + 1, Msg: fmt.Sprintf("longer than %d bytes", MaxLen)}
	}
	toks := tokens(text)
	if len(toks) == 0 {
		return nil, &Error{Pos: 1, Msg: "empty: want e.g. mon-fri 22:00-07:00 Europe/Berlin"}
	}
	w := &Window{Text: strings.TrimSpace(text), Zone: "UTC"}
	// The zone is the last word, unless that is a time range or days.
	if last := toks[len(toks)-1]; last.s != "," && !strings.Contains(last.s, ":") && !isDays(last) {
		if !zonePattern.MatchString(last.s) {
			return nil, &Error{Pos: last.pos, Msg: fmt.Sprintf("%q is not a time zone name", last.s)}
		}
		loc, err := time.LoadLocation(last.s)
		if err != nil {
			return nil, &Error{Pos: last.pos, Msg: fmt.Sprintf("unknown time zone %q", last.s)}
		}
		w.Zone, toks = last.s, toks[:len(toks)-1]
		w.loc = loc
	} else {
		w.loc = time.UTC
	}
	var spans []Span
	for len(toks) > 0 {
		if len(toks) < 2 {
			return nil, &Error{Pos: toks[0].pos, Msg: "want days and a time range, e.g. mon-fri 22:00-07:00"}
		}
		first, last, err := parseDays(toks[0])
		if err != nil {
			return nil, err
		}
		from, to, err := parseTimes(toks[1])
		if err != nil {
			return nil, err
		}
		for d := first; ; d = (d + 1) % 7 {
			spans = append(spans, Span{Start: d*1440 + from, End: d*1440 + to})
			if d == last {
				break
			}
		}
		toks = toks[2:]
		if len(toks) > 0 {
			if toks[0].s != "," {
				return nil, &Error{Pos: toks[0].pos, Msg: fmt.Sprintf("want a comma before %q", toks[0].s)}
			}
			if len(toks) == 1 {
				return nil, &Error{Pos: toks[0].pos, Msg: "nothing after the comma"}
			}
			toks = toks[1:]
		}
	}
	w.Spans = normalize(spans)
	return w, nil
}

type token struct {
	s   string
	pos int
}

// tokens splits text at spaces and commas, keeping each comma.
func tokens(text string) []token {
	var out []token
	start := -1
	flush := func(i int) {
		if start >= 0 {
			out = append(out, token{text[start:i], start + 1})
			start = -1
		}
	}
	for i, r := range text {
		switch {
		case r == ',':
			flush(i)
			out = append(out, token{",", i + 1})
		case r == ' ' || r == '\t' || r == '\n':
			flush(i)
		default:
			if start < 0 {
				start = i
			}
		}
	}
	flush(len(text))
	return out
}

func isDays(t token) bool {
	_, _, err := parseDays(t)
	return err == nil
}

func parseDays(t token) (first, last int, err error) {
	a, b, isRange := strings.Cut(strings.ToLower(t.s), "-")
	first, ok := days[a]
	if !ok {
		return 0, 0, &Error{Pos: t.pos, Msg: fmt.Sprintf("%q is not a day (mon, tue, wed, thu, fri, sat, sun)", a)}
	}
	if !isRange {
		return first, first, nil
	}
	last, ok = days[b]
	if !ok {
		return 0, 0, &Error{Pos: t.pos + len(a) + 1, Msg: fmt.Sprintf("%q is not a day (mon, tue, wed, thu, fri, sat, sun)", b)}
	}
	return first, last, nil
}

// parseTimes reads HH:MM-HH:MM as minutes of the day; to is past 1440
// for a range that runs overnight.
func parseTimes(t token) (from, to int, err error) {
	a, b, ok := strings.Cut(t.s, "-")
	if !ok {
		return 0, 0, &Error{Pos: t.pos, Msg: fmt.Sprintf("%q is not a time range like 22:00-07:00", t.s)}
	}
	if from, err = parseTime(a, t.pos, false); err != nil {
		return 0, 0, err
	}
	if to, err = parseTime(b, t.pos+len(a)+1, true); err != nil {
		return 0, 0, err
	}
	switch {
	case from == to:
		return 0, 0, &Error{Pos: t.pos, Msg: fmt.Sprintf("%q is empty: it ends when it starts", t.s)}
	case to < from:
		to += 1440
	}
	return from, to, nil
}

func parseTime(s string, pos int, end bool) (int, error) {
	m := timePattern.FindStringSubmatch(s)
	if m == nil {
		return 0, &Error{Pos: pos, Msg: fmt.Sprintf("%q is not a time like 07:00", s)}
	}
	h, _ := strconv.Atoi(m[1])
	mi, _ := strconv.Atoi(m[2])
	switch {
	case h == 24 && mi == 0 && end:
		return 1440, nil
	case h > 23:
		return 0, &Error{Pos: pos, Msg: fmt.Sprintf("%q: the hour must be 00 to 23 (24:00 only ends a range)", s)}
	case mi > 59:
		return 0, &Error{Pos: pos + 3, Msg: fmt.Sprintf("%q: the minute must be 00 to 59", s)}
	}
	return h*60 + mi, nil
}

// normalize folds spans into the week, merges those that overlap or
// touch, and lets the last one run on into Monday's first.
func normalize(in []Span) []Span {
	var spans []Span
	for _, s := range in {
		if s.End > Week {
			spans = append(spans, Span{0, s.End - Week})
			s.End = Week
		}
		spans = append(spans, s)
	}
	slices.SortFunc(spans, func(a, b Span) int { return a.Start - b.Start })
	var out []Span
	for _, s := range spans {
		if n := len(out); n > 0 && s.Start <= out[n-1].End {
			out[n-1].End = max(out[n-1].End, s.End)
			continue
		}
		out = append(out, s)
	}
	if len(out) == 1 && out[0] == (Span{0, Week}) {
		return []Span{{0, 0}}
	}
	if n := len(out); n > 1 && out[0].Start == 0 && out[n-1].End == Week {
		out[n-1].End += out[0].End
	}
	return out
}

// Location is the window's time zone.
func (w *Window) Location() *time.Location { return w.loc }

// weekStart is Monday 00:00 of t's week, in w's zone, and t's minute of
// that week.
func (w *Window) weekStart(t time.Time) (time.Time, int) {
	l := t.In(w.loc)
	wd := (int(l.Weekday()) + 6) % 7 // Monday 0
	start := time.Date(l.Year(), l.Month(), l.Day()-wd, 0, 0, 0, 0, w.loc)
	return start, wd*1440 + l.Hour()*60 + l.Minute()
}

// at is minute m of the week starting at start, as wall-clock time.
func (w *Window) at(start time.Time, m int) time.Time {
	return time.Date(start.Year(), start.Month(), start.Day()+m/1440, (m%1440)/60, m%60, 0, 0, w.loc)
}

// ClosesAt says whether w is open at t and, if so, when it closes; a
// window open all the time closes never (the zero time).
func (w *Window) ClosesAt(t time.Time) (closes time.Time, open bool) {
	if w.Always() {
		return time.Time{}, true
	}
	start, m := w.weekStart(t)
	for _, s := range w.Spans {
		if s.Start <= m && m < s.End {
			return w.at(start, s.End), true
		}
	}
	return time.Time{}, false
}

// NextOpen is when w next opens at or after t: t itself while it is
// open.
func (w *Window) NextOpen(t time.Time) time.Time {
	if _, open := w.ClosesAt(t); open {
		return t
	}
	start, m := w.weekStart(t)
	for _, s := range w.Spans {
		if s.Start > m {
			return w.at(start, s.Start)
		}
	}
	return w.at(start, Week+w.Spans[0].Start)
}
