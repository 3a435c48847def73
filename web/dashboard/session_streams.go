package dashboard

import (
	"crypto/sha256"
	"sync"
)

// DefaultMaxStreamsPerSession is Config.MaxStreamsPerSession's default:
// a person with a few tabs open, each with one stream.
const DefaultMaxStreamsPerSession = 8

// streamRetryAfter is the Retry-After of a refused stream; the page polls
// meanwhile (app.js).
const streamRetryAfter = 5 // seconds

// sessionStreams keeps the event streams open by each session: at most
// max of them, so that one session cannot take the hub's global cap from
// everyone else's pages, and a sign-out ends them all at once.
type sessionStreams struct {
	max  int
	mu   sync.Mutex
	open map[[32]byte]map[*sessionStream]struct{}
}

// sessionStream is one open stream of a session; ended is closed when
// its session signs out.
type sessionStream struct {
	ended chan struct{}
	once  sync.Once
}

func newSessionStreams(max int) *sessionStreams {
	return &sessionStreams{max: max, open: make(map[[32]byte]map[*sessionStream]struct{})}
}

// sessionKey keeps no session token in memory, only its hash.
func sessionKey(token string) [32]byte { return sha256.Sum256([]byte(token)) }

// add opens a stream for the session of token, or reports false when
// it already has max open; each stream is closed with remove.
func (s *sessionStreams) add(token string) (*sessionStream, bool) {
	k := sessionKey(token)
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.open[k]) >= s.max {
		return nil, false
	}
	if s.open[k] == nil {
		s.open[k] = make(map[*sessionStream]struct{})
	}
	st := &sessionStream{ended: make(chan struct{})}
	s.open[k][st] = struct{}{}
	return st, true
}

func (s *sessionStreams) remove(token string, st *sessionStream) {
	k := sessionKey(token)
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.open[k], st)
	if len(s.open[k]) == 0 {
		delete(s.open, k)
	}
}

// end ends every stream of the session of token (it signed out).
func (s *sessionStreams) end(token string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for st := range s.open[sessionKey(token)] {
		st.once.Do(func() { close(st.ended) })
	}
}
