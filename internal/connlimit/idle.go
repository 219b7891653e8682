package connlimit

import (
	"context"
	"net"
	"sync"
	"time"

	"google.golang.org/grpc/stats"
)

// Idle tracks a gRPC server's connections: the calls in flight on each and
// when its last call ended, so that under pressure the connection idle
// longest (no call in flight for at least MinIdle) can be closed. It is a
// grpc stats.Handler (grpc.StatsHandler) and a Config.Evict.
//
// A stream counts as a call for as long as it is open: a watch, or a
// multiplexed stream of a client that keeps one open, is never idle here.
type Idle struct {
	MinIdle time.Duration
	// Closed, if set, is told of each connection Evict closed.
	Closed func(remote string, idle time.Duration)

	mu    sync.Mutex
	conns map[*idleConn]struct{}
	now   func() time.Time
}

type idleConn struct {
	remote net.Addr
	local  net.Addr
	calls  int
	since  time.Time // of the last call's end (or of the accept)
}

type idleKey struct{}

// NewIdle returns a tracker whose connections are evictable after minIdle
// without a call.
func NewIdle(minIdle time.Duration) *Idle {
	return &Idle{MinIdle: minIdle, conns: map[*idleConn]struct{}{}, now: time.Now}
}

// TagConn implements stats.Handler.
func (t *Idle) TagConn(ctx context.Context, info *stats.ConnTagInfo) context.Context {
	c := &idleConn{remote: info.RemoteAddr, local: info.LocalAddr}
	t.mu.Lock()
	c.since = t.now()
	t.conns[c] = struct{}{}
	t.mu.Unlock()
	return context.WithValue(ctx, idleKey{}, c)
}

// HandleConn implements stats.Handler.
func (t *Idle) HandleConn(ctx context.Context, s stats.ConnStats) {
	if _, ok := s.(*stats.ConnEnd); !ok {
		return
	}
	if c, ok := ctx.Value(idleKey{}).(*idleConn); ok {
		t.mu.Lock()
		delete(t.conns, c)
		t.mu.Unlock()
	}
}

// TagRPC implements stats.Handler.
func (t *Idle) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context { return ctx }

// HandleRPC implements stats.Handler.
func (t *Idle) HandleRPC(ctx context.Context, s stats.RPCStats) {
	c, ok := ctx.Value(idleKey{}).(*idleConn)
	if !ok {
		return
	}
	switch s.(type) {
	case *stats.Begin:
		t.mu.Lock()
		c.calls++
		t.mu.Unlock()
	case *stats.End:
		t.mu.Lock()
		c.calls--
		c.since = t.now()
		t.mu.Unlock()
	}
}

// idlest returns the connection idle longest, at least MinIdle, or false.
func (t *Idle) idlest() (*idleConn, time.Duration, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	var best *idleConn
	for c := range t.conns {
		if c.calls == 0 && now.Sub(c.since) >= t.MinIdle && (best == nil || c.since.Before(best.since)) {
			best = c
		}
	}
	if best == nil {
		return nil, 0, false
	}
	delete(t.conns, best) // not chosen twice
	return best, now.Sub(best.since), true
}
