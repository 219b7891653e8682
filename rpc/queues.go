package rpc

import (
	"context"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grackle-coord/grackle/apierr"
	"github.com/grackle-coord/grackle/fsm"
	fsmpb "github.com/grackle-coord/grackle/proto/grackle/fsm/v1"
	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
)

// Waiter queues live on the leader only, one strict FIFO per semaphore;
// waiters hold no state in the FSM. A waiter is granted by the command that
// frees permits: the leader attaches conditional grants for the queue heads
// that would fit to that very command, so a hand-off costs one commit. After
// every applied result the leader re-checks the heads of the semaphores that
// result freed, and proposes grants for any that fit and were not granted.

type waitResult struct {
	granted bool
	sem     *pb.Semaphore
	holder  *pb.SemaphoreHolder
	err     error
}

type waiter struct {
	ctx     context.Context
	key     fsm.SemKey
	leaseID string
	weight  int64
	md      map[string]string

	// mustWait: the leader decided this call waits (it arrived behind
	// another waiter, or its own Acquire applied without a grant). Only
	// such waiters put a newer acquire behind them; an acquire merely in
	// flight does not.
	mustWait   bool
	registered bool  // its own Acquire command has applied: it may be granted
	inFlight   bool  // a command that may grant it is in Raft
	delta      int64 // permits its in-flight grant would take
	abandoned  bool  // its caller stopped waiting while a grant was in flight
	finished   bool
	done       chan waitResult // buffered 1; receives exactly one result
}

type queues struct {
	s  *Service
	ls *leaderState

	mu    sync.Mutex
	bySem map[fsm.SemKey][]*waiter
}

func newQueues(s *Service, ls *leaderState) *queues {
	return &queues{s: s, ls: ls, bySem: map[fsm.SemKey][]*waiter{}}
}

// finishLocked ends a waiter once and removes it from its queue.
func (q *queues) finishLocked(w *waiter, r waitResult) {
	if w.finished {
		return
	}
	w.finished = true
	w.done <- r
	q.removeLocked(w)
}

func (q *queues) removeLocked(w *waiter) {
	ws := q.bySem[w.key]
	for i, x := range ws {
		if x == w {
			ws = append(ws[:i:i], ws[i+1:]...)
			break
		}
	}
	if len(ws) == 0 {
		delete(q.bySem, w.key)
	} else {
		q.bySem[w.key] = ws
	}
}

// enqueue appends a new waiter. It reports whether a waiter the leader
// decided must wait is ahead of it (then the call waits its turn even if
// it would fit; a non-blocking one ends UNAVAILABLE).
func (q *queues) enqueue(w *waiter) (queued bool, err error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.ls.ctx.Err() != nil {
		return false, q.s.unavailable(w.ctx, apierr.NotLeader, "leadership lost")
	}
	// A retried acquire of the same lease replaces the older call's place
	// only if that call's grant is not already in flight.
	for _, o := range q.bySem[w.key] {
		if o.leaseID == w.leaseID && !o.inFlight {
			q.finishLocked(o, waitResult{err: apierr.New(codes.Aborted, apierr.Superseded, q.s.cfg.NodeID, apierr.Leader{}, "superseded by a newer AcquireSemaphore with the same lease_id")})
		}
	}
	ws := q.bySem[w.key]
	if len(ws) >= q.s.cfg.MaxWaiters {
		return false, status.Errorf(codes.ResourceExhausted, "waiters: limit of %d queued waiters per semaphore reached on %q", q.s.cfg.MaxWaiters, w.key.Semaphore)
	}
	for _, o := range ws {
		queued = queued || o.mustWait
	}
	w.mustWait = queued
	w.inFlight = !queued // its own Acquire may grant it
	q.bySem[w.key] = append(ws, w)
	return queued, nil
}

// collectLocked picks, in FIFO order, the registered waiters at the head of
// key's queue that fit once extraFree more permits are free, and marks them
// in flight. It stops at the first that does not fit (head-of-line).
func (q *queues) collectLocked(key fsm.SemKey, extraFree int64) []*waiter {
	ws := q.bySem[key]
	if len(ws) == 0 {
		return nil
	}
	permits, holds, ok := q.s.fsm.SemaphoreCapacity(key.Namespace, key.Semaphore)
	if !ok {
		return nil
	}
	free := permits - holds + extraFree
	for _, w := range ws {
		if w.inFlight {
			free -= w.delta
		}
	}
	var out []*waiter
	for _, w := range ws {
		if !w.registered {
			break
		}
		if w.inFlight {
			continue
		}
		delta := w.weight - q.s.fsm.HeldWeight(key.Namespace, key.Semaphore, w.leaseID)
		if delta > free {
			break
		}
		free -= delta
		w.inFlight, w.delta = true, delta
		out = append(out, w)
	}
	return out
}

