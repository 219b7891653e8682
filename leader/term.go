package leader

import (
	"context"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/grackle-coord/grackle/apierr"
	"github.com/grackle-coord/grackle/fsm"
	fsmpb "github.com/grackle-coord/grackle/proto/grackle/fsm/v1"
)

// Term is the leader work of one term: it exists from the moment raft says
// this node leads until it says otherwise. Every goroutine it starts is
// tracked and joined by end, so no goroutine of one term outlives it or
// overlaps the next (Consul's leaderLoop.Wait()).
type Term struct {
	l        *Leader
	began    time.Time       // when this node learned it leads
	ctx      context.Context // cancelled when the term ends
	cancel   context.CancelFunc
	ready    chan struct{} // closed once the barrier and setup are done
	q        *queues
	sig      *waitSignals // waiters of wait groups and barriers (waits.go)
	proposer *Proposer
	kick     chan struct{}
	// lookAt is the latest time (the leader clock's nanoseconds) by which
	// the expiry loop will look at the leases again; math.MaxInt64 while
	// it is deciding, or when there is no lease. A write wakes the loop
	// only when it made the earliest expiry earlier than that.
	lookAt atomic.Int64

	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup
}

func newTerm(l *Leader) *Term {
	ctx, cancel := context.WithCancel(context.Background())
	t := &Term{l: l, began: time.Now(), ctx: ctx, cancel: cancel, ready: make(chan struct{}), kick: make(chan struct{}, 1)}
	// The term's own proposer: its packing goroutine is joined at the end.
	t.proposer = NewProposer(l.raft, l.clock, ProposerConfig{ApplyTimeout: l.cfg.ApplyTimeout,
		MaxQueued: l.cfg.MaxQueuedProposals, Hold: l.cfg.PackHold, HoldIdle: l.cfg.PackHoldIdle, OnEntry: onEntry(l.cfg.Observer)})
	t.q = newQueues(l.cfg.MaxWaiters, l.fsm, l.cfg.Observer)
	t.q.maxPerProcess = l.cfg.MaxWaitersPerProcess
	t.q.proposeGrants = t.proposeGrants
	t.sig = newWaitSignals(l.cfg.MaxWaiters)
	return t
}

// Began is when this node learned it leads (the term's start as this
// node saw it).
func (t *Term) Began() time.Time { return t.began }

// goTerm runs f in a goroutine of the term; false once the term ended.
func (t *Term) goTerm(f func()) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return false
	}
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		f()
	}()
	return true
}

// begin runs the term: the barrier and setup, then the term's loops.
func (t *Term) begin() {
	t.goTerm(func() {
		if !t.setup() {
			return
		}
		close(t.ready)
		t.l.log.Info("leader ready")
		t.goTerm(t.expiryLoop)
		t.goTerm(t.promoteLoop)
	})
}

// end stops the term: waiting calls end with Unavailable (reason
// OUTCOME_UNKNOWN: the client retries on the new leader, which is safe
// because re-acquire is idempotent), then every goroutine is joined.
func (t *Term) end() {
	t.cancel()
	t.q.failAll(errWaitLeadership)
	t.sig.end()
	// Nothing queued is proposed any more (NotLeader); entries in flight
	// resolve (raft fails them as it steps down).
	t.proposer.Close()
	t.mu.Lock()
	t.closed = true
	t.mu.Unlock()
	t.wg.Wait()
	t.l.clock.EndTerm()
}

// Ready waits until the term may serve (its barrier has applied every
// earlier entry). The error is an *Error: NotLeader if the term ended,
// NotSent if ctx ended first.
func (t *Term) Ready(ctx context.Context) error {
	select {
	case <-t.ready: // the usual case, without select's locks over three channels
		return nil
	default:
	}
	select {
	case <-t.ready:
		return nil
	case <-t.ctx.Done():
		return errNotLeader
	case <-ctx.Done():
		return newError(codes.Unavailable, apierr.NotSent, "leader not ready yet (barrier pending)")
	}
}

// setup: a barrier so the FSM has applied everything committed by earlier
// leaders, then the replicated bookkeeping a leader owns. A failure while
// the term lasts is retried (every step is idempotent).
func (t *Term) setup() bool {
	for attempt := 0; ; attempt++ {
		err := t.setupOnce()
		if err == nil {
			return true
		}
		if t.ctx.Err() != nil {
			return false
		}
		t.l.log.Error("leader setup failed; retrying", "error", err)
		d := time.Duration(attempt+1) * 100 * time.Millisecond
		if d > 2*time.Second {
			d = 2 * time.Second
		}
		select {
		case <-t.ctx.Done():
			return false
		case <-time.After(d):
		}
	}
}

