package cron

import "fmt"

// Error is a refused expression or timezone: Field is "cron" or
// "timezone", Message says why.
type Error struct {
	Field   string
	Message string
}

func (e *Error) Error() string { return e.Field + ": " + e.Message }

func invalid(field, format string, args ...any) *Error {
	return &Error{Field: field, Message: fmt.Sprintf(format, args...)}
}
