// Package cron parses the cron expressions of schedules and computes
// their ticks in a timezone.
package cron

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Cron expressions are parsed here rather than by a library. Of the cron
// parsers the module proxy serves us, robfig/cron/v3 has had no release
// since 2020, and go-co-op/gocron is a whole in-process scheduler that
// parses with robfig/cron underneath; neither lets us say what happens on
// the days a clock changes, which a schedule in a timezone must. The
// grammar is small: five fields, a few descriptors and @every.
//
// Times are wall-clock times in the schedule's timezone:
//   - a wall-clock time that occurs twice (autumn: 02:30 in Europe/Berlin)
//     fires once, at its first occurrence;
//   - a wall-clock time that does not exist (spring: 02:30 in
//     Europe/Berlin) fires once, as much later as the clock jumped (03:30
//     summer time), unless that instant is a tick of its own anyway.
//
// @every d fires at the multiples of d since the Unix epoch, so every
// server computes the same ticks; it is not affected by a timezone.

// Bounds of a schedule's cron.
const (
	maxCronLen = 200
	// MinEvery and MaxEvery bound @every.
	MinEvery = time.Second
	MaxEvery = 366 * 24 * time.Hour
	// cronHorizon is how far ahead a tick is looked for: an expression
	// with none in that time (0 0 30 2 *) is refused.
	cronHorizon = 5 * 366 // days
)

// Schedule is a parsed cron expression: when its ticks fall.
type Schedule struct {
	every time.Duration // @every; the fields below are unused then
	loc   *time.Location

	minute, hour, dom, month, dow uint64 // bit n set: value n matches
	domStar, dowStar              bool   // the field starts with '*'
}

var descriptors = map[string]string{
	"@yearly":   "0 0 1 1 *",
	"@annually": "0 0 1 1 *",
	"@monthly":  "0 0 1 * *",
	"@weekly":   "0 0 * * 0",
	"@daily":    "0 0 * * *",
	"@midnight": "0 0 * * *",
	"@hourly":   "0 * * * *",
}

var timezonePattern = regexp.MustCompile(`^[A-Za-z0-9_+/-]{1,64}$`)

// LoadTimezone reads an IANA timezone name ("" is UTC). "Local" is
// refused: it would mean whatever the server machine is set to.
func LoadTimezone(name string) (*time.Location, error) {
	if name == "" || name == "UTC" {
		return time.UTC, nil
	}
	if name == "Local" || !timezonePattern.MatchString(name) {
		return nil, invalid("timezone", "must be an IANA timezone name such as Europe/Berlin")
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, invalid("timezone", "unknown timezone %q: must be an IANA timezone name such as Europe/Berlin", name)
	}
	return loc, nil
}

// Parse parses a 5-field cron expression (minute hour day-of-month
// month day-of-week), a descriptor (@hourly, @daily, @weekly, @monthly,
// @yearly) or @every DURATION (whole seconds, 1s to 366 days), for the
// timezone tz (an IANA name; "" is UTC). Errors are *Error on the field
// "cron" or "timezone".
func Parse(expr, tz string) (*Schedule, error) {
	loc, err := LoadTimezone(tz)
	if err != nil {
		return nil, err
	}
	expr = strings.TrimSpace(expr)
	if expr == "" {
		return nil, invalid("cron", "is required: five fields (minute hour day month weekday), @daily, @hourly, or @every 30s")
	}
	if len(expr) > maxCronLen {
		return nil, invalid("cron", "must be at most %d characters", maxCronLen)
	}
	if rest, ok := strings.CutPrefix(expr, "@every"); ok && (rest == "" || rest[0] == ' ' || rest[0] == '\t') {
		return parseEvery(strings.TrimSpace(rest), loc)
	}
	if strings.HasPrefix(expr, "@") {
		std, ok := descriptors[strings.ToLower(expr)]
		if !ok {
			return nil, invalid("cron", "unknown descriptor %q: use @yearly, @monthly, @weekly, @daily, @hourly or @every DURATION", expr)
		}
		expr = std
	}
	fields := strings.Fields(expr)
	if len(fields) != 5 {
		return nil, invalid("cron", "must have five fields (minute hour day month weekday), not %d", len(fields))
	}
	c := &Schedule{loc: loc}
	specs := []struct {
		name     string
		min, max int
		names    []string
		dst      *uint64
	}{
		{"minute", 0, 59, nil, &c.minute},
		{"hour", 0, 23, nil, &c.hour},
		{"day of month", 1, 31, nil, &c.dom},
		{"month", 1, 12, monthNames, &c.month},
		{"day of week", 0, 7, dayNames, &c.dow},
	}
	for i, s := range specs {
		bitsSet, err := parseField(fields[i], s.min, s.max, s.names)
		if err != nil {
			return nil, invalid("cron", "%s field %q: %s", s.name, fields[i], err)
		}
		*s.dst = bitsSet
	}
	if c.dow&(1<<7) != 0 { // 7 is Sunday too
		c.dow = c.dow&^(1<<7) | 1
	}
	c.domStar, c.dowStar = fields[2][0] == '*', fields[4][0] == '*'
	// Refuse what never fires (0 0 31 2 *) rather than sleep forever.
	if c.Next(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)).IsZero() {
		return nil, invalid("cron", "%q never fires", expr)
	}
	return c, nil
}

