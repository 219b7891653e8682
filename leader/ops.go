package leader

import (
	"context"
	"time"

	"github.com/grackle-coord/grackle/fsm"
	"github.com/grackle-coord/grackle/internal/fault"
	fsmpb "github.com/grackle-coord/grackle/proto/grackle/fsm/v1"
	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
)

// The operations of a term. Each returns the FSM's result (whose Err is an
// FSM rejection) or an error that is an *Error or an *fsm.Error.

// Write proposes a command that no queue attaches grants to.
func (t *Term) Write(ctx context.Context, cmd *fsmpb.Command) (*fsm.Result, error) {
	return t.propose(ctx, cmd)
}

// Linearize makes a read linearizable and returns the leader's `now` for
// it. Reads run only on a leader that has passed its barrier (so everything
// committed in earlier terms is applied), and a write is acknowledged only
// after the leader's FSM applied it; so once VerifyLeader confirms with a
// quorum that no other leader has taken over, this node's FSM holds every
// write that completed before the read began. Concurrent reads share one
// confirmation round (package rounds), each a round that began after it
// arrived.
func (t *Term) Linearize(ctx context.Context) (int64, error) {
	if _, err := t.l.reads.Do(ctx); err != nil {
		return 0, fromRaft(err)
	}
	return t.l.clock.Now(), nil
}

// ReadIndex is a follower's read made linearizable here (see DESIGN.md,
// Follower reads): after a confirmation round that began after the call
// arrived, the index of the last entry this leader's FSM applied, and the
// leader's `now`. A follower that has applied that index holds every write
// that completed before its read began.
func (t *Term) ReadIndex(ctx context.Context) (index uint64, now int64, err error) {
	if now, err = t.Linearize(ctx); err != nil {
		return 0, 0, err
	}
	return t.l.fsm.AppliedIndex(), now, nil
}

// withHandOff proposes cmd with the grants of the waiters of key that fit
// once it frees extraFree permits, in the same entry, and settles them.
//
// They are settled in the entry's then, on the packer's completion
// goroutine, not after this caller wakes: the next holder's answer is then
// on its way one goroutine hand-off sooner, and the release's own answer
// (off the hand-off's critical path) follows.
func (t *Term) withHandOff(ctx context.Context, cmd *fsmpb.Command, frees map[fsm.SemKey]int64) (*fsm.Result, error) {
	var ws []*waiter
	for key, extra := range frees {
		ws = append(ws, t.q.attach(cmd, key, extra)...)
	}
	if len(ws) == 0 {
		return t.propose(ctx, cmd)
	}
	return t.proposeThen(ctx, cmd, t.settling(ws))
}

// settling is the then of an entry that carries the grants of ws: it
// settles them with the entry's result (none when it failed).
func (t *Term) settling(ws []*waiter) func(*fsm.Result, error) {
	return func(res *fsm.Result, err error) {
		if err != nil {
			res = nil
		}
		t.q.settle(ws, res)
	}
}

// Release releases a hold; waiters it frees room for are granted in the
// release's own entry.
func (t *Term) Release(ctx context.Context, ns, sem, leaseID string) (*fsm.Result, error) {
	cmd := &fsmpb.Command{Op: &fsmpb.Command_Release{Release: &fsmpb.Release{NamespaceName: ns, SemaphoreName: sem, LeaseId: leaseID}}}
	key := fsm.SemKey{Namespace: ns, Semaphore: sem}
	return t.withHandOff(ctx, cmd, map[fsm.SemKey]int64{key: t.l.fsm.HeldWeight(ns, sem, leaseID)})
}

// Revoke revokes a lease; every semaphore it held hands off in the same
// entry.
func (t *Term) Revoke(ctx context.Context, ns, leaseID string) (*fsm.Result, error) {
	if fsm.IsLockLeaseID(leaseID) {
		return t.revokeLockLease(ctx, ns, leaseID)
	}
	cmd := &fsmpb.Command{Op: &fsmpb.Command_RevokeLease{RevokeLease: &fsmpb.RevokeLease{NamespaceName: ns, LeaseId: leaseID}}}
	frees := map[fsm.SemKey]int64{}
	for _, sem := range t.l.fsm.LeaseHolds(ns, leaseID) {
		frees[fsm.SemKey{Namespace: ns, Semaphore: sem}] = t.l.fsm.HeldWeight(ns, sem, leaseID)
	}
	return t.withHandOff(ctx, cmd, frees)
}

// UpdateSemaphore applies an update; raised permits wake waiters in the
// update's own entry.
func (t *Term) UpdateSemaphore(ctx context.Context, u *fsmpb.UpdateSemaphore) (*fsm.Result, error) {
	cmd := &fsmpb.Command{Op: &fsmpb.Command_UpdateSemaphore{UpdateSemaphore: u}}
	frees := map[fsm.SemKey]int64{}
	if permits, _, ok := t.l.fsm.SemaphoreCapacity(u.NamespaceName, u.Name); ok && u.Permits > permits {
		frees[fsm.SemKey{Namespace: u.NamespaceName, Semaphore: u.Name}] = u.Permits - permits
	}
	return t.withHandOff(ctx, cmd, frees)
}