func (t *Term) setupOnce() error {
	l := t.l
	if err := l.raft.Barrier(0).Error(); err != nil {
		return err
	}
	// Everything earlier is applied: anchor the term's clock.
	l.clock.StartTerm(l.fsm.LastNow())
	if lim := l.cfg.Limits; l.fsm.Limits() != lim {
		if err := t.setupApply(&fsmpb.Command{Op: &fsmpb.Command_SetLimits{SetLimits: fsm.LimitsCommand(lim)}}); err != nil {
			return err
		}
	}
	if err := t.replicateMembers(); err != nil {
		return err
	}
	// Never reap a lease the old leader would still have kept: give every
	// live lease one more grace period to be refreshed across the election.
	if l.cfg.LeaseGrace > 0 {
		return t.setupApply(&fsmpb.Command{Op: &fsmpb.Command_ExtendLeases{ExtendLeases: &fsmpb.ExtendLeases{
			ExtendNs: int64(l.cfg.LeaseGrace)}}})
	}
	return nil
}

func (t *Term) setupApply(cmd *fsmpb.Command) error {
	_, err := t.proposer.Propose(own(t.ctx), cmd)
	return err
}

// replicateMembers makes sure the FSM knows the gRPC address of this node
// and of every initial member, so any node can name the leader's address.
func (t *Term) replicateMembers() error {
	l := t.l
	known := map[string]fsm.Member{}
	for _, m := range l.fsm.Members() {
		known[m.NodeID] = m
	}
	want := map[string]string{l.cfg.NodeID: l.cfg.GRPCAddress}
	for id, a := range l.cfg.InitialGRPC {
		if _, ok := want[id]; !ok && a != "" {
			want[id] = a
		}
	}
	cf := l.raft.GetConfiguration()
	if err := cf.Error(); err != nil {
		return err
	}
	for _, srv := range cf.Configuration().Servers {
		id := string(srv.ID)
		g, ok := want[id]
		if !ok {
			continue
		}
		if m, ok := known[id]; ok && m.GRPCAddress == g && m.RaftAddress == string(srv.Address) {
			continue
		}
		if err := t.setupApply(&fsmpb.Command{Op: &fsmpb.Command_SetMember{SetMember: &fsmpb.SetMember{
			NodeId: id, RaftAddress: string(srv.Address), GrpcAddress: g}}}); err != nil {
			return err
		}
	}
	return nil
}

// propose applies a command of this term; the queues observe every result,
// and the expiry loop is woken when the command made the earliest expiry
// earlier than the loop will look.
func (t *Term) propose(ctx context.Context, cmd *fsmpb.Command) (*fsm.Result, error) {
	return t.proposeThen(ctx, cmd, nil)
}

// proposeThen is propose with then (nil: none) run once with the outcome:
// for an applied command, in log order and before any later result reaches
// a caller (Proposer.ProposeThen), just after the queues observed it.
func (t *Term) proposeThen(ctx context.Context, cmd *fsmpb.Command, then func(*fsm.Result, error)) (*fsm.Result, error) {
	if t.ctx.Err() != nil {
		// An ended term proposes nothing (raft may not have noticed yet).
		if then != nil {
			then(nil, errNotLeader)
		}
		return nil, errNotLeader
	}
	res, err := t.proposer.ProposeThen(ctx, cmd, func(res *fsm.Result, err error) {
		if err == nil {
			t.q.observe(res)
			t.sig.observe(res)
		}
		if then != nil {
			then(res, err)
		}
	})
	if err != nil {
		return nil, err
	}
	// Most writes leave the earliest expiry where it was, or make it later
	// (a refresh, a revoke), and the loop finds that out when its timer
	// fires; only one that makes it earlier (a new lease) must wake it.
	// Waking it after every write cost the leader a goroutine wake-up, a
	// state-lock read and a timer per write.
	if next, ok := t.l.fsm.NextDeadline(); ok && t.expiryLooksTooLate(next) {
		t.kickExpiry()
	}
	return res, nil
}

