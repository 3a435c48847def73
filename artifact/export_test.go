package artifact

import "time"

// SetGCHooks sets the collector's grace period and a hook it calls just
// before it moves a file away, for tests.
func (s *Store) SetGCHooks(grace time.Duration, beforeRemove func(sum string)) {
	s.gcGrace, s.beforeRemove = grace, beforeRemove
}
