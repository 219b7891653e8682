package rpc_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grackle-coord/grackle/apierr"
	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
)

// The rules of API.md's AcquireLock, each against a real node.

type lockEnv struct {
	t  *testing.T
	c  pb.GrackleServiceClient
	ns string
}

func newLockEnv(t *testing.T) *lockEnv {
	cl := startOne(t)
	c := cl.Client(cl.WaitLeader())
	must(c.CreateNamespace(ctxT(t), &pb.CreateNamespaceRequest{Name: "locks"}))
	return &lockEnv{t: t, c: c, ns: "locks"}
}

func (e *lockEnv) lease(proc string) string {
	e.t.Helper()
	return must(e.c.CreateLockLease(ctxT(e.t), &pb.CreateLockLeaseRequest{NamespaceName: e.ns, ProcessId: proc, TtlSeconds: 60})).Lease.LeaseId
}

func (e *lockEnv) acquire(lease, name string, excl bool, timeout int64) *pb.AcquireLockResponse {
	e.t.Helper()
	return must(e.c.AcquireLock(ctxT(e.t), &pb.AcquireLockRequest{NamespaceName: e.ns, LockName: name, LeaseId: lease, Exclusive: excl, TimeoutSeconds: timeout}))
}

func (e *lockEnv) try(lease, name string, excl bool) bool {
	e.t.Helper()
	return e.acquire(lease, name, excl, 0).Outcome == pb.AcquireOutcome_ACQUIRE_OUTCOME_ACQUIRED
}

func (e *lockEnv) release(lease, name string) bool {
	e.t.Helper()
	return must(e.c.ReleaseLock(ctxT(e.t), &pb.ReleaseLockRequest{NamespaceName: e.ns, LockName: name, LeaseId: lease})).Released
}

// async starts a blocking acquire; its response arrives on the channel.
func (e *lockEnv) async(lease, name string, excl bool, timeout int64) <-chan *pb.AcquireLockResponse {
	out := make(chan *pb.AcquireLockResponse, 1)
	go func() {
		r, err := e.c.AcquireLock(context.Background(), &pb.AcquireLockRequest{NamespaceName: e.ns, LockName: name, LeaseId: lease, Exclusive: excl, TimeoutSeconds: timeout})
		if err != nil {
			r = &pb.AcquireLockResponse{Reason: -1}
		}
		out <- r
	}()
	return out
}

