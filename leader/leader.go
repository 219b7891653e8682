// Package leader owns everything only the Raft leader runs: the clock that
// stamps `now` into commands, lease id generation, the proposer (the one
// place commands enter Raft), the waiter queues, lease expiry, and the
// lifecycle of a term (setup after the barrier; every goroutine joined on
// step-down). It knows nothing of gRPC calls: the API layer (package rpc)
// validates, forwards, and converts this package's results and errors.
// DESIGN.md explains a waiter's states and who may change them.
package leader

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/grackle-coord/grackle/fsm"
	"github.com/grackle-coord/grackle/internal/rounds"
)

// Config is what the leader needs to know about its node.
type Config struct {
	NodeID      string
	GRPCAddress string // the address clients dial for this node (replicated)
	// InitialGRPC maps the ids of the initial members to their gRPC
	// addresses; the first leader replicates them.
	InitialGRPC map[string]string

	Limits fsm.Limits
	// LeaseGrace is how much a new leader extends every live lease (at
	// least one election timeout), so an election never expires a client
	// that refreshed on time. It is also the clock skew the cluster
	// tolerates (DESIGN.md, The clock).
	LeaseGrace time.Duration
	// ApplyTimeout bounds one Raft apply when the caller has no deadline.
	ApplyTimeout time.Duration
	// ExpireBatch bounds the leases one expiry command reaps.
	ExpireBatch int32
	// MaxWaiters bounds the queued waiters per semaphore and per lock.
	MaxWaiters int
	// MaxWaitersPerProcess bounds one process's waiters (its leases' calls)
	// in one semaphore's or lock's queue (default 1,000; negative: none).
	MaxWaitersPerProcess int
	// MaxQueuedProposals bounds the client commands waiting to be proposed
	// (0: DefaultMaxQueued); beyond, writes answer ResourceExhausted
	// (apierr.Overloaded).
	MaxQueuedProposals int
	// PackHold and PackHoldIdle: ProposerConfig.Hold and HoldIdle.
	PackHold, PackHoldIdle time.Duration

	// Contacts is this node's record of each peer's last answered
	// AppendEntries (raftnode.Contacts): which voters are reachable, and
	// how far a nonvoter's log reaches. Nil: no peer counts as reachable.
	Contacts PeerContacts
	// ReachableWithin: a voter that answered within this counts as
	// reachable (default 1 s; the server uses its heartbeat timeout).
	ReachableWithin time.Duration
	// PromoteAfter: a member added to vote is promoted from nonvoter once
	// it has been caught up this long (default 2 s); PromoteMaxLag is how
	// many entries behind the leader's last index still count as caught
	// up (default 64).
	PromoteAfter  time.Duration
	PromoteMaxLag uint64

	// Clock is read for `now` (nil: the system clocks).
	Clock Source
	// Observer receives waiter and expiry events (nil: none).
	Observer Observer
	Log      hclog.Logger
}

// Leader follows this node's leadership and runs a Term while it leads.
type Leader struct {
	cfg   Config
	raft  *raft.Raft
	fsm   *fsm.FSM
	log   hclog.Logger
	clock *Clock
	reads *rounds.Group[struct{}] // leadership confirmations shared by concurrent reads
	skew  *SkewMonitor

	term atomic.Pointer[Term]

	// verifySent (tests only; nil otherwise) runs in each read round once
	// the round's VerifyLeader is handed to raft.
	verifySent func()

	// expiryMaxSleep bounds how long the expiry loop sleeps without
	// looking (a second; tests raise it to show that a write woke it).
	expiryMaxSleep time.Duration

	stopOnce sync.Once
	stop     chan struct{}
	wg       sync.WaitGroup
}

