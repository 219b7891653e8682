package client_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grackle-coord/grackle/client"
	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
	"github.com/grackle-coord/grackle/server/servertest"
)

// lockNS creates namespace ns (if missing).
func lockNS(t *testing.T, cli *client.Client, ns string) {
	t.Helper()
	if _, err := cli.CreateNamespace(ctxT(t), &pb.CreateNamespaceRequest{Name: ns}); err != nil && status.Code(err) != codes.AlreadyExists {
		t.Fatal(err)
	}
}

func newLockSession(t *testing.T, cli *client.Client, ns, pid string, ttl time.Duration) *client.LockSession {
	t.Helper()
	s, err := cli.NewLockSession(ctxT(t), ns, pid, ttl)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s.Close(ctx)
	})
	return s
}

func getLock(t *testing.T, cli *client.Client, ns, name string) *pb.Lock {
	t.Helper()
	r, err := cli.GetLock(ctxT(t), &pb.GetLockRequest{NamespaceName: ns, LockName: name})
	if err != nil {
		t.Fatal(err)
	}
	return r.Lock
}

// waitLockQueue waits until lock name has n waiters on the leader.
func waitLockQueue(t *testing.T, cli *client.Client, ns, name string, n int) {
	t.Helper()
	servertest.Eventually(t, "waiters queued on the lock", 30*time.Second, func() bool {
		r, err := cli.ListLockWaiters(ctxT(t), &pb.ListLockWaitersRequest{NamespaceName: ns, LockName: name})
		return err == nil && len(r.Waiters) == n
	})
}

// An exclusive hold of "a" blocks an exclusive request for "a/b": a try
// says an ancestor is in the way, a blocking acquire waits in the queue
// and is granted, with a larger fencing token, when "a" is released.
func TestLockExclusiveBlocksExclusive(t *testing.T) {
	c := servertest.Start(t, 1, nil)
	cli := newClient(t, addrs(c)...)
	lockNS(t, cli, "lx")
	ctx := ctxT(t)
	a := newLockSession(t, cli, "lx", "holder", 30*time.Second)
	b := newLockSession(t, cli, "lx", "waiter", 30*time.Second)

	ga, err := a.Lock("a").Acquire(ctx, client.Exclusive)
	if err != nil {
		t.Fatal(err)
	}
	if ga.Mode != client.Exclusive || ga.FencingToken == 0 || ga.LeaseID != a.LeaseID() || ga.State.GetState() != pb.LockState_LOCK_STATE_EXCLUSIVE_LOCKED {
		t.Fatalf("grant %+v", ga)
	}
	_, err = b.Lock("a/b").TryAcquire(ctx, client.Exclusive)
	var le *client.LockAcquireError
	if !errors.Is(err, client.ErrWouldBlock) || !errors.As(err, &le) || le.Reason != pb.ContentionReason_CONTENTION_REASON_ANCESTOR ||
		len(le.BlockingLocks) != 1 || le.BlockingLocks[0] != "a" {
		t.Fatalf("TryAcquire under an exclusive ancestor: %v", err)
	}

	got := make(chan *client.LockGrant, 1)
	errc := make(chan error, 1)
	go func() {
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		g, err := b.Lock("a/b").Acquire(wctx, client.Exclusive)
		got <- g
		errc <- err
	}()
	waitLockQueue(t, cli, "lx", "a/b", 1)
	if l := getLock(t, cli, "lx", "a/b"); l.State != pb.LockState_LOCK_STATE_UNLOCKED {
		t.Fatalf("a/b granted while a was held: %v", l)
	}
	if err := a.Lock("a").Release(ctx); err != nil {
		t.Fatal(err)
	}
	gb := recvWithin(t, got, 10*time.Second, "the waiting acquire's grant")
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if gb.FencingToken <= ga.FencingToken || gb.LeaseID != b.LeaseID() {
		t.Fatalf("second grant %+v after first token %d", gb, ga.FencingToken)
	}
	l := getLock(t, cli, "lx", "a/b")
	if l.State != pb.LockState_LOCK_STATE_EXCLUSIVE_LOCKED || len(l.Holders) != 1 || l.Holders[0].LeaseId != b.LeaseID() {
		t.Fatalf("a/b after the hand-over: %v", l)
	}
}

