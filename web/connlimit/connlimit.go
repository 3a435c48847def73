// Package connlimit is the server's listener. It bounds the connections
// open at once (past the bound, new ones wait in the kernel's backlog),
// bounds those of one client address below that, so that no single
// client can take every slot, and closes idle keep-alive connections
// early while the server is near its bound.
//
// A connection is accepted before any request on it is read, so the
// bound per client is by TCP peer: every client behind a reverse proxy
// shares the proxy's address, and trusted proxies are therefore left out
// of it (Config.Exempt). Per-token and per-session bounds, which the
// handlers enforce, hold behind a proxy too.
package connlimit

import (
	"cmp"
	"container/list"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// Config is how a Listener bounds its connections.
type Config struct {
	// Max bounds the connections open at once (at least 1).
	Max int
	// PerClient bounds the connections one client address may have open
	// at once; a connection past it is closed as soon as it is accepted.
	// 0: half of Max; negative: no bound. It is at most Max.
	PerClient int
	// Exempt are the peers PerClient does not bound: the trusted reverse
	// proxies, whose one address is that of every client behind them.
	Exempt []netip.Prefix
	// NearCap is the number of open connections above which idle ones
	// are closed once idle for IdleNearCap (default: 80 % of Max).
	NearCap int
	// IdleNearCap is how long a keep-alive connection may stay idle while
	// more than NearCap are open (default 5 s), instead of the server's
	// IdleTimeout.
	IdleNearCap time.Duration
	Logger      *slog.Logger
}

// DefaultIdleNearCap is Config.IdleNearCap's default.
const DefaultIdleNearCap = 5 * time.Second

// Listener is a net.Listener with the bounds of its Config. Give its
// ConnState to the http.Server that serves it, so that it knows which
// connections are idle.
type Listener struct {
	net.Listener
	cfg   Config
	slots chan struct{} // one per open connection, Max in all
	done  chan struct{}
	close sync.Once

	mu       sync.Mutex
	byClient map[netip.Addr]int
	open     int
	idle     list.List // of *conn, longest idle first

	refused  atomic.Int64
	lastWarn atomic.Int64 // unix nanoseconds of the last refusal logged
}

// New wraps ln with the bounds of cfg.
func New(ln net.Listener, cfg Config) *Listener {
	cfg.Max = max(cfg.Max, 1)
	switch {
	case cfg.PerClient == 0:
		cfg.PerClient = max(1, cfg.Max/2)
	case cfg.PerClient > cfg.Max:
		cfg.PerClient = cfg.Max
	}
	cfg.NearCap = cmp.Or(cfg.NearCap, cfg.Max*4/5)
	cfg.IdleNearCap = cmp.Or(cfg.IdleNearCap, DefaultIdleNearCap)
	cfg.Logger = cmp.Or(cfg.Logger, slog.Default())
	l := &Listener{
		Listener: ln, cfg: cfg,
		slots: make(chan struct{}, cfg.Max), done: make(chan struct{}),
		byClient: make(map[netip.Addr]int),
	}
	go l.sweepLoop()
	return l
}

// PerClient is the bound per client address in force (negative: none).
func (l *Listener) PerClient() int { return l.cfg.PerClient }

// Refused counts the connections closed for their client's bound.
func (l *Listener) Refused() int64 { return l.refused.Load() }

// Open is the number of connections open now.
func (l *Listener) Open() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.open
}

// Accept waits for a free slot, then for a connection; one whose client
// is at its bound is closed and the next awaited.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		select {
		case l.slots <- struct{}{}:
		case <-l.done:
			return nil, net.ErrClosed
		}
		nc, err := l.Listener.Accept()
		if err != nil {
			<-l.slots
			return nil, err
		}
		c := &conn{Conn: nc, l: l, client: clientOf(nc)}
		if !l.admit(c) {
			_ = nc.Close()
			<-l.slots
			l.warnRefused(c.client)
			continue
		}
		l.sweep(time.Now())
		return c, nil
	}
}

// Close stops accepting; open connections stay open.
func (l *Listener) Close() error {
	l.close.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// admit counts c, or reports false when its client is at its bound.
func (l *Listener) admit(c *conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.bounded(c.client) && l.byClient[c.client] >= l.cfg.PerClient {
		return false
	}
	l.byClient[c.client]++
	l.open++
	return true
}

func (l *Listener) bounded(a netip.Addr) bool {
	if l.cfg.PerClient < 0 || !a.IsValid() {
		return false
	}
	for _, p := range l.cfg.Exempt {
		if p.Contains(a) {
			return false
		}
	}
	return true
}

func (l *Listener) warnRefused(a netip.Addr) {
	l.refused.Add(1)
	// At most one line every 10 s: a flood must not flood the log too.
	now, last := time.Now().UnixNano(), l.lastWarn.Load()
	if now-last < int64(10*time.Second) || !l.lastWarn.CompareAndSwap(last, now) {
		return
	}
	l.cfg.Logger.Warn("closing connections past a client's bound (--max-connections-per-client)",
		"client", a.String(), "bound", l.cfg.PerClient, "refused_so_far", l.refused.Load())
}

// ConnState is the http.Server ConnState hook that tells the listener
// which connections are idle.
func (l *Listener) ConnState(nc net.Conn, s http.ConnState) {
	c, ok := nc.(*conn)
	if !ok {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if c.idle != nil {
		l.idle.Remove(c.idle)
		c.idle = nil
	}
	if s == http.StateIdle && !c.released {
		c.idleSince = time.Now()
		c.idle = l.idle.PushBack(c)
	}
}

// sweepLoop closes connections idle too long while near the bound, until
// the listener is closed.
func (l *Listener) sweepLoop() {
	t := time.NewTicker(max(l.cfg.IdleNearCap/5, 10*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-l.done:
			return
		case now := <-t.C:
			l.sweep(now)
		}
	}
}

// sweep closes, while more than NearCap connections are open, those idle
// for IdleNearCap or longer, longest idle first.
func (l *Listener) sweep(now time.Time) {
	var stale []*conn
	l.mu.Lock()
	for e := l.idle.Front(); e != nil && l.open-len(stale) > l.cfg.NearCap; {
		c := e.Value.(*conn)
		if now.Sub(c.idleSince) < l.cfg.IdleNearCap {
			break
		}
		next := e.Next()
		l.idle.Remove(e)
		c.idle = nil
		stale = append(stale, c)
		e = next
	}
	l.mu.Unlock()
	for _, c := range stale {
		_ = c.Close() // the server's read of its next request fails, and it lets go
	}
}

// release uncounts c once it is closed.
func (l *Listener) release(c *conn) {
	l.mu.Lock()
	c.released = true
	if c.idle != nil {
		l.idle.Remove(c.idle)
		c.idle = nil
	}
	l.open--
	if l.byClient[c.client]--; l.byClient[c.client] <= 0 {
		delete(l.byClient, c.client)
	}
	l.mu.Unlock()
	<-l.slots
}

// clientOf is the TCP peer's address (IPv4 in IPv6 unmapped); the zero
// Addr for other kinds of connection.
func clientOf(nc net.Conn) netip.Addr {
	if a, ok := nc.RemoteAddr().(*net.TCPAddr); ok {
		return a.AddrPort().Addr().Unmap()
	}
	return netip.Addr{}
}

// conn is an accepted connection, counted until it is closed.
type conn struct {
	net.Conn
	l      *Listener
	client netip.Addr
	once   sync.Once
	// Guarded by l.mu.
	idle      *list.Element
	idleSince time.Time
	released  bool
}

func (c *conn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.release(c) })
	return err
}