// waiters waits until name has n waiters (the queue is leader memory: the
// only way to know a call waits).
func (e *lockEnv) waiters(name string, n int) []*pb.LockWaiter {
	e.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		r := must(e.c.ListLockWaiters(ctxT(e.t), &pb.ListLockWaitersRequest{NamespaceName: e.ns, LockName: name}))
		if len(r.Waiters) == n {
			return r.Waiters
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("lock %s: want %d waiters, have %d", name, n, len(r.Waiters))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func granted(t *testing.T, ch <-chan *pb.AcquireLockResponse) *pb.AcquireLockResponse {
	t.Helper()
	select {
	case r := <-ch:
		if r.Outcome != pb.AcquireOutcome_ACQUIRE_OUTCOME_ACQUIRED {
			t.Fatalf("want ACQUIRED, got %v (reason %v)", r.Outcome, r.Reason)
		}
		return r
	case <-time.After(20 * time.Second):
		t.Fatal("no grant")
	}
	return nil
}

func pending(t *testing.T, ch <-chan *pb.AcquireLockResponse) {
	t.Helper()
	select {
	case r := <-ch:
		t.Fatalf("granted or ended too early: %v", r)
	default:
	}
}

func TestLockConflictRelation(t *testing.T) {
	e := newLockEnv(t)
	a, b := e.lease("a"), e.lease("b")
	if !e.try(a, "orders", false) || !e.try(b, "orders", false) {
		t.Fatal("two shared holds of one lock must coexist")
	}
	r := e.acquire(b, "orders/eu", true, 0)
	if r.Outcome != pb.AcquireOutcome_ACQUIRE_OUTCOME_UNAVAILABLE || r.Reason != pb.ContentionReason_CONTENTION_REASON_ANCESTOR ||
		len(r.BlockingLocks) != 1 || r.BlockingLocks[0] != "orders" {
		t.Fatalf("exclusive below a shared holder of another lease: %v", r)
	}
	e.release(b, "orders")
	// Same lease: its holds never conflict with each other.
	if !e.try(a, "orders/eu", true) || !e.try(a, "orders/eu/42", true) {
		t.Fatal("holds of one lease conflicted")
	}
	r = e.acquire(b, "orders", false, 0)
	if r.Reason != pb.ContentionReason_CONTENTION_REASON_DESCENDANT || len(r.BlockingLocks) != 2 {
		t.Fatalf("shared above exclusive descendants: %v", r)
	}
	r = e.acquire(b, "orders/eu", false, 0)
	if r.Reason != pb.ContentionReason_CONTENTION_REASON_PEER {
		t.Fatalf("shared on an exclusively held lock: %v", r)
	}
	// Not an ancestor: "orders" does not cover "ordersX", nor "orders-eu".
	if !e.try(b, "ordersX", true) || !e.try(b, "orders-eu", true) {
		t.Fatal("a name with the same prefix but not below conflicted")
	}
	got := must(e.c.GetLock(ctxT(t), &pb.GetLockRequest{NamespaceName: e.ns, LockName: "orders/eu"})).Lock
	if got.State != pb.LockState_LOCK_STATE_EXCLUSIVE_LOCKED || len(got.Holders) != 1 || got.Holders[0].ProcessId != "a" {
		t.Fatalf("GetLock: %v", got)
	}
	if u := must(e.c.GetLock(ctxT(t), &pb.GetLockRequest{NamespaceName: e.ns, LockName: "nobody/holds"})).Lock; u.State != pb.LockState_LOCK_STATE_UNLOCKED {
		t.Fatalf("unheld lock: %v", u)
	}
	list := must(e.c.ListLocks(ctxT(t), &pb.ListLocksRequest{NamespaceName: e.ns, Prefix: "orders"})).Locks
	var names []string
	for _, l := range list {
		names = append(names, l.Name)
	}
	if len(names) != 3 || names[0] != "orders" || names[1] != "orders/eu" || names[2] != "orders/eu/42" {
		t.Fatalf("ListLocks prefix orders: %v", names)
	}
}

func TestLockFencingAndReacquire(t *testing.T) {
	e := newLockEnv(t)
	a, b := e.lease("a"), e.lease("b")
	r1 := e.acquire(a, "x", true, 0)
	r2 := e.acquire(a, "x", true, 0) // re-acquire: new token, same locked_at
	if r2.Holder.FencingToken <= r1.Holder.FencingToken || r2.Holder.LockedAt != r1.Holder.LockedAt {
		t.Fatalf("re-acquire: %v then %v", r1.Holder, r2.Holder)
	}
	e.release(a, "x")
	r3 := e.acquire(b, "x", false, 0)
	if r3.Holder.FencingToken <= r2.Holder.FencingToken {
		t.Fatal("fencing token did not increase on a shared grant")
	}
	if e.release(a, "x") {
		t.Fatal("released a lock the lease does not hold")
	}
}

func TestLockFIFOAndNoWriterStarvation(t *testing.T) {
	e := newLockEnv(t)
	r1, w, r2 := e.lease("r1"), e.lease("w"), e.lease("r2")
	if !e.try(r1, "doc", false) {
		t.Fatal("first reader")
	}
	wch := e.async(w, "doc", true, 30)
	e.waiters("doc", 1)
	// A reader behind a waiting writer waits (no writer starvation), and
	// so does a request on a descendant (it would overtake the writer).
	r := e.acquire(r2, "doc", false, 0)
	if r.Outcome != pb.AcquireOutcome_ACQUIRE_OUTCOME_UNAVAILABLE || r.Reason != pb.ContentionReason_CONTENTION_REASON_QUEUE {
		t.Fatalf("reader behind a waiting writer: %v", r)
	}
	if r := e.acquire(r2, "doc/page", false, 0); r.Reason != pb.ContentionReason_CONTENTION_REASON_QUEUE {
		t.Fatalf("descendant behind a waiting writer on its ancestor: %v", r)
	}
	// Unrelated requests never wait for each other.
	if !e.try(r2, "other", true) {
		t.Fatal("an unrelated lock waited")
	}
	rch := e.async(r2, "doc", false, 30)
	e.waiters("doc", 2)
	e.release(r1, "doc")
	granted(t, wch)
	pending(t, rch)
	e.release(w, "doc")
	granted(t, rch)
}

func TestLockSharedHeadGrantedTogether(t *testing.T) {
	e := newLockEnv(t)
	w, a, b := e.lease("w"), e.lease("a"), e.lease("b")
	e.try(w, "k", true)
	ach, bch := e.async(a, "k", false, 30), e.async(b, "k", false, 30)
	e.waiters("k", 2)
	e.release(w, "k")
	ra, rb := granted(t, ach), granted(t, bch)
	// Granted in the release's commit: one entry, consecutive tokens.
	if d := int64(rb.Holder.FencingToken) - int64(ra.Holder.FencingToken); d != 1 && d != -1 {
		t.Fatalf("shared heads granted in different entries: tokens %d and %d", ra.Holder.FencingToken, rb.Holder.FencingToken)
	}
}

func TestLockDowngradeWakesReaders(t *testing.T) {
	e := newLockEnv(t)
	w, a := e.lease("w"), e.lease("a")
	first := e.acquire(w, "cfg", true, 0)
	ach := e.async(a, "cfg", false, 30)
	e.waiters("cfg", 1)
	down := e.acquire(w, "cfg", false, 0)
	if down.Outcome != pb.AcquireOutcome_ACQUIRE_OUTCOME_ACQUIRED || down.Holder.Exclusive || down.Holder.LockedAt != first.Holder.LockedAt {
		t.Fatalf("downgrade: %v", down)
	}
	ra := granted(t, ach)
	if ra.Holder.FencingToken != down.Holder.FencingToken+1 {
		t.Fatalf("the reader was not granted in the downgrade's commit: %d after %d", ra.Holder.FencingToken, down.Holder.FencingToken)
	}
}

func TestLockUpgrade(t *testing.T) {
	e := newLockEnv(t)
	a, b, c := e.lease("a"), e.lease("b"), e.lease("c")
	e.try(a, "u", false)
	e.try(b, "u", false)
	// c waits for exclusive first; a's upgrade still goes to the head.
	cch := e.async(c, "u", true, 30)
	e.waiters("u", 1)
	ach := e.async(a, "u", true, 30)
	ws := e.waiters("u", 2)
	if !ws[0].Upgrade || ws[0].LeaseId != a {
		t.Fatalf("the upgrade is not at the head: %v", ws)
	}
	// A second upgrade on the same lock is refused at once.
	_, err := e.c.AcquireLock(ctxT(t), &pb.AcquireLockRequest{NamespaceName: e.ns, LockName: "u", LeaseId: b, Exclusive: true, TimeoutSeconds: 5})
	if status.Code(err) != codes.FailedPrecondition || apierr.ReasonOf(err) != "UPGRADE_CONFLICT" {
		t.Fatalf("second upgrade: %v", err)
	}
	e.release(b, "u")
	r := granted(t, ach)
	if !r.Holder.Exclusive {
		t.Fatal("upgrade granted shared")
	}
	pending(t, cch)
	e.release(a, "u")
	granted(t, cch)
}

func TestLockUpgradeTimeoutKeepsSharedHold(t *testing.T) {
	e := newLockEnv(t)
	a, b := e.lease("a"), e.lease("b")
	e.try(a, "v", false)
	e.try(b, "v", false)
	if r := e.acquire(a, "v", true, 1); r.Outcome != pb.AcquireOutcome_ACQUIRE_OUTCOME_TIMED_OUT {
		t.Fatalf("upgrade with a peer holding: %v", r)
	}
	l := must(e.c.GetLock(ctxT(t), &pb.GetLockRequest{NamespaceName: e.ns, LockName: "v"})).Lock
	if l.State != pb.LockState_LOCK_STATE_SHARED_LOCKED || len(l.Holders) != 2 {
		t.Fatalf("after a failed upgrade: %v", l)
	}
}

func TestLockLeaseEndsReleaseAndWaiters(t *testing.T) {
	e := newLockEnv(t)
	a, b := e.lease("a"), e.lease("b")
	e.try(a, "r", true)
	bch := e.async(b, "r", true, 30)
	e.waiters("r", 1)
	must(e.c.RevokeLockLease(ctxT(t), &pb.RevokeLockLeaseRequest{NamespaceName: e.ns, LeaseId: a}))
	granted(t, bch)
	// A waiter whose lease is revoked ends NotFound.
	c := e.lease("c")
	out := make(chan error, 1)
	go func() {
		_, err := e.c.AcquireLock(context.Background(), &pb.AcquireLockRequest{NamespaceName: e.ns, LockName: "r", LeaseId: c, Exclusive: true, TimeoutSeconds: 30})
		out <- err
	}()
	e.waiters("r", 1)
	must(e.c.RevokeLockLease(ctxT(t), &pb.RevokeLockLeaseRequest{NamespaceName: e.ns, LeaseId: c}))
	if err := <-out; status.Code(err) != codes.NotFound {
		t.Fatalf("waiter of a revoked lease: %v", err)
	}
	// DeleteLock drops the holder (its lease lives on) and grants waiters.
	d := e.lease("d")
	dch := e.async(d, "r", false, 30)
	e.waiters("r", 1)
	if !must(e.c.DeleteLock(ctxT(t), &pb.DeleteLockRequest{NamespaceName: e.ns, LockName: "r"})).Existed {
		t.Fatal("DeleteLock of a held lock: existed false")
	}
	granted(t, dch)
	must(e.c.GetLockLease(ctxT(t), &pb.GetLockLeaseRequest{NamespaceName: e.ns, LeaseId: b}))
}

func TestLockLeaseKindsAndBadInput(t *testing.T) {
	e := newLockEnv(t)
	ctx := ctxT(t)
	sl := must(e.c.CreateSemaphoreLease(ctx, &pb.CreateSemaphoreLeaseRequest{NamespaceName: e.ns, ProcessId: "p", TtlSeconds: 60})).Lease.LeaseId
	ll := e.lease("p")
	_, err := e.c.AcquireLock(ctx, &pb.AcquireLockRequest{NamespaceName: e.ns, LockName: "a", LeaseId: sl, Exclusive: true})
	if status.Code(err) != codes.NotFound || apierr.ReasonOf(err) != apierr.LeaseNotFound {
		t.Fatalf("semaphore lease on a lock call: %v", err)
	}
	must(e.c.CreateSemaphore(ctx, &pb.CreateSemaphoreRequest{NamespaceName: e.ns, SemaphoreName: "s", Permits: 1}))
	_, err = e.c.AcquireSemaphore(ctx, &pb.AcquireSemaphoreRequest{NamespaceName: e.ns, SemaphoreName: "s", LeaseId: ll, Weight: 1})
	if status.Code(err) != codes.NotFound {
		t.Fatalf("lock lease on a semaphore call: %v", err)
	}
	if _, err := e.c.GetSemaphoreLease(ctx, &pb.GetSemaphoreLeaseRequest{NamespaceName: e.ns, LeaseId: ll}); status.Code(err) != codes.NotFound {
		t.Fatalf("GetSemaphoreLease of a lock lease: %v", err)
	}
	if ls := must(e.c.ListSemaphoreLeases(ctx, &pb.ListSemaphoreLeasesRequest{NamespaceName: e.ns})).Leases; len(ls) != 1 || ls[0].LeaseId != sl {
		t.Fatalf("ListSemaphoreLeases lists a lock lease: %v", ls)
	}
	if ls := must(e.c.ListLockLeases(ctx, &pb.ListLockLeasesRequest{NamespaceName: e.ns})).Leases; len(ls) != 1 || ls[0].LeaseId != ll {
		t.Fatalf("ListLockLeases: %v", ls)
	}
	for _, name := range []string{"a//b", "/a", "a/", "", "a b", string(make([]byte, 257))} {
		_, err := e.c.AcquireLock(ctx, &pb.AcquireLockRequest{NamespaceName: e.ns, LockName: name, LeaseId: ll, Exclusive: true})
		wantCode(t, err, codes.InvalidArgument)
	}
	_, err = e.c.AcquireLock(ctx, &pb.AcquireLockRequest{NamespaceName: e.ns, LockName: "a", LeaseId: ll, TimeoutSeconds: 301})
	wantCode(t, err, codes.InvalidArgument)
	_, err = e.c.AcquireLock(ctx, &pb.AcquireLockRequest{NamespaceName: e.ns, LockName: "a", LeaseId: ll, TimeoutSeconds: -1})
	wantCode(t, err, codes.InvalidArgument)
	if l := must(e.c.ListLocks(ctx, &pb.ListLocksRequest{NamespaceName: e.ns})).Locks; len(l) != 0 {
		t.Fatalf("bad input changed something: %v", l)
	}
}

func TestLockWaitersEndOnNamespaceDelete(t *testing.T) {
	e := newLockEnv(t)
	a, b := e.lease("a"), e.lease("b")
	e.try(a, "n", true)
	out := make(chan error, 1)
	go func() {
		_, err := e.c.AcquireLock(context.Background(), &pb.AcquireLockRequest{NamespaceName: e.ns, LockName: "n/x", LeaseId: b, Exclusive: true, TimeoutSeconds: 30})
		out <- err
	}()
	e.waiters("n/x", 1)
	must(e.c.DeleteNamespace(ctxT(t), &pb.DeleteNamespaceRequest{NamespaceName: e.ns}))
	if err := <-out; status.Code(err) != codes.NotFound {
		t.Fatalf("waiter in a deleted namespace: %v", err)
	}
}

// A request covered by a hold of the same lease (the lock or an ancestor,
// in a mode at least as strong) waits for no one: the covering hold
// already blocks everyone the new hold would. Without this a holder of
// "orders" asking for "orders/eu/43" would wait behind a waiter on
// "orders/eu" that itself waits for the holder.
func TestLockCoveredRequestNeverWaits(t *testing.T) {
	e := newLockEnv(t)
	a, b := e.lease("a"), e.lease("b")
	e.try(a, "orders", true)
	bch := e.async(b, "orders/eu", true, 30)
	e.waiters("orders/eu", 1)
	if !e.try(a, "orders/eu/43", true) {
		t.Fatal("a request covered by the lease's exclusive ancestor waited behind a waiter blocked by that ancestor")
	}
	pending(t, bch)
	e.release(a, "orders/eu/43")
	e.release(a, "orders")
	granted(t, bch)
}

// Two upgrades on related locks would each wait for the other's shared
// hold: the second is refused at once.
func TestLockRelatedUpgradesConflict(t *testing.T) {
	e := newLockEnv(t)
	a, b := e.lease("a"), e.lease("b")
	e.try(a, "t", false)
	e.try(b, "t/x", false)
	ach := e.async(a, "t", true, 30)
	e.waiters("t", 1)
	_, err := e.c.AcquireLock(ctxT(t), &pb.AcquireLockRequest{NamespaceName: e.ns, LockName: "t/x", LeaseId: b, Exclusive: true, TimeoutSeconds: 5})
	if status.Code(err) != codes.FailedPrecondition || apierr.ReasonOf(err) != "UPGRADE_CONFLICT" {
		t.Fatalf("upgrade below a waiting upgrade: %v", err)
	}
	e.release(b, "t/x")
	granted(t, ach)
}