// Shared holds of two leases coexist; an exclusive request of a third is
// refused (a holder of the same lock) and times out at its deadline.
func TestLockSharedShared(t *testing.T) {
	c := servertest.Start(t, 1, nil)
	cli := newClient(t, addrs(c)...)
	lockNS(t, cli, "ls")
	ctx := ctxT(t)
	r1 := newLockSession(t, cli, "ls", "reader-1", 30*time.Second)
	r2 := newLockSession(t, cli, "ls", "reader-2", 30*time.Second)
	w := newLockSession(t, cli, "ls", "writer", 30*time.Second)

	g1, err := r1.Lock("reports").Acquire(ctx, client.Shared)
	if err != nil {
		t.Fatal(err)
	}
	g2, err := r2.Lock("reports").TryAcquire(ctx, client.Shared, client.WithMetadata(map[string]string{"who": "r2"}))
	if err != nil {
		t.Fatal(err)
	}
	if g1.Mode != client.Shared || g2.Mode != client.Shared || g2.FencingToken <= g1.FencingToken {
		t.Fatalf("grants %+v %+v", g1, g2)
	}
	l := getLock(t, cli, "ls", "reports")
	if l.State != pb.LockState_LOCK_STATE_SHARED_LOCKED || len(l.Holders) != 2 || l.Holders[1].Metadata["who"] != "r2" {
		t.Fatalf("lock %v", l)
	}
	var le *client.LockAcquireError
	if _, err := w.Lock("reports").TryAcquire(ctx, client.Exclusive); !errors.As(err, &le) ||
		le.Reason != pb.ContentionReason_CONTENTION_REASON_PEER || !errors.Is(err, client.ErrWouldBlock) {
		t.Fatalf("exclusive TryAcquire over shared holders: %v", err)
	}
	dctx, cancel := context.WithTimeout(ctx, 1500*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := w.Lock("reports").Acquire(dctx, client.Exclusive); !errors.Is(err, client.ErrTimeout) || !errors.As(err, &le) ||
		le.Reason != pb.ContentionReason_CONTENTION_REASON_PEER {
		t.Fatalf("exclusive Acquire over shared holders: %v", err)
	}
	// Promptly: the deadline, plus at most the 2 s bound of the release
	// that follows a call the deadline cut short, plus slack for a loaded
	// machine.
	if el := time.Since(start); el > 10*time.Second {
		t.Fatalf("a 1.5 s deadline returned after %v", el)
	}
	if l := getLock(t, cli, "ls", "reports"); len(l.Holders) != 2 {
		t.Fatalf("holders after the timed-out writer: %v", l.Holders)
	}
}

// WithLock releases the lock when fn panics; the panic goes on.
func TestWithLockReleasesOnPanicE2E(t *testing.T) {
	c := servertest.Start(t, 1, nil)
	cli := newClient(t, addrs(c)...)
	lockNS(t, cli, "lp")
	ls := newLockSession(t, cli, "lp", "p", 30*time.Second)
	lk := ls.Lock("jobs/nightly")
	var token uint64
	func() {
		defer func() {
			if p := recover(); p != "boom" {
				t.Fatalf("recovered %v, want the panic to go on", p)
			}
		}()
		_ = client.WithLock(ctxT(t), lk, client.Exclusive, func(ctx context.Context, g *client.LockGrant) error {
			token = g.FencingToken
			if l := getLock(t, cli, "lp", "jobs/nightly"); l.State != pb.LockState_LOCK_STATE_EXCLUSIVE_LOCKED {
				t.Errorf("inside WithLock: %v", l)
			}
			panic("boom")
		})
	}()
	if token == 0 {
		t.Fatal("fn did not run")
	}
	if l := getLock(t, cli, "lp", "jobs/nightly"); l.State != pb.LockState_LOCK_STATE_UNLOCKED || len(l.Holders) != 0 {
		t.Fatalf("after the panic: %v", l)
	}
	// Another lease gets it at once.
	other := newLockSession(t, cli, "lp", "other", 30*time.Second)
	if g, err := other.Lock("jobs/nightly").TryAcquire(ctxT(t), client.Exclusive); err != nil || g.FencingToken <= token {
		t.Fatalf("after the panic, another lease: %v %v", g, err)
	}
}

// A waiting acquire survives a leader change: the old leader ends it with
// Unavailable, the client asks the new leader, and the release there
// grants it.
func TestLockAcquireResumesAcrossLeaderChange(t *testing.T) {
	c := servertest.Start(t, 3, nil)
	cli := newClient(t, addrs(c)...)
	lockNS(t, cli, "lr")
	ctx := ctxT(t)
	a := newLockSession(t, cli, "lr", "holder", 30*time.Second)
	b := newLockSession(t, cli, "lr", "waiter", 30*time.Second)
	if _, err := a.Lock("x").Acquire(ctx, client.Exclusive); err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() {
		wctx, cancel := context.WithTimeout(ctx, 45*time.Second)
		defer cancel()
		_, err := b.Lock("x").Acquire(wctx, client.Shared)
		errc <- err
	}()
	waitLockQueue(t, cli, "lr", "x", 1)
	old := c.Leader()
	if _, err := c.TransferLeadership(ctx, old, ""); err != nil {
		t.Fatal(err)
	}
	// The waiter is queued again, on the new leader.
	servertest.Eventually(t, "a new leader", 20*time.Second, func() bool { l := c.Leader(); return l >= 0 && l != old })
	waitLockQueue(t, cli, "lr", "x", 1)
	if err := a.Lock("x").Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := recvWithin(t, errc, 20*time.Second, "the resumed acquire"); err != nil {
		t.Fatalf("acquire across the leader change: %v", err)
	}
	l := getLock(t, cli, "lr", "x")
	if l.State != pb.LockState_LOCK_STATE_SHARED_LOCKED || len(l.Holders) != 1 || l.Holders[0].LeaseId != b.LeaseID() {
		t.Fatalf("lock after the hand-over: %v", l)
	}
}

// Revoking a lock lease behind its session's back ends the session as
// lost; the lock is free again.
func TestLockSessionLost(t *testing.T) {
	c := servertest.Start(t, 1, nil)
	cli := newClient(t, addrs(c)...)
	lockNS(t, cli, "ll")
	ls := newLockSession(t, cli, "ll", "p", 2*time.Second)
	if !strings.HasPrefix(ls.LeaseID(), "ll_") {
		t.Fatalf("lease id %q", ls.LeaseID())
	}
	if _, err := ls.Lock("k").Acquire(ctxT(t), client.Exclusive); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.RevokeLockLease(ctxT(t), &pb.RevokeLockLeaseRequest{NamespaceName: "ll", LeaseId: ls.LeaseID()}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ls.Done():
	case <-time.After(20 * time.Second):
		t.Fatal("the session did not notice its lease was revoked")
	}
	if !errors.Is(ls.Err(), client.ErrLeaseLost) {
		t.Fatalf("Err %v", ls.Err())
	}
	if l := getLock(t, cli, "ll", "k"); l.State != pb.LockState_LOCK_STATE_UNLOCKED {
		t.Fatalf("lock after the revoke: %v", l)
	}
	if _, err := ls.Lock("k").Acquire(ctxT(t), client.Exclusive); !errors.Is(err, client.ErrLeaseLost) {
		t.Fatalf("acquire on a lost session: %v", err)
	}
}

// Upgrade and downgrade: a shared holder's upgrade waits until it is the
// only holder; a second holder's upgrade meanwhile is ErrUpgradeConflict
// (its shared hold stays); once that holder releases, the first upgrade
// is granted; a downgrade is granted at once. A watch of the lock sees the
// upgrade waiting at the head of the queue, then the exclusive hold.
func TestLockUpgradeDowngrade(t *testing.T) {
	c := servertest.Start(t, 1, nil)
	cli := newClient(t, addrs(c)...)
	lockNS(t, cli, "lu")
	ctx := ctxT(t)
	a := newLockSession(t, cli, "lu", "a", 30*time.Second)
	b := newLockSession(t, cli, "lu", "b", 30*time.Second)
	for _, s := range []*client.LockSession{a, b} {
		if _, err := s.Lock("u").Acquire(ctx, client.Shared); err != nil {
			t.Fatal(err)
		}
	}
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	watch := a.Lock("u").Watch(wctx)
	if u := recvWithin(t, watch, 10*time.Second, "the first watched state"); u.Err != nil || !u.State.GetInitial() ||
		u.State.GetLock().GetState() != pb.LockState_LOCK_STATE_SHARED_LOCKED {
		t.Fatalf("first state %+v", u)
	}

	got := make(chan *client.LockGrant, 1)
	errc := make(chan error, 1)
	go func() {
		g, err := a.Lock("u").Acquire(ctx, client.Exclusive)
		got <- g
		errc <- err
	}()
	// The watch shows the upgrade waiting at the head of the queue (the
	// state lasts until b releases, so the latest state shows it).
	for u := range watch {
		if u.Err != nil {
			t.Fatalf("watch ended: %v", u.Err)
		}
		ws := u.State.GetWaiters()
		if len(ws) == 1 && ws[0].GetUpgrade() && ws[0].GetExclusive() && ws[0].GetLeaseId() == a.LeaseID() && ws[0].GetPosition() == 1 {
			break
		}
	}
	_, err := b.Lock("u").Acquire(ctx, client.Exclusive)
	if !errors.Is(err, client.ErrUpgradeConflict) || status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("second upgrade: %v", err)
	}
	if l := getLock(t, cli, "lu", "u"); l.State != pb.LockState_LOCK_STATE_SHARED_LOCKED || len(l.Holders) != 2 {
		t.Fatalf("after the refused upgrade: %v", l)
	}
	if err := b.Lock("u").Release(ctx); err != nil {
		t.Fatal(err)
	}
	g := recvWithin(t, got, 10*time.Second, "the upgrade's grant")
	if err := <-errc; err != nil || g.Mode != client.Exclusive {
		t.Fatalf("upgrade: %+v %v", g, err)
	}
	for u := range watch {
		if u.Err != nil {
			t.Fatalf("watch ended: %v", u.Err)
		}
		if l := u.State.GetLock(); l.GetState() == pb.LockState_LOCK_STATE_EXCLUSIVE_LOCKED {
			if len(l.GetHolders()) != 1 || l.GetHolders()[0].GetFencingToken() != g.FencingToken || u.State.GetWaitersCount() != 0 {
				t.Fatalf("watched exclusive state %v", u.State)
			}
			break
		}
	}

	d, err := a.Lock("u").Acquire(ctx, client.Shared)
	if err != nil || d.Mode != client.Shared || d.FencingToken <= g.FencingToken {
		t.Fatalf("downgrade: %+v %v", d, err)
	}
	if l := getLock(t, cli, "lu", "u"); l.State != pb.LockState_LOCK_STATE_SHARED_LOCKED || len(l.Holders) != 1 {
		t.Fatalf("after the downgrade: %v", l)
	}
}