// New creates the leader side of a node. Call Start to follow leadership.
func New(cfg Config, r *raft.Raft, f *fsm.FSM) *Leader {
	if cfg.ApplyTimeout <= 0 {
		cfg.ApplyTimeout = 10 * time.Second
	}
	if cfg.ExpireBatch <= 0 {
		cfg.ExpireBatch = 10_000
	}
	if cfg.MaxWaiters <= 0 {
		cfg.MaxWaiters = 10_000
	}
	if cfg.MaxWaitersPerProcess == 0 {
		cfg.MaxWaitersPerProcess = 1_000
	}
	if cfg.Limits == (fsm.Limits{}) {
		cfg.Limits = fsm.DefaultLimits()
	}
	cfg.Limits = cfg.Limits.WithLockDefaults()
	if cfg.ReachableWithin <= 0 {
		cfg.ReachableWithin = time.Second
	}
	if cfg.PromoteAfter <= 0 {
		cfg.PromoteAfter = 2 * time.Second
	}
	if cfg.PromoteMaxLag == 0 {
		cfg.PromoteMaxLag = 64
	}
	if cfg.Log == nil {
		cfg.Log = hclog.NewNullLogger()
	}
	if cfg.Observer == nil {
		cfg.Observer = nopObserver{}
	}
	if cfg.Clock == nil {
		cfg.Clock = SystemSource()
	}
	c := NewClock(cfg.Clock)
	l := &Leader{cfg: cfg, raft: r, fsm: f, log: cfg.Log, clock: c, stop: make(chan struct{}), expiryMaxSleep: time.Second}
	onRound := onReadRound(cfg.Observer)
	l.reads = rounds.New(func(reads int) (struct{}, error) {
		// See confirm.go: VerifyLeader triggers the heartbeats, and the
		// answers to those sent after since decide.
		since, term := time.Now(), r.CurrentTerm()
		servers := r.GetConfiguration().Configuration().Servers
		verify := r.VerifyLeader()
		if l.verifySent != nil {
			l.verifySent()
		}
		err := verify.Error()
		if err == nil {
			err = l.confirmedSince(since, term, servers, l.cfg.ReachableWithin)
		}
		if onRound != nil {
			onRound(ReadRoundEvent{Reads: reads, Err: err})
		}
		return struct{}{}, err
	})
	l.skew = newSkewMonitor(f, cfg.Clock, cfg.LeaseGrace, func() bool { return l.term.Load() != nil }, cfg.Log)
	return l
}

// Start follows the node's leadership notifications until Stop. Terms
// begin and end on one goroutine, so a term has ended (and its goroutines
// are joined) before the next begins.
func (l *Leader) Start(leaderNotify <-chan bool) {
	l.wg.Add(2)
	go func() {
		defer l.wg.Done()
		l.skew.run(l.stop)
	}()
	go func() {
		defer l.wg.Done()
		// Raft may have elected this node before Start was called.
		if l.raft.State() == raft.Leader {
			l.stepUp()
		}
		for {
			select {
			case <-l.stop:
				l.stepDown()
				return
			case isLeader := <-leaderNotify:
				if isLeader {
					l.stepUp()
				} else {
					l.stepDown()
				}
			}
		}
	}()
}

// Stop ends leader work and waits for every goroutine of the package.
func (l *Leader) Stop() {
	l.stopOnce.Do(func() { close(l.stop) })
	l.wg.Wait()
}

func (l *Leader) stepUp() {
	if l.term.Load() != nil {
		return
	}
	t := newTerm(l)
	l.term.Store(t)
	l.log.Info("became leader; running barrier")
	t.begin()
}

func (l *Leader) stepDown() {
	t := l.term.Swap(nil)
	if t == nil {
		return
	}
	l.log.Info("no longer leader; ending waiting calls")
	t.end()
}

// Term returns the current term, or nil when this node does not lead.
// Callers wait for Term.Ready before serving.
func (l *Leader) Term() *Term { return l.term.Load() }

// Now is the leader clock's current time (Unix ns).
func (l *Leader) Now() int64 { return l.clock.Now() }

// Skew is the last measured difference between this node's wall clock
// and the leader's stamped `now` (see SkewMonitor).
func (l *Leader) Skew() Skew { return l.skew.Last() }
