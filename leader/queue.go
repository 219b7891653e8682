package leader

import (
	"sync"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/grackle-coord/grackle/apierr"
	"github.com/grackle-coord/grackle/fsm"
	fsmpb "github.com/grackle-coord/grackle/proto/grackle/fsm/v1"
	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
)

// Waiter queues live on the leader only, one strict FIFO per semaphore;
// waiters hold no state in the FSM. A waiter is granted by the command that
// frees permits: the leader attaches conditional grants for the queue heads
// that would fit to that very command, so a hand-off costs one commit.
// After every applied result the leader re-checks the heads of the
// semaphores that result freed, and proposes grants for any that fit.
//
// Every change of a waiter's state happens in a method of queues, under
// its lock (DESIGN.md lists the states and transitions). Callers hold a
// *waiter only as a handle: they never read or write its state.

// State is a waiter's place in its life (see DESIGN.md).
type State int

const (
	// Proposed: its own Acquire (not queued) is in Raft and may grant it.
	// Not yet a waiter for the calls behind it.
	Proposed State = iota + 1
	// Queued: it arrived behind a waiter, so the leader decided it waits;
	// its own Acquire (queued: validate, record activity) is in Raft.
	Queued
	// Waiting: its own Acquire applied without a grant; it is granted in
	// FIFO order when permits free up.
	Waiting
	// Granting: a command carrying its grant is in Raft.
	Granting
	// Done: it has its outcome and left the queue.
	Done
)

func (s State) String() string {
	switch s {
	case Proposed:
		return "proposed"
	case Queued:
		return "queued"
	case Waiting:
		return "waiting"
	case Granting:
		return "granting"
	case Done:
		return "done"
	}
	return "unknown"
}

// Outcome is how an acquire ended: granted (with the semaphore and the
// hold), not granted (Semaphore is the state the decision saw, when known),
// or failed (Err: an *fsm.Error or an *Error).
type Outcome struct {
	Granted   bool
	Semaphore *pb.Semaphore
	Holder    *pb.SemaphoreHolder
	// Lock and LockHolder are an AcquireLock's (Semaphore and Holder nil).
	Lock       *pb.Lock
	LockHolder *pb.LockHolder
	Err        error
}

type waiter struct {
	// Set at creation, never changed.
	key      fsm.SemKey
	leaseID  string
	weight   int64
	md       map[string]string
	since    time.Time // local, monotonic: for durations and timers
	deadline time.Time // when it gives up waiting (local, monotonic)
	at       int64     // the leader clock at its arrival (Unix ns): what callers see
	timeout  time.Duration
	done     chan Outcome // buffered 1; receives exactly one outcome

	// Set by enqueue.
	seq uint64
	// lock is set for an AcquireLock call (lockqueue.go); key.Semaphore
	// is then empty.
	lock *lockWant

	// Owned by queues, under queues.mu.
	state     State
	delta     int64 // Granting: the permits its grant takes
	abandoned bool  // Granting: its caller stopped waiting for the outcome
	grantedAt time.Time
}

// WaiterInfo is a snapshot of one waiter, for visibility (listing waiters,
// watch streams, metrics).
type WaiterInfo struct {
	LeaseID  string
	Weight   int64
	Metadata map[string]string
	State    State
	// Since is when the call reached the leader, by the leader clock (the
	// time base of every timestamp in the replicated state, which a jump
	// of the wall clock does not move within a term).
	Since    time.Time
	Deadline time.Time // when it gives up: Since + its timeout (Since for a non-blocking try)
	// Seq orders arrivals at this leader in this term (the queue order).
	Seq uint64
}

// view is what the queues read of the state machine.
type view interface {
	SemaphoreCapacity(ns, sem string) (permits, holds int64, ok bool)
	HeldWeight(ns, sem, leaseID string) int64
}

// processView names leases' processes, for the per-process share of a
// queue (the state machine; a test's view may not).
type processView interface {
	LeaseProcesses(ns string, leaseIDs []string) []string
}

type queues struct {
	maxWaiters int
	// maxPerProcess bounds one process's waiters in one queue, so that a
	// client with many leases cannot fill it (0: no bound).
	maxPerProcess int
	procs         processView
	view          view
	obs           Observer
	// proposeGrants runs a command of grants in the background (in the
	// term's goroutines) and hands its result to settle. It returns false
	// when the term has ended.
	proposeGrants func(cmd *fsmpb.Command, ws []*waiter) bool

	mu    sync.Mutex
	ended bool
	seq   uint64
	bySem map[fsm.SemKey][]*waiter
	// byTree holds the lock calls, one queue per tree of lock names (a
	// namespace and a first path segment): requests in different trees
	// never conflict (lockqueue.go).
	byTree map[treeKey][]*waiter
	locks  lockView
}

