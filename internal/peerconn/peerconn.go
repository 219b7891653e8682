// Package peerconn keeps the gRPC client connections a node holds to the
// other members of its cluster: one connection per member, dialled with
// the options (peer TLS) given once at New, replaced when the member's
// address changes or a caller asks for a fresh one, and closed by Close.
//
// A connection that is replaced is not closed at once but retired: calls
// still running on it (a blocking acquire forwarded to the leader waits up
// to the server's --max-timeout; a forwarded watch runs for as long as its
// client stays) keep it for RetireAfter, then it is closed. Closing it at
// once would cancel them mid-flight, and a cancelled write's outcome is
// unknown to its caller.
package peerconn

import (
	"errors"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/grackle-coord/grackle/apierr"
	"github.com/grackle-coord/grackle/internal/flowwindow"
	"github.com/grackle-coord/grackle/internal/mux"
)

// RetireAfter is how long a replaced connection stays open for the calls
// still running on it.
const RetireAfter = 10 * time.Minute

// ErrClosed is returned by Get and Redial after Close.
var ErrClosed = errors.New("peer connections closed: the node is stopping")

// Cache is safe for concurrent use.
type Cache struct {
	opts        []grpc.DialOption
	retireAfter time.Duration

	mu      sync.Mutex
	closed  bool
	conns   map[string]peer              // by member id
	retired map[*grpc.ClientConn]retired // replaced, closed later
	dials   int
}

type peer struct {
	addr string
	cc   *grpc.ClientConn
	// mc sends unary calls on one multiplexed stream of cc (GetMux).
	mc *mux.Conn
}

type retired struct {
	t  *time.Timer
	mc *mux.Conn
}

// New makes a cache whose connections are plaintext unless opts say
// otherwise (opts come last, so grpc.WithTransportCredentials in them
// wins). Every connection also marks a unary call that never reached the
// peer (apierr.DialOptions: apierr.NotSent), which is what lets a caller
// know it may safely try again.
func New(opts ...grpc.DialOption) *Cache {
	all := append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, apierr.DialOptions()...)
	all = append(all, flowwindow.DialOptions()...)
	return &Cache{
		opts:        append(all, opts...),
		retireAfter: RetireAfter,
		conns:       map[string]peer{},
		retired:     map[*grpc.ClientConn]retired{},
	}
}

// Get returns the kept connection to member id at addr, or a new one. A
// kept connection to another address (the member moved, or its record
// changed) is retired and replaced.
func (c *Cache) Get(id, addr string) (*grpc.ClientConn, error) {
	p, err := c.get(id, addr, false)
	return p.cc, err
}

// GetMux is Get for unary calls: they go on the connection's multiplexed
// stream (package mux), a fraction of a unary call's CPU on both members,
// each with its own metadata (a caller's token, the forwarded mark) when
// the peer takes it, or as unary calls whenever the stream cannot carry
// them. Closed with the connection.
func (c *Cache) GetMux(id, addr string) (*mux.Conn, error) {
	p, err := c.get(id, addr, false)
	return p.mc, err
}

// RedialMux is Redial for GetMux's callers.
func (c *Cache) RedialMux(id, addr string) (*mux.Conn, error) {
	p, err := c.get(id, addr, true)
	return p.mc, err
}

// Redial replaces member id's connection with a new one to addr, retiring
// the old: a kept connection may sit in reconnect backoff after the peer
// restarted, while a new one connects at once.
func (c *Cache) Redial(id, addr string) (*grpc.ClientConn, error) {
	p, err := c.get(id, addr, true)
	return p.cc, err
}

// Refresh replaces member id's kept connection, unless it is ready and
// to addr: called when the member answers again after it did not (the
// node's health probes tell), since the kept one may still wait out its
// reconnect backoff, or hold the address the member's name resolved to
// before it moved (gRPC resolves a name again at most every 30 s). The
// replaced connection is retired as Redial does; a member with no kept
// connection is left so.
func (c *Cache) Refresh(id, addr string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p, ok := c.conns[id]
	if c.closed || !ok || p.addr == addr && p.cc.GetState() == connectivity.Ready {
		return
	}
	delete(c.conns, id)
	c.retire(p)
}

// Dial makes a connection to addr with the cache's options that the
// cache does not keep: the caller closes it (the health probes, which
// replace their connection after every failure).
func (c *Cache) Dial(addr string) (*grpc.ClientConn, error) {
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if closed {
		return nil, ErrClosed
	}
	return grpc.NewClient(addr, c.opts...)
}

func (c *Cache) get(id, addr string, fresh bool) (peer, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return peer{}, ErrClosed
	}
	if p, ok := c.conns[id]; ok {
		if p.addr == addr && !fresh {
			return p, nil
		}
		delete(c.conns, id)
		c.retire(p)
	}
	cc, err := grpc.NewClient(addr, c.opts...)
	if err != nil {
		return peer{}, err
	}
	c.dials++
	p := peer{addr: addr, cc: cc, mc: mux.NewConn(cc)}
	c.conns[id] = p
	return p, nil
}

// retire closes p's connection after retireAfter; c.mu is held.
func (c *Cache) retire(p peer) {
	cc, mc := p.cc, p.mc
	c.retired[cc] = retired{mc: mc, t: time.AfterFunc(c.retireAfter, func() {
		c.mu.Lock()
		_, ok := c.retired[cc]
		delete(c.retired, cc)
		c.mu.Unlock()
		if ok { // not closed by Close already
			mc.Close()
			cc.Close()
		}
	})}
}

// StreamCalls counts the calls answered on the multiplexed streams of the
// connections kept now (GetMux; a diagnostic for tests and benchmarks).
func (c *Cache) StreamCalls() (n uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range c.conns {
		n += p.mc.StreamCalls()
	}
	return n
}

// Dials counts the connections made so far.
func (c *Cache) Dials() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.dials
}

// Close closes every connection, kept and retired; Get and Redial fail
// with ErrClosed from then on. Calls still running on them end with
// Canceled.
func (c *Cache) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	for _, p := range c.conns {
		p.mc.Close()
		p.cc.Close()
	}
	c.conns = map[string]peer{}
	for cc, r := range c.retired {
		r.t.Stop()
		r.mc.Close()
		cc.Close()
	}
	c.retired = map[*grpc.ClientConn]retired{}
}
