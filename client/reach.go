package client

// Reachability: a member advertises one gRPC address (docs/API.md,
// Advertised addresses and clients outside the network), and it may mean
// nothing where the client runs: a compose service name seen from the host,
// a pod IP seen from outside Kubernetes, a private address behind NAT. The
// client then sends its calls to the endpoints it was given instead, and a
// follower forwards them to the leader.
//
// The client dials through its own dialer, so it knows exactly which
// addresses it has reached: an address whose dial failed (it does not
// resolve, or the connection is refused or times out) is routed around for
// reachRetryAfter, and a call that failed on a connection that was never
// established was certainly not sent.

import (
	"context"
	"net"
	"strings"
	"sync"
	"time"
)

// reachRetryAfter is how long an address whose dial failed is routed
// around before the client tries it directly again.
const reachRetryAfter = 30 * time.Second

type reachability struct {
	mu        sync.Mutex
	connected map[string]bool      // a dial of this address succeeded once
	down      map[string]time.Time // dial failed: route around it until then
	logged    map[string]bool      // the fallback was logged for this address
	lastErr   map[string]error     // the last failed dial of this address
	dialer    func(ctx context.Context, addr string) (net.Conn, error)
	now       func() time.Time
}

func newReachability(dial func(ctx context.Context, addr string) (net.Conn, error)) *reachability {
	if dial == nil {
		var d net.Dialer
		dial = func(ctx context.Context, addr string) (net.Conn, error) { return d.DialContext(ctx, "tcp", addr) }
	}
	return &reachability{
		connected: map[string]bool{},
		down:      map[string]time.Time{},
		logged:    map[string]bool{},
		lastErr:   map[string]error{},
		dialer:    dial,
		now:       time.Now,
	}
}

// dialerFor returns the dialer of the connection to target: it records
// each outcome under target (gRPC passes the resolved address, which may
// differ in form).
func (r *reachability) dialerFor(target string) func(ctx context.Context, addr string) (net.Conn, error) {
	return func(ctx context.Context, addr string) (net.Conn, error) {
		conn, err := r.dialer(ctx, addr)
		r.mu.Lock()
		if err != nil {
			r.down[target] = r.now().Add(reachRetryAfter)
			r.lastErr[target] = err
		} else {
			r.connected[target] = true
			delete(r.down, target)
		}
		r.mu.Unlock()
		return conn, err
	}
}

// isDown reports whether addr's last dial failed less than
// reachRetryAfter ago.
func (r *reachability) isDown(addr string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	until, ok := r.down[addr]
	if !ok {
		return false
	}
	if r.now().After(until) {
		delete(r.down, addr)
		return false
	}
	return true
}

// lastError is the error of addr's last failed dial (nil if none).
func (r *reachability) lastError(addr string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lastErr[addr]
}

// neverConnected reports whether no dial of addr has ever succeeded: a
// call that failed on its connection then never reached a server.
func (r *reachability) neverConnected(addr string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return !r.connected[addr]
}

// firstFallback reports whether this is the first time the client falls
// back from addr (so that it logs it once).
func (r *reachability) firstFallback(addr string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.logged[addr] {
		return false
	}
	r.logged[addr] = true
	return true
}

// grpcTarget makes addr a gRPC target that the client's dialer resolves
// itself (so a name that does not resolve is a dial failure it sees); an
// address that already names a resolver scheme is kept as it is.
func grpcTarget(addr string) string {
	if strings.Contains(addr, "://") {
		return addr
	}
	return "passthrough:///" + addr
}