// expiryLooksTooLate reports whether the expiry loop, which will look again
// by lookAt, would look too late for a lease expiring at next.
func (t *Term) expiryLooksTooLate(next int64) bool {
	return next < t.lookAt.Load()
}

// proposeGrants runs a command of grants for queued waiters in a goroutine
// of the term and settles them with its outcome, in the entry's then (as
// withHandOff does: the waiters hear of their grants without waiting for
// this goroutine to wake).
func (t *Term) proposeGrants(cmd *fsmpb.Command, ws []*waiter) bool {
	return t.goTerm(func() {
		_, _ = t.proposeThen(own(t.ctx), cmd, t.settling(ws))
	})
}

func (t *Term) kickExpiry() {
	select {
	case t.kick <- struct{}{}:
	default:
	}
}

// expiryLoop reaps expired leases: a timer on the earliest expires_at (at
// most expiryMaxSleep away), woken early by a write that made an earlier
// one (proposeThen).
func (t *Term) expiryLoop() {
	l := t.l
	maxSleep := l.expiryMaxSleep
	tm := time.NewTimer(maxSleep)
	defer tm.Stop()
	for {
		// Until it is armed again, every new lease wakes the loop: one that
		// made the earliest expiry earlier after the read below could
		// otherwise go unnoticed.
		t.lookAt.Store(math.MaxInt64)
		next, ok := l.fsm.NextDeadline()
		wait := maxSleep
		if ok {
			now := l.clock.Now()
			if next <= now {
				var err error
				if at, due := l.fsm.NextExpiry(); due && at <= now {
					err = t.expireLeases(now)
				}
				if at, due := l.fsm.NextTimer(); err == nil && due && at <= now {
					// Wait groups past expires_at, finished groups and
					// inactive barriers past their deletion time.
					_, err = t.propose(own(t.ctx), &fsmpb.Command{Op: &fsmpb.Command_ExpireTimers{ExpireTimers: &fsmpb.ExpireTimers{Max: l.cfg.ExpireBatch}}})
				}
				// Lateness runs to the reaping command's commit and apply
				// (propose returns then), not to its proposal.
				l.cfg.Observer.ExpiryEvent(ExpiryEvent{Lateness: time.Duration(l.clock.Now() - next), Err: err})
				if err == nil {
					continue
				}
				if t.ctx.Err() != nil {
					return
				}
				l.log.Warn("expiring leases, wait groups or barriers failed", "error", err)
				wait = 50 * time.Millisecond
			} else if d := time.Duration(next - now); d < wait {
				// +1µs: expires_at <= now must hold when the command applies.
				wait = d + time.Microsecond
			}
		}
		t.lookAt.Store(next) // math.MaxInt64 when there is no lease
		tm.Reset(wait)       // Go 1.23 timers: no stale tick survives a Reset
		select {
		case <-t.ctx.Done():
			return
		case <-t.kick:
		case <-tm.C:
		}
	}
}

// expireLeases proposes the reaping of the leases expired at now; the
// waiters that they make room for are granted in the expiry's own entry
// (its now is no earlier: at least these leases go).
func (t *Term) expireLeases(now int64) error {
	l := t.l
	cmd := &fsmpb.Command{Op: &fsmpb.Command_ExpireLeases{ExpireLeases: &fsmpb.ExpireLeases{Max: l.cfg.ExpireBatch}}}
	var ws []*waiter
	weights, locks := l.fsm.Expiring(now, int(l.cfg.ExpireBatch))
	for key, extra := range weights {
		ws = append(ws, t.q.attach(cmd, key, extra)...)
	}
	for ns, changes := range locks {
		ws = append(ws, t.q.attachLocks(cmd, ns, changes)...)
	}
	var err error
	if len(ws) > 0 {
		_, err = t.proposeThen(own(t.ctx), cmd, t.settling(ws))
	} else {
		_, err = t.propose(own(t.ctx), cmd)
	}
	return err
}

// Waiters lists a semaphore's calls in queue order (visibility: listing
// waiters, watch streams). Calls in state Proposed are not waiters yet.
func (t *Term) Waiters(ns, sem string) []WaiterInfo {
	return t.q.snapshot(fsm.SemKey{Namespace: ns, Semaphore: sem})
}

// WaiterCounts returns, per semaphore with any, the number of calls the
// leader decided must wait (metrics: queued waiters).
func (t *Term) WaiterCounts() map[fsm.SemKey]int { return t.q.counts() }
