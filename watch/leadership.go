package watch

import (
	"context"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/grackle-coord/grackle/fsm"
)

// Term is one stretch of this node's leadership: Done closes when it ends.
type Term struct {
	term  uint64
	done  chan struct{}
	ready chan struct{} // closed once the barrier of the term has applied
	err   error         // the barrier's error (set before ready closes)
}

// Done is closed when the node stops leading in this term.
func (t *Term) Done() <-chan struct{} { return t.done }

// Ready waits until every entry committed before the term began is
// applied locally, so that a first read is not older than what earlier
// leaders acknowledged.
func (t *Term) Ready(ctx context.Context) error {
	select {
	case <-t.ready:
		return t.err
	case <-t.done:
		return errLeadershipLost
	case <-ctx.Done():
		return ctx.Err()
	}
}

type sentinel string

func (e sentinel) Error() string { return string(e) }

const errLeadershipLost = sentinel("leadership lost")

// Leadership follows this node's Raft role: it hands out the current Term
// and names the leader. It registers its own raft observer, so it needs
// nothing from the rest of the node.
type Leadership struct {
	r         *raft.Raft
	f         *fsm.FSM
	self      string
	selfGRPC  string
	initial   map[string]string
	obs       *raft.Observer
	obsCh     chan raft.Observation
	mu        sync.Mutex
	cur       *Term
	stop      chan struct{}
	stopped   chan struct{}
	closeOnce sync.Once
}

// LeadershipConfig names this node and how to find the others' gRPC
// addresses (the replicated member records, then the initial members).
type LeadershipConfig struct {
	NodeID      string
	GRPCAddress string
	InitialGRPC map[string]string
}

// NewLeadership starts following r's leadership.
func NewLeadership(r *raft.Raft, f *fsm.FSM, cfg LeadershipConfig) *Leadership {
	l := &Leadership{r: r, f: f, self: cfg.NodeID, selfGRPC: cfg.GRPCAddress, initial: cfg.InitialGRPC,
		obsCh: make(chan raft.Observation, 16), stop: make(chan struct{}), stopped: make(chan struct{})}
	l.obs = raft.NewObserver(l.obsCh, false, func(o *raft.Observation) bool {
		switch o.Data.(type) {
		case raft.LeaderObservation, raft.RaftState:
			return true
		}
		return false
	})
	r.RegisterObserver(l.obs)
	go l.loop()
	return l
}

// Close stops following; the current term (if any) ends.
func (l *Leadership) Close() {
	l.closeOnce.Do(func() {
		close(l.stop)
		<-l.stopped
		l.r.DeregisterObserver(l.obs)
		l.mu.Lock()
		if l.cur != nil {
			close(l.cur.done)
			l.cur = nil
		}
		l.mu.Unlock()
	})
}

func (l *Leadership) loop() {
	defer close(l.stopped)
	// Observations can be dropped when the channel is full: a slow tick
	// re-checks the role so that a term never outlives its leadership.
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		l.check()
		select {
		case <-l.stop:
			return
		case <-l.obsCh:
		case <-tick.C:
		}
	}
}

func (l *Leadership) check() {
	leading := l.r.State() == raft.Leader
	term := l.r.CurrentTerm()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cur != nil && (!leading || l.cur.term != term) {
		close(l.cur.done)
		l.cur = nil
	}
	if leading && l.cur == nil {
		t := &Term{term: term, done: make(chan struct{}), ready: make(chan struct{})}
		l.cur = t
		go func() {
			t.err = l.r.Barrier(0).Error()
			close(t.ready)
		}()
	}
}

// Current is the term this node leads in, or nil when it does not lead.
func (l *Leadership) Current() *Term {
	l.check()
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cur
}

// Leader names the leader's id and gRPC address, when this node knows them.
func (l *Leadership) Leader() (id, addr string) {
	_, sid := l.r.LeaderWithID()
	if sid == "" {
		return "", ""
	}
	id = string(sid)
	if id == l.self {
		return id, l.selfGRPC
	}
	for _, m := range l.f.Members() {
		if m.NodeID == id && m.GRPCAddress != "" {
			return id, m.GRPCAddress
		}
	}
	return id, l.initial[id]
}

// NextLeader waits (until ctx ends) for a leader other than this node to
// be known, and names it; "" when none became known in time.
func (l *Leadership) NextLeader(ctx context.Context) (id, addr string) {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		if id, addr = l.Leader(); id != "" && id != l.self && addr != "" {
			return id, addr
		}
		select {
		case <-ctx.Done():
			return l.Leader()
		case <-t.C:
		}
	}
}