func parseEvery(s string, loc *time.Location) (*Schedule, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		return nil, invalid("cron", "@every takes a duration such as 30s, 5m or 1h30m")
	}
	if d < MinEvery || d > MaxEvery || d%time.Second != 0 {
		return nil, invalid("cron", "@every must be whole seconds, from 1s to %s", MaxEvery)
	}
	return &Schedule{every: d, loc: loc}, nil
}

var (
	monthNames = []string{"", "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"}
	dayNames   = []string{"sun", "mon", "tue", "wed", "thu", "fri", "sat"}
)

// parseField reads one field: a comma-separated list of *, N, N-M, each
// optionally /STEP (N/STEP runs from N to the field's maximum).
func parseField(f string, lo, hi int, names []string) (uint64, error) {
	var set uint64
	for part := range strings.SplitSeq(f, ",") {
		rng, stepText, hasStep := strings.Cut(part, "/")
		step := 1
		if hasStep {
			n, err := strconv.Atoi(stepText)
			if err != nil || n < 1 || n > hi {
				return 0, fmt.Errorf("step must be a number from 1 to %d", hi)
			}
			step = n
		}
		var from, to int
		switch {
		case rng == "*":
			from, to = lo, hi
		case strings.Contains(rng, "-"):
			a, b, _ := strings.Cut(rng, "-")
			var err error
			if from, err = fieldValue(a, lo, hi, names); err != nil {
				return 0, err
			}
			if to, err = fieldValue(b, lo, hi, names); err != nil {
				return 0, err
			}
			if to < from {
				return 0, fmt.Errorf("range %s goes backwards", rng)
			}
		default:
			v, err := fieldValue(rng, lo, hi, names)
			if err != nil {
				return 0, err
			}
			from, to = v, v
			if hasStep {
				to = hi
			}
		}
		for v := from; v <= to; v += step {
			set |= 1 << v
		}
	}
	return set, nil
}

func fieldValue(s string, lo, hi int, names []string) (int, error) {
	for i, n := range names {
		if n != "" && strings.EqualFold(s, n) {
			return i, nil
		}
	}
	v, err := strconv.Atoi(s)
	if err != nil || v < lo || v > hi {
		return 0, fmt.Errorf("%q is not a value from %d to %d", s, lo, hi)
	}
	return v, nil
}

// Every is the interval of an @every schedule, 0 for a cron expression.
func (c *Schedule) Every() time.Duration { return c.every }

