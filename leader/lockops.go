package leader

import (
	"context"
	"time"

	"github.com/grackle-coord/grackle/fsm"
	fsmpb "github.com/grackle-coord/grackle/proto/grackle/fsm/v1"
	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
)

// The lock operations of a term (lockqueue.go has the queues).

// LockRequest is one AcquireLock call as the leader sees it.
type LockRequest struct {
	Namespace, Lock, LeaseID string
	Exclusive                bool
	Metadata                 map[string]string
	// Timeout is how long the call may wait, from its arrival here; 0 is
	// a non-blocking try.
	Timeout time.Duration
}

// withLockHandOff proposes cmd with the grants of the lock waiters that
// are free once its changes are made, in the same entry, and settles them
// in the entry's then (as withHandOff does for semaphores).
func (t *Term) withLockHandOff(ctx context.Context, cmd *fsmpb.Command, ns string, changes []fsm.LockChange) (*fsm.Result, error) {
	if len(changes) == 0 {
		return t.propose(ctx, cmd)
	}
	ws := t.q.attachLocks(cmd, ns, changes)
	if len(ws) == 0 {
		return t.propose(ctx, cmd)
	}
	return t.proposeThen(ctx, cmd, t.settling(ws))
}

// ReleaseLock releases a lease's hold on a lock; the waiters it makes room
// for are granted in the release's own entry.
func (t *Term) ReleaseLock(ctx context.Context, ns, name, leaseID string) (*fsm.Result, error) {
	cmd := &fsmpb.Command{Op: &fsmpb.Command_ReleaseLock{ReleaseLock: &fsmpb.ReleaseLock{NamespaceName: ns, LockName: name, LeaseId: leaseID}}}
	var changes []fsm.LockChange
	if held, _ := t.l.fsm.LockHeld(ns, name, leaseID); held {
		changes = []fsm.LockChange{{Name: name, LeaseID: leaseID, Gone: true}}
	}
	return t.withLockHandOff(ctx, cmd, ns, changes)
}

// DeleteLock drops every holder of a lock (an operator's force release);
// the waiters that now fit are granted in the same entry.
func (t *Term) DeleteLock(ctx context.Context, ns, name string) (*fsm.Result, error) {
	cmd := &fsmpb.Command{Op: &fsmpb.Command_DeleteLock{DeleteLock: &fsmpb.DeleteLock{NamespaceName: ns, LockName: name}}}
	var changes []fsm.LockChange
	for _, lease := range t.l.fsm.LockHolderLeases(ns, name) {
		changes = append(changes, fsm.LockChange{Name: name, LeaseID: lease, Gone: true})
	}
	return t.withLockHandOff(ctx, cmd, ns, changes)
}

// revokeLockLease revokes a lock lease; every lock it held hands off in
// the same entry.
func (t *Term) revokeLockLease(ctx context.Context, ns, leaseID string) (*fsm.Result, error) {
	cmd := &fsmpb.Command{Op: &fsmpb.Command_RevokeLease{RevokeLease: &fsmpb.RevokeLease{NamespaceName: ns, LeaseId: leaseID}}}
	var changes []fsm.LockChange
	for _, name := range t.l.fsm.LeaseLocks(ns, leaseID) {
		changes = append(changes, fsm.LockChange{Name: name, LeaseID: leaseID, Gone: true})
	}
	return t.withLockHandOff(ctx, cmd, ns, changes)
}

