package api

import "encoding/json"

// Queue is a queue's settings and how many of its jobs wait and run.
type Queue struct {
	Name   string `json:"name"`
	Paused bool   `json:"paused"`
	// PausedBy and PausedAt describe the latest pause (kept after a resume).
	PausedBy *string `json:"paused_by"`
	PausedAt *Time   `json:"paused_at"`
	// MaxRunning caps the queue's running jobs; nil: no cap.
	MaxRunning *int32 `json:"max_running"`
	// Pending is exact up to 100,000; past it PendingOver is true.
	Pending     int64 `json:"pending"`
	PendingOver bool  `json:"pending_over"`
	Running     int64 `json:"running"`
}

// Queues is GET /api/v1/queues: every queue that has jobs or settings.
type Queues struct {
	Queues []Queue `json:"queues"`
}

// QueuePatch is the body of PATCH /api/v1/queues/{name}: absent fields
// stay as they are. Paused may not be null; MaxRunning null removes the cap.
type QueuePatch struct {
	Paused     Nullable[bool]  `json:"paused,omitzero"`
	MaxRunning Nullable[int32] `json:"max_running,omitzero"`
}

// Nullable is a field of a PATCH body that may be absent (Set false: it
// stays as it is), null (Set with a nil Value) or a value.
type Nullable[T any] struct {
	Set   bool
	Value *T
}

// Value is the Nullable that sets v.
func Value[T any](v T) Nullable[T] { return Nullable[T]{Set: true, Value: &v} }

// Null is the Nullable that sends null.
func Null[T any]() Nullable[T] { return Nullable[T]{Set: true} }

// IsZero reports whether n is absent (encoding/json's omitzero).
func (n Nullable[T]) IsZero() bool { return !n.Set }

// MarshalJSON implements json.Marshaler: the value, or null.
func (n Nullable[T]) MarshalJSON() ([]byte, error) { return json.Marshal(n.Value) }

// UnmarshalJSON implements json.Unmarshaler: a present field, null or not.
func (n *Nullable[T]) UnmarshalJSON(b []byte) error {
	n.Set, n.Value = true, nil
	if string(b) == "null" {
		return nil
	}
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	n.Value = &v
	return nil
}
