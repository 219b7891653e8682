package leader

import (
	"context"
	"sync"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/grackle-coord/grackle/fsm"
	"github.com/grackle-coord/grackle/internal/fault"
	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
)

// Waiting for a wait group or a barrier (DESIGN.md, "Wait groups and
// barriers"). Unlike an acquire, such a waiter takes nothing: it waits
// until the thing it watches has finished (a group COMPLETED or EXPIRED,
// a barrier past the generation), is deleted, or its timeout passes. So
// there is no queue, only a set of waiters per wait group or barrier,
// woken by the results of the commands this term proposes (fsm.Result's
// Woken), each of which then reads the state again.

// waitSignals holds the term's waiters of wait groups and barriers.
type waitSignals struct {
	max   int // waiters per wait group or barrier
	mu    sync.Mutex
	byKey map[fsm.WaitKey]map[*signal]struct{}
	ended bool
}

// signal is one waiter's doorbell: a wake-up is a token in ch (one is
// enough: the waiter reads the state again, whatever woke it).
type signal struct{ ch chan struct{} }

func newWaitSignals(max int) *waitSignals {
	return &waitSignals{max: max, byKey: map[fsm.WaitKey]map[*signal]struct{}{}}
}

func (ws *waitSignals) add(k fsm.WaitKey) (*signal, error) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if ws.ended {
		return nil, errNotLeader
	}
	set := ws.byKey[k]
	if len(set) >= ws.max {
		what := "wait group"
		if k.Kind == fsm.KindBarrier {
			what = "barrier"
		}
		return nil, newError(codes.ResourceExhausted, "", "waiters: limit of %d per %s reached on %q (--max-waiters)", ws.max, what, k.Name)
	}
	if set == nil {
		set = map[*signal]struct{}{}
		ws.byKey[k] = set
	}
	s := &signal{ch: make(chan struct{}, 1)}
	set[s] = struct{}{}
	return s, nil
}

func (ws *waitSignals) remove(k fsm.WaitKey, s *signal) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if set := ws.byKey[k]; set != nil {
		delete(set, s)
		if len(set) == 0 {
			delete(ws.byKey, k)
		}
	}
}

func (s *signal) ring() {
	select {
	case s.ch <- struct{}{}:
	default:
	}
}

// observe rings the waiters of every wait group and barrier a result
// finished, tripped or deleted.
func (ws *waitSignals) observe(res *fsm.Result) {
	if len(res.Woken) == 0 {
		return
	}
	ws.mu.Lock()
	defer ws.mu.Unlock()
	for _, k := range res.Woken {
		for s := range ws.byKey[k] {
			s.ring()
		}
	}
}

// end rings every waiter once the term has ended (each then sees the
// term's context done) and refuses new ones.
func (ws *waitSignals) end() {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	ws.ended = true
	for _, set := range ws.byKey {
		for s := range set {
			s.ring()
		}
	}
}

// waitFor waits until look says done, or the timeout, the caller or the
// term ends. It registers first and reads after a confirmation round
// (Linearize), so that no write that finished before the call is missed
// and no finishing commit after the registration goes unnoticed: every
// commit of this term is observed after it applied, and one before the
// registration is in the state the read sees.
func (t *Term) waitFor(ctx context.Context, k fsm.WaitKey, timeout time.Duration, look func(now int64) fsm.WaitState) (fsm.WaitState, bool, error) {
	sig, err := t.sig.add(k)
	if err != nil {
		return fsm.WaitState{}, false, err
	}
	defer t.sig.remove(k, sig)
	if _, err := t.Linearize(ctx); err != nil {
		return fsm.WaitState{}, false, err
	}
	var timer <-chan time.Time
	if timeout > 0 {
		tm := time.NewTimer(timeout)
		defer tm.Stop()
		timer = tm.C
	}
	for {
		st := look(t.l.clock.Now())
		if st.Err != nil {
			return st, false, st.Err
		}
		if st.Done || timeout <= 0 {
			return st, st.Done, nil
		}
		select {
		case <-sig.ch:
		case <-timer:
			return look(t.l.clock.Now()), false, nil
		case <-ctx.Done():
			return st, false, fromRaft(ctx.Err())
		case <-t.ctx.Done():
			return st, false, errWaitLeadership
		}
	}
}

// WaitForWaitGroup waits until a wait group is COMPLETED or EXPIRED, or
// the timeout (0: look once).
func (t *Term) WaitForWaitGroup(ctx context.Context, ns, name string, timeout time.Duration) (*pb.WaitForWaitGroupResponse, error) {
	k := fsm.WaitKey{Kind: fsm.KindWaitGroup, Namespace: ns, Name: name}
	st, done, err := t.waitFor(ctx, k, timeout, func(now int64) fsm.WaitState { return t.l.fsm.WaitGroupWait(ns, name, now) })
	if err != nil {
		return nil, err
	}
	out := &pb.WaitForWaitGroupResponse{WaitGroup: st.WaitGroup, Outcome: pb.WaitGroupWaitOutcome_WAIT_GROUP_WAIT_OUTCOME_TIMED_OUT}
	if done {
		out.Outcome = pb.WaitGroupWaitOutcome_WAIT_GROUP_WAIT_OUTCOME_COMPLETED
		if st.WaitGroup.GetStatus() == pb.WaitGroupStatus_WAIT_GROUP_STATUS_EXPIRED {
			out.Outcome = pb.WaitGroupWaitOutcome_WAIT_GROUP_WAIT_OUTCOME_EXPIRED
		}
	}
	return out, nil
}

// WaitAtBarrier waits until a barrier's generation passes gen, or the
// timeout (0: look once).
func (t *Term) WaitAtBarrier(ctx context.Context, ns, name string, gen int64, timeout time.Duration) (*pb.WaitAtBarrierResponse, error) {
	k := fsm.WaitKey{Kind: fsm.KindBarrier, Namespace: ns, Name: name}
	st, done, err := t.waitFor(ctx, k, timeout, func(int64) fsm.WaitState {
		st := t.l.fsm.BarrierWait(ns, name, gen)
		if !st.Done && st.Err == nil && fault.On("barrier-early-release") && st.Barrier.GetArrivedProcesses() > 0 &&
			st.Barrier.GetArrivedProcesses()+1 >= st.Barrier.GetExpectedProcesses() {
			st.Done = true // a build-time fault (fault-injection suite): release one arrival early
		}
		return st
	})
	if err != nil {
		return nil, err
	}
	out := &pb.WaitAtBarrierResponse{Barrier: st.Barrier, Outcome: pb.BarrierWaitOutcome_BARRIER_WAIT_OUTCOME_TIMED_OUT}
	if done {
		out.Outcome = pb.BarrierWaitOutcome_BARRIER_WAIT_OUTCOME_TRIPPED
	}
	return out, nil
}
