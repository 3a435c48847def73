package queue

import (
	"errors"
	"time"

	"github.com/leasehold/leasehold/cron"
)

// ParseCron is cron.Parse with its refusal as a *ValidationError on the
// field "cron" or "timezone", as every other check of a schedule.
func ParseCron(expr, tz string) (*cron.Schedule, error) {
	c, err := cron.Parse(expr, tz)
	return c, cronRefused(err)
}

// LoadTimezone is cron.LoadTimezone with its refusal as a
// *ValidationError on the field "timezone".
func LoadTimezone(name string) (*time.Location, error) {
	loc, err := cron.LoadTimezone(name)
	return loc, cronRefused(err)
}

func cronRefused(err error) error {
	if ce, ok := errors.AsType[*cron.Error](err); ok {
		return &ValidationError{Field: ce.Field, Message: ce.Message}
	}
	return err
}
