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
	"google.golang.org/grpc/credentials/insecure"

	"github.com/grackle-coord/grackle/apierr"
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
	conns   map[string]peer                  // by member id
	retired map[*grpc.ClientConn]*time.Timer // replaced, closed later
	dials   int
}

type peer struct {
	addr string
	cc   *grpc.ClientConn
}

// New makes a cache whose connections are plaintext unless opts say
// otherwise (opts come last, so grpc.WithTransportCredentials in them
// wins). Every connection also marks a unary call that never reached the
// peer (apierr.DialOptions: apierr.NotSent), which is what lets a caller
// know it may safely try again.
func New(opts ...grpc.DialOption) *Cache {
	all := append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, apierr.DialOptions()...)
	return &Cache{
		opts:        append(all, opts...),
		retireAfter: RetireAfter,
		conns:       map[string]peer{},
		retired:     map[*grpc.ClientConn]*time.Timer{},
	}
}

// Get returns the kept connection to member id at addr, or a new one. A
// kept connection to another address (the member moved, or its record
// changed) is retired and replaced.
func (c *Cache) Get(id, addr string) (*grpc.ClientConn, error) {
	return c.get(id, addr, false)
}

// Redial replaces member id's connection with a new one to addr, retiring
// the old: a kept connection may sit in reconnect backoff after the peer
// restarted, while a new one connects at once.
func (c *Cache) Redial(id, addr string) (*grpc.ClientConn, error) {
	return c.get(id, addr, true)
}

func (c *Cache) get(id, addr string, fresh bool) (*grpc.ClientConn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, ErrClosed
	}
	if p, ok := c.conns[id]; ok {
		if p.addr == addr && !fresh {
			return p.cc, nil
		}
		delete(c.conns, id)
		c.retire(p.cc)
	}
	cc, err := grpc.NewClient(addr, c.opts...)
	if err != nil {
		return nil, err
	}
	c.dials++
	c.conns[id] = peer{addr: addr, cc: cc}
	return cc, nil
}

// retire closes cc after retireAfter; c.mu is held.
func (c *Cache) retire(cc *grpc.ClientConn) {
	c.retired[cc] = time.AfterFunc(c.retireAfter, func() {
		c.mu.Lock()
		_, ok := c.retired[cc]
		delete(c.retired, cc)
		c.mu.Unlock()
		if ok { // not closed by Close already
			cc.Close()
		}
	})
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
		p.cc.Close()
	}
	c.conns = map[string]peer{}
	for cc, t := range c.retired {
		t.Stop()
		cc.Close()
	}
	c.retired = map[*grpc.ClientConn]*time.Timer{}
}