// grantsFor builds the conditional grants of the collected waiters.
func grantsFor(ws []*waiter) []*fsmpb.Grant {
	gs := make([]*fsmpb.Grant, len(ws))
	for i, w := range ws {
		gs[i] = &fsmpb.Grant{NamespaceName: w.key.Namespace, SemaphoreName: w.key.Semaphore, LeaseId: w.leaseID, Weight: w.weight, Metadata: w.md}
	}
	return gs
}

// attach collects waiters that fit once the command frees extraFree on key
// and adds their grants to the command.
func (q *queues) attach(cmd *fsmpb.Command, key fsm.SemKey, extraFree int64) []*waiter {
	q.mu.Lock()
	ws := q.collectLocked(key, extraFree)
	q.mu.Unlock()
	cmd.Grants = append(cmd.Grants, grantsFor(ws)...)
	return ws
}

// settle hands each attached waiter the outcome of its grant. res is nil
// when the command failed (its outcome unknown): the waiters stay queued,
// and if leadership was lost, stepDown ends them.
func (q *queues) settle(ws []*waiter, offset int, res *fsm.Result) {
	if len(ws) == 0 {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	keys := map[fsm.SemKey]bool{}
	for i, w := range ws {
		w.inFlight, w.delta = false, 0
		keys[w.key] = true
		if res == nil || offset+i >= len(res.Grants) {
			if w.abandoned {
				// Its caller stopped waiting for this outcome, which is
				// unknown: answer TIMED_OUT with the state as it is now.
				q.finishLocked(w, waitResult{})
			}
			continue
		}
		gr := res.Grants[offset+i]
		switch {
		case gr.Granted:
			q.finishLocked(w, waitResult{granted: true, sem: gr.Semaphore, holder: gr.Holder})
		case gr.Err != nil:
			q.finishLocked(w, waitResult{err: statusFromFSM(gr.Err)})
		case w.abandoned:
			q.finishLocked(w, waitResult{sem: gr.Semaphore})
		}
	}
	q.pumpLocked(keys)
}

// pumpLocked proposes grants for waiters of keys that now fit.
func (q *queues) pumpLocked(keys map[fsm.SemKey]bool) {
	var ws []*waiter
	for k := range keys {
		ws = append(ws, q.collectLocked(k, 0)...)
	}
	if len(ws) == 0 {
		return
	}
	cmd := &fsmpb.Command{Grants: grantsFor(ws)}
	go func() {
		res, err := q.s.apply(q.ls.ctx, q.ls, cmd)
		if err != nil {
			res = nil
		}
		q.settle(ws, 0, res)
	}()
}

// observe reacts to every result applied on the leader: waiters whose
// lease, semaphore or namespace went away end with NotFound, and queues of
// semaphores with freed permits are pumped.
func (q *queues) observe(res *fsm.Result) {
	if len(res.Freed) == 0 && len(res.RemovedLeases) == 0 && len(res.RemovedSemaphores) == 0 && res.RemovedNamespace == "" {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.bySem) == 0 {
		return
	}
	goneLease := map[fsm.LeaseKey]bool{}
	for _, l := range res.RemovedLeases {
		goneLease[l] = true
	}
	goneSem := map[fsm.SemKey]bool{}
	for _, k := range res.RemovedSemaphores {
		goneSem[k] = true
	}
	keys := map[fsm.SemKey]bool{}
	for _, k := range res.Freed {
		keys[k] = true
	}
	if len(goneLease) > 0 || len(goneSem) > 0 || res.RemovedNamespace != "" {
		for key, ws := range q.bySem {
			for _, w := range append([]*waiter(nil), ws...) {
				var why string
				switch {
				case res.RemovedNamespace != "" && key.Namespace == res.RemovedNamespace:
					why = "namespace " + key.Namespace + " was deleted"
				case goneSem[key]:
					why = "semaphore " + key.Semaphore + " was deleted"
				case goneLease[fsm.LeaseKey{Namespace: key.Namespace, LeaseID: w.leaseID}]:
					why = "lease " + w.leaseID + " expired or was revoked"
				default:
					continue
				}
				if w.inFlight {
					// Its pending command will fail on the missing record.
					continue
				}
				q.finishLocked(w, waitResult{err: status.Error(codes.NotFound, why+" while waiting")})
				keys[key] = true
			}
		}
	}
	q.pumpLocked(keys)
}

// failAll ends every waiter (leadership lost).
func (q *queues) failAll(errFor func(*waiter) error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, ws := range q.bySem {
		for _, w := range append([]*waiter(nil), ws...) {
			q.finishLocked(w, waitResult{err: errFor(w)})
		}
	}
}

// QueueLen is the number of calls waiting on a semaphore on this node (0
// unless it leads): those the leader decided must wait, not acquires whose
// own command is still in flight. Tests use it to wait for a known queue
// order.
func (s *Service) QueueLen(ns, sem string) int {
	ls := s.leader.Load()
	if ls == nil {
		return 0
	}
	ls.q.mu.Lock()
	defer ls.q.mu.Unlock()
	n := 0
	for _, w := range ls.q.bySem[fsm.SemKey{Namespace: ns, Semaphore: sem}] {
		if w.mustWait {
			n++
		}
	}
	return n
}
