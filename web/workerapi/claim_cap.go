package workerapi

import "sync"

// DefaultMaxClaimsPerToken is Config.MaxClaimsPerToken's default. A
// worker needs one waiting claim (worker.Worker claims one at a time);
// a few more cover a poll the server still holds for a connection the
// worker already dropped.
const DefaultMaxClaimsPerToken = 4

// claimRetryAfter is the Retry-After of a claim refused by the cap.
const claimRetryAfter = 2 // seconds

// openClaims counts the claims each worker token has open, so that one
// token (stolen, or a buggy script) cannot hold the server's connections
// with long polls: past max, a claim is refused at once.
type openClaims struct {
	max int
	mu  sync.Mutex
	n   map[string]int // by token name, the worker's identity
}

func newOpenClaims(max int) *openClaims {
	return &openClaims{max: max, n: make(map[string]int)}
}

// acquire counts a claim of worker, or reports false when worker
// already has max open; each true is paired with a release.
func (o *openClaims) acquire(worker string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.n[worker] >= o.max {
		return false
	}
	o.n[worker]++
	return true
}

func (o *openClaims) release(worker string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.n[worker]--; o.n[worker] <= 0 {
		delete(o.n, worker)
	}
}
