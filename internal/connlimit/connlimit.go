// Package connlimit bounds what clients can hold of a listening port: at
// most Max open connections in all (Accept waits while that many are
// open), at most PerAddress from one network address (the host, without
// the port), so that one host cannot take every slot from the others, a
// first byte within FirstByte of the accept (a connection that never
// speaks is closed), and no silence longer than Idle between reads (for a
// protocol whose idle connections may be cut: not gRPC, whose watch
// streams are silent for as long as nothing changes). A deadline its user
// sets (a TLS handshake's, an HTTP server's) replaces these until the next
// read that returns data.
//
// An accepted connection gives its slots back when it is closed, once.
// It is a wrapper of the TCP connection that also offers gRPC's reads into
// pooled buffers (ReadOnReady), so that an idle gRPC connection holds no
// read buffer of its own.
package connlimit

import (
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Config of a Listener. Zero values turn a bound off.
type Config struct {
	// Max: most open connections. Accept waits for a slot before it
	// accepts, so the connections past it wait in the kernel's backlog.
	Max        int
	PerAddress int           // most open connections from one address
	FirstByte  time.Duration // the first byte must arrive within this of the accept
	Idle       time.Duration // a connection silent for this long is closed
	// Refused, if set, is told of each connection closed at once for its
	// address's bound (logging, metrics).
	Refused func(addr string)
	// Pressure and Tracker: once Pressure connections are open, each new
	// one first closes the connection the Tracker (the protocol's own
	// view of calls) finds idle longest, so that idle connections give
	// way to new clients instead of holding their slots to an idle
	// timeout.
	Pressure int
	Tracker  *Idle
}

// Listener wraps a net.Listener with Config's bounds.
type Listener struct {
	net.Listener
	cfg Config

	slots     chan struct{} // one token per open connection, Max of them
	done      chan struct{} // closed by Close
	closeOnce sync.Once

	mu     sync.Mutex
	byAddr map[string]int
	total  int
	open   map[string]*conn // by remote address, for eviction
}

// New wraps l.
func New(l net.Listener, cfg Config) *Listener {
	ll := &Listener{Listener: l, cfg: cfg, byAddr: map[string]int{}, open: map[string]*conn{}, done: make(chan struct{})}
	if cfg.Max > 0 {
		ll.slots = make(chan struct{}, cfg.Max)
	}
	return ll
}

// Close closes the listener; an Accept waiting for a slot returns.
func (l *Listener) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// Accept returns the next connection within the bounds: it waits while
// Max connections are open; a connection past its address's bound is
// closed at once and Accept waits for the next.
func (l *Listener) Accept() (net.Conn, error) {
	if l.slots != nil {
		select {
		case l.slots <- struct{}{}:
		case <-l.done:
			return nil, net.ErrClosed
		}
	}
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			l.freeSlot()
			return nil, err
		}
		host := hostOf(c.RemoteAddr())
		if l.cfg.Pressure > 0 && l.cfg.Tracker != nil && l.Total() >= l.cfg.Pressure {
			l.evictIdlest()
		}
		if !l.take(host) {
			c.Close()
			if l.cfg.Refused != nil {
				l.cfg.Refused(host)
			}
			continue
		}
		bc := &conn{Conn: c, l: l, host: host, idle: l.cfg.Idle}
		if tc, ok := c.(*net.TCPConn); ok {
			if raw, err := tc.SyscallConn(); err == nil {
				bc.raw = raw
			}
		}
		l.mu.Lock()
		l.open[c.RemoteAddr().String()] = bc
		l.mu.Unlock()
		if l.cfg.FirstByte > 0 {
			_ = c.SetReadDeadline(time.Now().Add(l.cfg.FirstByte))
		} else if l.cfg.Idle > 0 {
			_ = c.SetReadDeadline(time.Now().Add(l.cfg.Idle))
		}
		return bc, nil
	}
}

// Open is the number of connections open from addr's host.
func (l *Listener) Open(host string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.byAddr[host]
}

// Total is the number of connections open.
func (l *Listener) Total() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.total
}

func (l *Listener) take(host string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cfg.PerAddress > 0 && l.byAddr[host] >= l.cfg.PerAddress {
		return false
	}
	l.byAddr[host]++
	l.total++
	return true
}

// evictIdlest closes the connection the tracker finds idle longest.
func (l *Listener) evictIdlest() {
	ic, idle, ok := l.cfg.Tracker.idlest()
	if !ok || ic.remote == nil {
		return
	}
	l.mu.Lock()
	c := l.open[ic.remote.String()]
	l.mu.Unlock()
	if c != nil {
		c.Close()
		if l.cfg.Tracker.Closed != nil {
			l.cfg.Tracker.Closed(ic.remote.String(), idle)
		}
	}
}

func (l *Listener) release(c *conn) {
	l.mu.Lock()
	if l.open[c.RemoteAddr().String()] == c {
		delete(l.open, c.RemoteAddr().String())
	}
	host := c.host
	l.total--
	if l.byAddr[host]--; l.byAddr[host] <= 0 {
		delete(l.byAddr, host)
	}
	l.mu.Unlock()
	l.freeSlot()
}

// freeSlot gives back a slot of Max.
func (l *Listener) freeSlot() {
	if l.slots != nil {
		<-l.slots
	}
}

func hostOf(a net.Addr) string {
	if a == nil {
		return ""
	}
	if host, _, err := net.SplitHostPort(a.String()); err == nil {
		return host
	}
	return a.String()
}

// conn gives its slots back once, when closed, and moves its read deadline
// on with every read that returns data.
type conn struct {
	net.Conn
	l      *Listener
	host   string
	idle   time.Duration
	closed atomic.Bool
	// spoke: the first byte arrived (the first-byte deadline is over).
	spoke atomic.Bool
	// raw is the TCP connection's descriptor, for ReadOnReady (nil: not
	// a TCP connection).
	raw   syscall.RawConn
	ready readyState
}

func (c *conn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 {
		c.gotData()
	}
	return n, err
}

// gotData moves the read deadline on after a read that returned data.
func (c *conn) gotData() {
	first := c.spoke.CompareAndSwap(false, true)
	switch {
	case c.idle > 0:
		_ = c.Conn.SetReadDeadline(time.Now().Add(c.idle))
	case first:
		_ = c.Conn.SetReadDeadline(time.Time{})
	}
}

// Close closes the connection and gives its slots back (once).
func (c *conn) Close() error {
	err := c.Conn.Close()
	if c.closed.CompareAndSwap(false, true) {
		c.l.release(c)
	}
	return err
}