// AcquireLock runs one acquire: its own AcquireLock command (which may
// grant it at once), then, if it must wait, its place in the tree's queue
// until a grant, the timeout, or the caller leaves. index is the Raft
// index of its own command (0 when none applied).
func (t *Term) AcquireLock(ctx context.Context, r LockRequest) (resp *pb.AcquireLockResponse, index uint64, err error) {
	f := t.l.fsm
	held, heldExcl, covered := f.LockStanding(r.Namespace, r.Lock, r.LeaseID, r.Exclusive)
	w := newWaiter(fsm.SemKey{Namespace: r.Namespace}, r.LeaseID, 0, r.Metadata, r.Timeout, t.l.clock.Now())
	w.lock = &lockWant{name: r.Lock, excl: r.Exclusive, upgrade: held && !heldExcl && r.Exclusive, covered: covered}
	behind, err := t.q.enqueue(w)
	if err != nil && r.Timeout == 0 && isQueueFull(err) {
		// As a semaphore's try: UNAVAILABLE, behind the whole queue.
		w.seq = ^uint64(0)
		resp, err = t.lockResponse(ctx, r, w, Outcome{}, true)
		return resp, 0, err
	}
	if err != nil {
		return nil, 0, err
	}
	nonBlocking := r.Timeout == 0
	cmd := &fsmpb.Command{Op: &fsmpb.Command_AcquireLock{AcquireLock: &fsmpb.AcquireLock{Queued: behind,
		Grant: &fsmpb.LockGrant{NamespaceName: r.Namespace, LockName: r.Lock, LeaseId: r.LeaseID, Exclusive: r.Exclusive, Metadata: r.Metadata}}}}
	then := func(res *fsm.Result, err error) { t.q.acquired(w, res, err, nonBlocking) }
	if held && heldExcl && !r.Exclusive {
		// A downgrade: the waiters that now fit are granted in its entry.
		ws := t.q.attachLocks(cmd, r.Namespace, []fsm.LockChange{{Name: r.Lock, LeaseID: r.LeaseID}})
		if len(ws) > 0 {
			settle := t.settling(ws)
			then = func(res *fsm.Result, err error) {
				t.q.acquired(w, res, err, nonBlocking)
				settle(res, err)
			}
		}
	}
	pctx := ctx
	if behind && !nonBlocking {
		pctx = waitsAnyway(ctx)
	}
	res, _ := t.proposeThen(pctx, cmd, then)
	if res != nil {
		index = res.Index
	}
	o := t.await(ctx, w)
	resp, err = t.lockResponse(ctx, r, w, o, nonBlocking)
	return resp, index, err
}

// await waits for a waiter's outcome until its deadline or the caller
// leaves (then it stops the waiter, which may still have been granted).
func (t *Term) await(ctx context.Context, w *waiter) Outcome {
	select {
	case o := <-w.done:
		return o
	default:
	}
	timer := time.NewTimer(time.Until(w.deadline))
	defer timer.Stop()
	select {
	case o := <-w.done:
		return o
	case <-timer.C:
	case <-ctx.Done():
	}
	t.q.stop(w)
	return <-w.done
}

func (t *Term) lockResponse(ctx context.Context, r LockRequest, w *waiter, o Outcome, nonBlocking bool) (*pb.AcquireLockResponse, error) {
	if o.Err != nil {
		return nil, o.Err
	}
	if o.Granted {
		return &pb.AcquireLockResponse{Lock: o.Lock, Outcome: pb.AcquireOutcome_ACQUIRE_OUTCOME_ACQUIRED, Holder: o.LockHolder}, nil
	}
	if err := ctx.Err(); err != nil {
		return nil, fromRaft(err)
	}
	outcome := pb.AcquireOutcome_ACQUIRE_OUTCOME_TIMED_OUT
	if nonBlocking {
		outcome = pb.AcquireOutcome_ACQUIRE_OUTCOME_UNAVAILABLE
	}
	f := t.l.fsm
	lock, err := f.GetLock(r.Namespace, r.Lock, t.l.clock.Now())
	if err != nil {
		return nil, err
	}
	reason, names := f.LockConflict(r.Namespace, r.Lock, r.LeaseID, r.Exclusive, nil, true)
	if reason == pb.ContentionReason_CONTENTION_REASON_UNSPECIFIED {
		// Nothing held blocks it: it waited its turn behind earlier
		// requests (or was decided just before room was made).
		reason, names = pb.ContentionReason_CONTENTION_REASON_QUEUE, t.q.lockQueueBlockers(r.Namespace, r.Lock, r.LeaseID, r.Exclusive, w.seq)
	}
	return &pb.AcquireLockResponse{Lock: lock, Outcome: outcome, Reason: reason, BlockingLocks: names}, nil
}

// LockWaiters lists a lock's calls in queue order (visibility).
func (t *Term) LockWaiters(ns, name string) []LockWaiterInfo { return t.q.lockSnapshot(ns, name) }

// LockWaiterCounts returns, per lock with any, the calls that must wait.
func (t *Term) LockWaiterCounts() map[fsm.LockKey]int { return t.q.lockCounts() }