func newQueues(maxWaiters int, v view, obs Observer) *queues {
	q := &queues{maxWaiters: maxWaiters, view: v, obs: obs, bySem: map[fsm.SemKey][]*waiter{}, byTree: map[treeKey][]*waiter{}}
	q.locks, _ = v.(lockView)
	q.procs, _ = v.(processView)
	return q
}

// queueFull is the refusal of a call that finds its queue full, or its
// process's share of it taken.
func queueFull(format string, a ...any) *Error {
	return newError(codes.ResourceExhausted, apierr.QueueFull, format, a...)
}

// isQueueFull reports whether err is queueFull's refusal.
func isQueueFull(err error) bool {
	e, ok := err.(*Error)
	return ok && e.Reason == apierr.QueueFull
}

// processFullLocked reports whether w's process already has its share of
// the waiters ws of which sameQueue says which share w's queue. It looks
// the processes up only for a queue at least that long, so the common
// short queue costs nothing.
func (q *queues) processFullLocked(ns string, ws []*waiter, w *waiter, sameQueue func(*waiter) bool) (string, bool) {
	if q.procs == nil || q.maxPerProcess <= 0 || len(ws) < q.maxPerProcess {
		return "", false
	}
	ids := make([]string, 0, len(ws)+1)
	for _, o := range ws {
		if o.state != Done && sameQueue(o) {
			ids = append(ids, o.leaseID)
		}
	}
	if len(ids) < q.maxPerProcess {
		return "", false
	}
	ids = append(ids, w.leaseID)
	procs := q.procs.LeaseProcesses(ns, ids)
	mine, n := procs[len(procs)-1], 0
	if mine == "" {
		return "", false // no such lease: the acquire fails on its own
	}
	for _, p := range procs[:len(procs)-1] {
		if p == mine {
			n++
		}
	}
	return mine, n >= q.maxPerProcess
}

// newWaiter: at is the leader clock's now (Clock.Now), which the waiter
// shows as its arrival; its own timing runs on the local monotonic clock.
func newWaiter(key fsm.SemKey, leaseID string, weight int64, md map[string]string, timeout time.Duration, at int64) *waiter {
	now := time.Now()
	return &waiter{key: key, leaseID: leaseID, weight: weight, md: md, since: now, deadline: now.Add(timeout), at: at, timeout: timeout,
		done: make(chan Outcome, 1)}
}

// finishLocked ends a waiter once, removes it from its queue and reports it.
func (q *queues) finishLocked(w *waiter, o Outcome) {
	if w.state == Done {
		return
	}
	mustWait := w.state != Proposed
	w.state = Done
	w.done <- o
	q.removeLocked(w)
	if !mustWait {
		return
	}
	ev := WaiterEvent{Kind: WaiterEnded, Key: w.key, Lock: w.lockName(), LeaseID: w.leaseID, Weight: w.weight, Waited: time.Since(w.since)}
	if o.Granted {
		ev.Kind, ev.HandOff = WaiterGranted, time.Since(w.grantedAt)
	}
	q.obs.WaiterEvent(ev)
}

