package dashboard

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The keep-alives of many streams, of many sessions, share one check of
// every open session per interval: a hundred dashboards cost one
// statement, not a hundred. A signed-out session is refused; a failed
// check ends nothing and is not remembered.
func TestSessionStreamsShareOneCheckPerInterval(t *testing.T) {
	t.Parallel()
	s := newSessionStreams(8)
	var checks atomic.Int64
	signedOut := sessionKey("session-7")
	var fail atomic.Bool
	check := func(_ context.Context, keys [][32]byte) (map[[32]byte]bool, error) {
		checks.Add(1)
		time.Sleep(5 * time.Millisecond) // a statement takes a moment
		if fail.Load() {
			return nil, errors.New("database down")
		}
		alive := map[[32]byte]bool{}
		for _, k := range keys {
			alive[k] = k != signedOut
		}
		return alive, nil
	}
	for i := range 100 {
		if _, ok := s.add(fmt.Sprintf("session-%d", i)); !ok {
			t.Fatal("stream refused")
		}
	}
	ctx := context.Background()
	var wg sync.WaitGroup
	var refused atomic.Int64
	for i := range 100 {
		wg.Go(func() {
			if !s.live(ctx, fmt.Sprintf("session-%d", i), time.Minute, check) {
				refused.Add(1)
			}
		})
	}
	wg.Wait()
	if n := checks.Load(); n != 1 {
		t.Fatalf("%d checks for 100 sessions' keep-alives, want 1", n)
	}
	if n := refused.Load(); n != 1 {
		t.Fatalf("%d streams ended, want the signed-out session's 1", n)
	}
	// A session that opened after the check is checked anew.
	s.add("late")
	if !s.live(ctx, "late", time.Minute, check) || checks.Load() != 2 {
		t.Fatalf("late session: %d checks, want 2", checks.Load())
	}
	// Past the interval, a failed check ends nothing, and the next
	// keep-alive checks again.
	fail.Store(true)
	if !s.live(ctx, "session-1", 0, check) {
		t.Fatal("a failed check ended a stream")
	}
	fail.Store(false)
	if s.live(ctx, "session-7", time.Minute, check) || checks.Load() != 4 {
		t.Fatalf("after a failed check: %d checks, want 4, and session-7 refused", checks.Load())
	}
}