// AcquireRequest is one AcquireSemaphore call as the leader sees it.
type AcquireRequest struct {
	Namespace, Semaphore, LeaseID string
	Weight                        int64
	Metadata                      map[string]string
	// Timeout is how long the call may wait, from its arrival here; 0 is
	// a non-blocking try.
	Timeout time.Duration
}

// Acquire runs one acquire: its own Acquire command (which may grant it at
// once), then, if it must wait, its place in the semaphore's queue until a
// grant, the timeout, or the caller leaves. index is the Raft index of its
// own Acquire command (0 when none applied).
func (t *Term) Acquire(ctx context.Context, r AcquireRequest) (resp *pb.AcquireSemaphoreResponse, index uint64, err error) {
	// The wait is measured from the call's arrival at the leader.
	key := fsm.SemKey{Namespace: r.Namespace, Semaphore: r.Semaphore}
	w := newWaiter(key, r.LeaseID, r.Weight, r.Metadata, r.Timeout, t.l.clock.Now())
	behind, err := t.q.enqueue(w)
	if err != nil && r.Timeout == 0 && isQueueFull(err) {
		// A try that finds the queue full would be behind its waiters:
		// not granted now, which is UNAVAILABLE, not a refusal.
		resp, err = t.acquireResponse(ctx, r, Outcome{}, true)
		return resp, 0, err
	}
	if err != nil {
		return nil, 0, err
	}
	grant := &fsmpb.Grant{NamespaceName: r.Namespace, SemaphoreName: r.Semaphore, LeaseId: r.LeaseID, Weight: r.Weight, Metadata: r.Metadata}
	if fault.On("early-grant") && !behind {
		if early := t.earlyGrant(w, grant); early != nil {
			return early, 0, nil // broken on purpose (faultinject builds only)
		}
	}
	nonBlocking := r.Timeout == 0
	pctx := ctx
	if behind && !nonBlocking {
		// It queues behind other waiters: its answer comes with a grant,
		// not with its own entry, which may wait a little to ride with
		// the next release's (packerConfig.LazyDelay).
		pctx = waitsAnyway(ctx)
	}
	// The waiter takes its own command's result before any later result
	// reaches a caller: a releaser whose release applied after this acquire
	// finds it waiting, and its next acquire queues behind it (FIFO).
	res, _ := t.proposeThen(pctx, &fsmpb.Command{Op: &fsmpb.Command_Acquire{Acquire: &fsmpb.Acquire{Queued: behind, Grant: grant}}},
		func(res *fsm.Result, err error) { t.q.acquired(w, res, err, nonBlocking) })
	if res != nil {
		index = res.Index
	}
	o := t.await(ctx, w)
	resp, err = t.acquireResponse(ctx, r, o, nonBlocking)
	return resp, index, err
}

func (t *Term) acquireResponse(ctx context.Context, r AcquireRequest, o Outcome, nonBlocking bool) (*pb.AcquireSemaphoreResponse, error) {
	if o.Err != nil {
		return nil, o.Err
	}
	if o.Granted {
		return &pb.AcquireSemaphoreResponse{Semaphore: o.Semaphore, Outcome: pb.AcquireOutcome_ACQUIRE_OUTCOME_ACQUIRED, Holder: o.Holder}, nil
	}
	if err := ctx.Err(); err != nil {
		return nil, fromRaft(err)
	}
	outcome := pb.AcquireOutcome_ACQUIRE_OUTCOME_TIMED_OUT
	if nonBlocking {
		outcome = pb.AcquireOutcome_ACQUIRE_OUTCOME_UNAVAILABLE
	}
	sem := o.Semaphore
	if sem == nil || !nonBlocking {
		// TIMED_OUT reports the semaphore's state now.
		cur, err := t.l.fsm.GetSemaphore(r.Namespace, r.Semaphore, t.l.clock.Now())
		if err != nil {
			return nil, err
		}
		sem = cur
	}
	return &pb.AcquireSemaphoreResponse{Semaphore: sem, Outcome: outcome}, nil
}

// earlyGrant acknowledges an acquire that fits in this node's current view
// before its command commits (the fault "early-grant"; faultinject builds
// only). The command is still proposed, in the background.
func (t *Term) earlyGrant(w *waiter, g *fsmpb.Grant) *pb.AcquireSemaphoreResponse {
	f := t.l.fsm
	permits, holds, ok := f.SemaphoreCapacity(g.NamespaceName, g.SemaphoreName)
	if !ok || holds-f.HeldWeight(g.NamespaceName, g.SemaphoreName, g.LeaseId)+g.Weight > permits {
		return nil
	}
	t.q.drop(w)
	t.goTerm(func() {
		_, _ = t.propose(context.Background(), &fsmpb.Command{Op: &fsmpb.Command_Acquire{Acquire: &fsmpb.Acquire{Grant: g}}})
	})
	sem, _ := f.GetSemaphore(g.NamespaceName, g.SemaphoreName, t.l.clock.Now())
	return &pb.AcquireSemaphoreResponse{Semaphore: sem, Outcome: pb.AcquireOutcome_ACQUIRE_OUTCOME_ACQUIRED,
		Holder: &pb.SemaphoreHolder{LeaseId: g.LeaseId, Weight: g.Weight, FencingToken: f.AppliedIndex() + 1}}
}