// Next is the first tick strictly after t, or the zero time when there is
// none within five years.
func (c *Schedule) Next(t time.Time) time.Time {
	if c.every > 0 {
		return time.Unix(0, 0).Add((t.Sub(time.Unix(0, 0)) / c.every) * c.every).Add(c.every).UTC()
	}
	// Candidates are walked in wall-clock order. A jump forward moves a
	// skipped time later by the jump (at most a few hours), so candidates
	// from a little before t's wall time may still come after t; and once
	// a tick is found, a candidate whose wall time is later than the
	// tick's cannot beat it.
	tw := wallTime(t.In(c.loc))
	from := tw.Add(-maxClockJump)
	day := time.Date(from.Year(), from.Month(), from.Day(), 0, 0, 0, 0, time.UTC)
	var best, bestWall time.Time
	for i := 0; i < cronHorizon; i++ {
		d := day.AddDate(0, 0, i)
		if !best.IsZero() && bestWall.Before(d) {
			break
		}
		if !c.dayMatches(d) {
			continue
		}
		for h := range 24 {
			if c.hour&(1<<h) == 0 {
				continue
			}
			for m := range 60 {
				if c.minute&(1<<m) == 0 {
					continue
				}
				cw := d.Add(time.Duration(h)*time.Hour + time.Duration(m)*time.Minute)
				if cw.Before(from) {
					continue
				}
				if !best.IsZero() && cw.After(bestWall) {
					return best
				}
				at := c.resolve(d.Year(), d.Month(), d.Day(), h, m)
				if at.After(t) && (best.IsZero() || at.Before(best)) {
					best, bestWall = at, wallTime(at.In(c.loc))
				}
			}
		}
	}
	return best
}

// maxClockJump bounds how far a timezone's clock jumps forward at once.
const maxClockJump = 3 * time.Hour

// wallTime is the wall-clock reading of t as a plain calendar time (UTC).
func wallTime(t time.Time) time.Time {
	return time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), 0, time.UTC)
}

// Prev is the last tick at or before t and after since; ok is false when
// there is none in (since, t].
func (c *Schedule) Prev(since, t time.Time) (tick time.Time, ok bool) {
	if c.every > 0 {
		p := time.Unix(0, 0).Add((t.Sub(time.Unix(0, 0)) / c.every) * c.every).UTC()
		return p, p.After(since)
	}
	// After a long downtime, start from a recent window that holds a
	// tick rather than step through every tick since.
	start := since
	for _, w := range []time.Duration{time.Hour, 48 * time.Hour} {
		if t.Sub(since) <= w {
			break
		}
		if n := c.Next(t.Add(-w)); !n.IsZero() && !n.After(t) {
			start = n.Add(-time.Nanosecond)
			break
		}
	}
	for n := c.Next(start); !n.IsZero() && !n.After(t); n = c.Next(n) {
		tick, ok = n, true
	}
	return tick, ok
}

func (c *Schedule) dayMatches(d time.Time) bool {
	if c.month&(1<<int(d.Month())) == 0 {
		return false
	}
	domOK := c.dom&(1<<d.Day()) != 0
	dowOK := c.dow&(1<<int(d.Weekday())) != 0
	// Standard cron: when both day fields are restricted, either may match.
	if !c.domStar && !c.dowStar {
		return domOK || dowOK
	}
	return domOK && dowOK
}

// resolve is the instant of a wall-clock time in c.loc: its first
// occurrence when the clock shows it twice; when the clock skips it, the
// instant it would be with the offset before the jump (02:30 becomes
// 03:30 after a one-hour jump forward).
func (c *Schedule) resolve(y int, mo time.Month, d, h, mi int) time.Time {
	wall := time.Date(y, mo, d, h, mi, 0, 0, time.UTC)
	// The offsets in force a day before and a day after: clocks change at
	// most once in between.
	_, before := wall.Add(-24 * time.Hour).In(c.loc).Zone()
	_, after := wall.Add(24 * time.Hour).In(c.loc).Zone()
	var best time.Time
	for _, off := range []int{before, after} {
		at := wall.Add(-time.Duration(off) * time.Second)
		lw := at.In(c.loc)
		if lw.Year() == y && lw.Month() == mo && lw.Day() == d && lw.Hour() == h && lw.Minute() == mi &&
			(best.IsZero() || at.Before(best)) {
			best = at
		}
	}
	if best.IsZero() { // skipped by a jump forward
		best = wall.Add(-time.Duration(before) * time.Second)
	}
	return best.UTC()
}