func (q *queues) removeLocked(w *waiter) {
	if w.lock != nil {
		q.removeLockLocked(w)
		return
	}
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

// enqueue appends a new call. It reports whether a waiter the leader has
// decided must wait is ahead of it: then the call waits its turn even if it
// would fit (a non-blocking one ends UNAVAILABLE). Calls whose own Acquire
// is merely in flight are not waiters yet and put no one behind them.
func (q *queues) enqueue(w *waiter) (behind bool, err error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.ended {
		return false, errNotLeader
	}
	if w.lock != nil {
		return q.enqueueLockLocked(w)
	}
	// A retried acquire of the same lease replaces an older call that
	// waits, but not one whose grant may already be in Raft.
	for _, o := range q.bySem[w.key] {
		if o.leaseID == w.leaseID && (o.state == Queued || o.state == Waiting) {
			q.finishLocked(o, Outcome{Err: newError(codes.Aborted, apierr.Superseded, "superseded by a newer AcquireSemaphore with the same lease_id")})
		}
	}
	ws := q.bySem[w.key]
	if len(ws) >= q.maxWaiters {
		return false, queueFull("waiters: limit of %d queued waiters per semaphore reached on %q (--max-waiters)", q.maxWaiters, w.key.Semaphore)
	}
	if proc, full := q.processFullLocked(w.key.Namespace, ws, w, func(*waiter) bool { return true }); full {
		return false, queueFull("waiters: process %q already has %d waiters on semaphore %q (--max-waiters-per-process)", proc, q.maxPerProcess, w.key.Semaphore)
	}
	for _, o := range ws {
		behind = behind || o.state != Proposed
	}
	q.seq++
	w.seq = q.seq
	w.state = Proposed
	if behind {
		w.state = Queued
		q.obs.WaiterEvent(WaiterEvent{Kind: WaiterQueued, Key: w.key, LeaseID: w.leaseID, Weight: w.weight})
	}
	q.bySem[w.key] = append(ws, w)
	return behind, nil
}

// acquired takes the result of a waiter's own Acquire command (res nil:
// err says why it failed). The caller then reads w.done, or waits on it.
func (q *queues) acquired(w *waiter, res *fsm.Result, err error, nonBlocking bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	defer q.pumpOf(w)
	switch {
	case w.state == Done:
		// Ended meanwhile (superseded, or leadership lost).
	case err != nil:
		q.finishLocked(w, Outcome{Err: err})
	case res.Err != nil:
		q.finishLocked(w, Outcome{Err: res.Err})
	case res.Acquired:
		q.finishLocked(w, Outcome{Granted: true, Semaphore: res.Semaphore, Holder: res.Holder, Lock: res.Lock, LockHolder: res.LockHolder})
	case nonBlocking:
		q.finishLocked(w, Outcome{Semaphore: res.Semaphore, Lock: res.Lock})
	default:
		if w.state == Proposed {
			q.obs.WaiterEvent(WaiterEvent{Kind: WaiterQueued, Key: w.key, Lock: w.lockName(), LeaseID: w.leaseID, Weight: w.weight})
		}
		w.state = Waiting
	}
}

// stop ends a waiter whose time ran out or whose caller went away. One
// whose grant is in Raft waits for that grant's outcome instead: it may
// have been granted.
func (q *queues) stop(w *waiter) {
	q.mu.Lock()
	defer q.mu.Unlock()
	switch w.state {
	case Waiting, Queued, Proposed:
		q.finishLocked(w, Outcome{})
		q.pumpOf(w)
	case Granting:
		w.abandoned = true
	}
}

// drop removes a waiter without an outcome (its caller answers by itself).
func (q *queues) drop(w *waiter) {
	q.mu.Lock()
	defer q.mu.Unlock()
	w.state = Done
	q.removeLocked(w)
}

// collectLocked picks, in FIFO order, the waiting calls at the head of
// key's queue that fit once extraFree more permits are free, and marks
// them Granting. It stops at the first that does not fit (head-of-line
// blocking) or is not Waiting yet.
func (q *queues) collectLocked(key fsm.SemKey, extraFree int64) []*waiter {
	ws := q.bySem[key]
	if len(ws) == 0 || q.ended {
		return nil
	}
	permits, holds, ok := q.view.SemaphoreCapacity(key.Namespace, key.Semaphore)
	if !ok {
		return nil
	}
	free := permits - holds + extraFree
	for _, w := range ws {
		if w.state == Granting {
			free -= w.delta
		}
	}
	var out []*waiter
	for _, w := range ws {
		if w.state == Granting {
			continue
		}
		if w.state != Waiting {
			break
		}
		delta := w.weight - q.view.HeldWeight(key.Namespace, key.Semaphore, w.leaseID)
		if delta > free {
			break
		}
		free -= delta
		w.state, w.delta, w.grantedAt = Granting, delta, time.Now()
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

// attach collects waiters of key that fit once the command frees extraFree
// permits and adds their grants to the command (a hand-off in the entry
// that frees the permits). The caller settles them with the result.
func (q *queues) attach(cmd *fsmpb.Command, key fsm.SemKey, extraFree int64) []*waiter {
	q.mu.Lock()
	ws := q.collectLocked(key, extraFree)
	q.mu.Unlock()
	cmd.Grants = append(cmd.Grants, grantsFor(ws)...)
	return ws
}

// settle hands each attached waiter the outcome of its grant. res is nil
// when the command failed (its outcome unknown): the waiters wait again,
// and if leadership was lost, failAll ends them.
func (q *queues) settle(ws []*waiter, res *fsm.Result) {
	if len(ws) == 0 {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	keys := map[fsm.SemKey]bool{}
	trees := map[treeKey]bool{}
	nSem, nLock := 0, 0
	for _, w := range ws {
		// Grants of each kind are in the command in the order of ws.
		i, grants := nSem, 0
		if res != nil {
			grants = len(res.Grants)
		}
		if w.lock != nil {
			i, nLock = nLock, nLock+1
			trees[w.tree()] = true
			if res != nil {
				grants = len(res.LockGrants)
			}
		} else {
			nSem++
			keys[w.key] = true
		}
		if w.state != Granting {
			continue
		}
		w.state, w.delta = Waiting, 0
		if res == nil || i >= grants {
			if w.abandoned {
				// Its caller stopped waiting for this outcome, which is
				// unknown: answer TIMED_OUT with the state as it is now.
				q.finishLocked(w, Outcome{})
			}
			continue
		}
		if w.lock != nil {
			q.settleLockLocked(w, res.LockGrants[i])
			continue
		}
		gr := res.Grants[i]
		switch {
		case gr.Granted:
			q.finishLocked(w, Outcome{Granted: true, Semaphore: gr.Semaphore, Holder: gr.Holder})
		case gr.Err != nil:
			q.finishLocked(w, Outcome{Err: gr.Err})
		case w.abandoned:
			q.finishLocked(w, Outcome{Semaphore: gr.Semaphore})
		}
	}
	for k := range keys {
		q.pumpLocked(k)
	}
	for k := range trees {
		q.pumpTreeLocked(k)
	}
}

// pumpOf pumps the queue a waiter is in.
func (q *queues) pumpOf(w *waiter) {
	if w.lock != nil {
		q.pumpTreeLocked(w.tree())
	} else {
		q.pumpLocked(w.key)
	}
}

// pumpLocked proposes grants for the waiters of key that now fit. It is
// the only place that starts a grant command of its own.
func (q *queues) pumpLocked(key fsm.SemKey) {
	ws := q.collectLocked(key, 0)
	if len(ws) == 0 {
		return
	}
	if !q.proposeGrants(&fsmpb.Command{Grants: grantsFor(ws)}, ws) {
		for _, w := range ws {
			w.state, w.delta = Waiting, 0
		}
	}
}

// observe reacts to every result applied on the leader: waiters whose
// lease, semaphore or namespace went away end with NotFound, and queues of
// semaphores with freed permits are pumped.
func (q *queues) observe(res *fsm.Result) {
	if len(res.Freed) == 0 && len(res.RemovedLeases) == 0 && len(res.RemovedSemaphores) == 0 && res.RemovedNamespace == "" &&
		len(res.FreedLocks) == 0 {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.observeLocksLocked(res)
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
				var why, reason string
				switch {
				case res.RemovedNamespace != "" && key.Namespace == res.RemovedNamespace:
					why, reason = "namespace "+key.Namespace+" was deleted", apierr.NamespaceNotFound
				case goneSem[key]:
					why, reason = "semaphore "+key.Semaphore+" was deleted", apierr.SemaphoreNotFound
				case goneLease[fsm.LeaseKey{Namespace: key.Namespace, LeaseID: w.leaseID}]:
					why, reason = "lease "+w.leaseID+" expired or was revoked", apierr.LeaseNotFound
				default:
					continue
				}
				if w.state == Proposed || w.state == Granting {
					// Its pending command will fail on the missing record.
					continue
				}
				q.finishLocked(w, Outcome{Err: newError(codes.NotFound, reason, "%s while waiting", why)})
				keys[key] = true
			}
		}
	}
	for k := range keys {
		q.pumpLocked(k)
	}
}

// failAll ends every waiter with err and refuses new ones (the term ended).
func (q *queues) failAll(err error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.ended = true
	for _, ws := range q.bySem {
		for _, w := range append([]*waiter(nil), ws...) {
			q.finishLocked(w, Outcome{Err: err})
		}
	}
	for _, ws := range q.byTree {
		for _, w := range append([]*waiter(nil), ws...) {
			q.finishLocked(w, Outcome{Err: err})
		}
	}
}

// snapshot lists key's calls in queue order (all states but Done).
func (q *queues) snapshot(key fsm.SemKey) []WaiterInfo {
	q.mu.Lock()
	defer q.mu.Unlock()
	ws := q.bySem[key]
	out := make([]WaiterInfo, len(ws))
	for i, w := range ws {
		out[i] = w.info()
	}
	return out
}

func (w *waiter) info() WaiterInfo {
	return WaiterInfo{LeaseID: w.leaseID, Weight: w.weight, Metadata: w.md, State: w.state, Since: time.Unix(0, w.at),
		Deadline: time.Unix(0, w.at).Add(w.timeout), Seq: w.seq}
}

// nowMono is the local monotonic clock (waiters' own timing).
func nowMono() time.Time { return time.Now() }

// counts returns the number of waiters (decided to wait) per semaphore.
func (q *queues) counts() map[fsm.SemKey]int {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := make(map[fsm.SemKey]int, len(q.bySem))
	for k, ws := range q.bySem {
		for _, w := range ws {
			if w.state != Proposed {
				out[k]++
			}
		}
	}
	return out
}
