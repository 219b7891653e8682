package client

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/grackle-coord/grackle/apierr"
	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
)

// lockFake is a scripted lock service: lock leases that exist until
// revoked, and AcquireLock answered by acquire (call is 1-based).
type lockFake struct {
	fakeNode
	acquire   func(ctx context.Context, call int, r *pb.AcquireLockRequest) (*pb.AcquireLockResponse, error)
	watchLock func(st grpc.ServerStreamingServer[pb.WatchLockResponse]) error

	mu       sync.Mutex
	leases   map[string]*pb.LockLease
	requests []proto.Message // every lock and lock-lease request, in order
	acquires int
}

func (f *lockFake) note(r proto.Message) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.requests = append(f.requests, proto.Clone(r))
}

// sent returns the requests of type T, in order.
func sent[T proto.Message](f *lockFake) []T {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []T
	for _, r := range f.requests {
		if v, ok := r.(T); ok {
			out = append(out, v)
		}
	}
	return out
}

func (f *lockFake) CreateLockLease(_ context.Context, r *pb.CreateLockLeaseRequest) (*pb.CreateLockLeaseResponse, error) {
	f.note(r)
	f.mu.Lock()
	defer f.mu.Unlock()
	l := &pb.LockLease{LeaseId: fmt.Sprintf("ll_fake%020d", len(f.leases)+1), ProcessId: r.ProcessId, TtlSeconds: r.TtlSeconds, Metadata: r.Metadata}
	f.leases[l.LeaseId] = l
	return &pb.CreateLockLeaseResponse{Lease: l}, nil
}

func (f *lockFake) lease(id string) (*pb.LockLease, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	l, ok := f.leases[id]
	if !ok {
		return nil, apierr.New(codes.NotFound, apierr.LeaseNotFound, "n1", apierr.Leader{}, "lock lease "+id+" not found")
	}
	return l, nil
}

func (f *lockFake) GetLockLease(_ context.Context, r *pb.GetLockLeaseRequest) (*pb.GetLockLeaseResponse, error) {
	f.note(r)
	l, err := f.lease(r.LeaseId)
	if err != nil {
		return nil, err
	}
	return &pb.GetLockLeaseResponse{Lease: l}, nil
}

func (f *lockFake) RefreshLockLease(_ context.Context, r *pb.RefreshLockLeaseRequest) (*pb.RefreshLockLeaseResponse, error) {
	f.note(r)
	l, err := f.lease(r.LeaseId)
	if err != nil {
		return nil, err
	}
	return &pb.RefreshLockLeaseResponse{Lease: l}, nil
}

func (f *lockFake) RevokeLockLease(_ context.Context, r *pb.RevokeLockLeaseRequest) (*pb.RevokeLockLeaseResponse, error) {
	f.note(r)
	if _, err := f.lease(r.LeaseId); err != nil {
		return nil, err
	}
	f.mu.Lock()
	delete(f.leases, r.LeaseId)
	f.mu.Unlock()
	return &pb.RevokeLockLeaseResponse{}, nil
}

func (f *lockFake) AcquireLock(ctx context.Context, r *pb.AcquireLockRequest) (*pb.AcquireLockResponse, error) {
	f.note(r)
	if _, err := f.lease(r.LeaseId); err != nil {
		return nil, err
	}
	f.mu.Lock()
	f.acquires++
	n := f.acquires
	f.mu.Unlock()
	return f.acquire(ctx, n, r)
}

func (f *lockFake) WatchLock(_ *pb.WatchLockRequest, st grpc.ServerStreamingServer[pb.WatchLockResponse]) error {
	return f.watchLock(st)
}

func (f *lockFake) ReleaseLock(_ context.Context, r *pb.ReleaseLockRequest) (*pb.ReleaseLockResponse, error) {
	f.note(r)
	return &pb.ReleaseLockResponse{Lock: &pb.Lock{Name: r.LockName, State: pb.LockState_LOCK_STATE_UNLOCKED}, Released: true}, nil
}

// granted is an ACQUIRED answer to r with fencing token tok.
func granted(r *pb.AcquireLockRequest, tok uint64) *pb.AcquireLockResponse {
	state := pb.LockState_LOCK_STATE_SHARED_LOCKED
	if r.Exclusive {
		state = pb.LockState_LOCK_STATE_EXCLUSIVE_LOCKED
	}
	h := &pb.LockHolder{LeaseId: r.LeaseId, ProcessId: "p", Exclusive: r.Exclusive, LockedAt: 1e18, ExpiresAt: 1e18 + 3e10, FencingToken: tok, Metadata: r.Metadata}
	return &pb.AcquireLockResponse{Outcome: pb.AcquireOutcome_ACQUIRE_OUTCOME_ACQUIRED, Holder: h,
		Lock: &pb.Lock{Name: r.LockName, State: state, LockedAt: 1e18, Holders: []*pb.LockHolder{h}}}
}

// blocked is a not-acquired answer: outcome o, held exclusively by an
// ancestor.
func blocked(r *pb.AcquireLockRequest, o pb.AcquireOutcome) *pb.AcquireLockResponse {
	return &pb.AcquireLockResponse{Outcome: o, Lock: &pb.Lock{Name: r.LockName, State: pb.LockState_LOCK_STATE_UNLOCKED},
		Reason: pb.ContentionReason_CONTENTION_REASON_ANCESTOR, BlockingLocks: []string{"orders"}}
}

func startLockFake(t *testing.T, acquire func(context.Context, int, *pb.AcquireLockRequest) (*pb.AcquireLockResponse, error)) (*lockFake, *Client) {
	t.Helper()
	f := &lockFake{acquire: acquire, leases: map[string]*pb.LockLease{}}
	c, err := New(testCtx(t), fastConfig(startLockServer(t, f)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return f, c
}

// startLockServer serves f (all of GrackleService and ClusterService) and
// returns its address.
func startLockServer(t *testing.T, f *lockFake) string {
	t.Helper()
	s := grpc.NewServer()
	pb.RegisterGrackleServiceServer(s, f)
	pb.RegisterClusterServiceServer(s, f)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(lis)
	t.Cleanup(s.Stop)
	addr := lis.Addr().String()
	f.addr = addr
	f.leader.Store(&addr)
	return addr
}

// A waiting exclusive acquire that a leader change ends with Unavailable
// (outcome unknown) is sent again, under the same lease and mode, with a
// timeout sized to what is left of the deadline; the grant carries its
// fencing token and the lock's state.
func TestLockAcquireResumesAfterLeaderChange(t *testing.T) {
	f, c := startLockFake(t, func(_ context.Context, n int, r *pb.AcquireLockRequest) (*pb.AcquireLockResponse, error) {
		if n == 1 {
			return nil, unavail(apierr.OutcomeUnknown, "", "node n1: leadership lost while the acquire waited")
		}
		return granted(r, 42), nil
	})
	ls, err := c.NewLockSession(testCtx(t), "ns", "worker-1", 30*time.Second, WithLeaseMetadata(map[string]string{"host": "a"}))
	if err != nil {
		t.Fatal(err)
	}
	if creates := sent[*pb.CreateLockLeaseRequest](f); len(creates) != 1 || creates[0].Metadata["host"] != "a" || creates[0].TtlSeconds != 30 {
		t.Fatalf("creates %v", creates)
	}
	ctx, cancel := context.WithTimeout(testCtx(t), 10*time.Second)
	defer cancel()
	g, err := ls.Lock("orders/eu").Acquire(ctx, Exclusive, WithMetadata(map[string]string{"job": "7"}))
	if err != nil {
		t.Fatal(err)
	}
	if g.FencingToken != 42 || g.Mode != Exclusive || g.LeaseID != ls.LeaseID() || g.Lock != "orders/eu" ||
		g.State.GetState() != pb.LockState_LOCK_STATE_EXCLUSIVE_LOCKED || g.Holder.GetMetadata()["job"] != "7" {
		t.Fatalf("grant %+v", g)
	}
	acq := sent[*pb.AcquireLockRequest](f)
	if len(acq) != 2 {
		t.Fatalf("%d AcquireLock calls, want 2", len(acq))
	}
	for _, r := range acq {
		if !r.Exclusive || r.LeaseId != ls.LeaseID() || r.LockName != "orders/eu" || r.TimeoutSeconds < 1 || r.TimeoutSeconds > 10 {
			t.Fatalf("request %v", r)
		}
	}
	if err := ls.Close(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	if rv := sent[*pb.RevokeLockLeaseRequest](f); len(rv) != 1 || rv[0].LeaseId != ls.LeaseID() {
		t.Fatalf("revokes %v", rv)
	}
	if _, err := ls.Lock("orders/eu").Acquire(testCtx(t), Shared); !errors.Is(err, ErrSessionClosed) {
		t.Fatalf("acquire after Close: %v", err)
	}
}

// TryAcquire not granted: a *LockAcquireError matching ErrWouldBlock that
// says what is in the way; a blocking acquire whose deadline passes:
// ErrTimeout, with the reason of the last answer.
func TestLockNotAcquired(t *testing.T) {
	f, c := startLockFake(t, func(ctx context.Context, _ int, r *pb.AcquireLockRequest) (*pb.AcquireLockResponse, error) {
		if r.TimeoutSeconds == 0 {
			return blocked(r, pb.AcquireOutcome_ACQUIRE_OUTCOME_UNAVAILABLE), nil
		}
		// Wait, then answer TIMED_OUT, as a server whose wait ran out
		// would, but after 100 ms instead of the whole timeout: the client
		// sends again while its deadline allows, and an answer is always
		// back well before the deadline, however slow the machine.
		t := time.NewTimer(100 * time.Millisecond)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return nil, status.FromContextError(ctx.Err()).Err()
		}
		return blocked(r, pb.AcquireOutcome_ACQUIRE_OUTCOME_TIMED_OUT), nil
	})
	ls, err := c.NewLockSession(testCtx(t), "ns", "w", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer ls.Close(testCtx(t))
	lk := ls.Lock("orders/eu")
	_, err = lk.TryAcquire(testCtx(t), Shared)
	var le *LockAcquireError
	if !errors.Is(err, ErrWouldBlock) || !errors.As(err, &le) || le.Reason != pb.ContentionReason_CONTENTION_REASON_ANCESTOR ||
		len(le.BlockingLocks) != 1 || le.Mode != Shared || le.Outcome != pb.AcquireOutcome_ACQUIRE_OUTCOME_UNAVAILABLE {
		t.Fatalf("TryAcquire: %#v", err)
	}
	if want := `grackle: lock "orders/eu" in namespace "ns" not acquired shared without waiting: an ancestor is held (orders)`; err.Error() != want {
		t.Fatalf("message %q, want %q", err.Error(), want)
	}
	ctx, cancel := context.WithTimeout(testCtx(t), 1500*time.Millisecond)
	defer cancel()
	_, err = lk.Acquire(ctx, Exclusive)
	if !errors.Is(err, ErrTimeout) || !errors.As(err, &le) || le.Reason != pb.ContentionReason_CONTENTION_REASON_ANCESTOR ||
		le.Outcome != pb.AcquireOutcome_ACQUIRE_OUTCOME_TIMED_OUT {
		t.Fatalf("Acquire: %#v", err)
	}
	// The TryAcquire, then blocking requests, each asking the server to
	// wait at least 1 s and never beyond the deadline, sent again after
	// each TIMED_OUT until the deadline ends the last.
	acq := sent[*pb.AcquireLockRequest](f)
	if len(acq) < 3 {
		t.Fatalf("requests %v", acq)
	}
	for _, r := range acq[1:] {
		if r.TimeoutSeconds != 1 || !r.Exclusive {
			t.Fatalf("request %v", r)
		}
	}
	if _, err := lk.Acquire(testCtx(t), LockMode(0)); err == nil {
		t.Fatal("mode 0 accepted")
	}
}

// A second upgrader is refused with ErrUpgradeConflict (still a
// FailedPrecondition); a lease that is gone ends the session as lost.
func TestLockUpgradeConflictAndLeaseGone(t *testing.T) {
	f, c := startLockFake(t, func(_ context.Context, n int, r *pb.AcquireLockRequest) (*pb.AcquireLockResponse, error) {
		switch {
		case !r.Exclusive:
			return granted(r, uint64(n)), nil
		default:
			return nil, apierr.New(codes.FailedPrecondition, apierr.UpgradeConflict, "n1", apierr.Leader{}, "another upgrade of lock \"a\" waits")
		}
	})
	ls, err := c.NewLockSession(testCtx(t), "ns", "w", 0)
	if err != nil {
		t.Fatal(err)
	}
	lk := ls.Lock("a")
	if _, err := lk.Acquire(testCtx(t), Shared); err != nil {
		t.Fatal(err)
	}
	_, err = lk.Acquire(testCtx(t), Exclusive)
	if !errors.Is(err, ErrUpgradeConflict) || status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("upgrade: %v", err)
	}
	if ls.Err() != nil {
		t.Fatalf("an upgrade conflict ended the session: %v", ls.Err())
	}
	// The lease is revoked behind the session's back.
	f.mu.Lock()
	delete(f.leases, ls.LeaseID())
	f.mu.Unlock()
	if _, err := lk.Acquire(testCtx(t), Shared); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("acquire with a gone lease: %v", err)
	}
	select {
	case <-ls.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("session not ended")
	}
	if err := ls.Close(testCtx(t)); err != nil {
		t.Fatalf("Close of a lost session: %v", err)
	}
	if rv := sent[*pb.RevokeLockLeaseRequest](f); len(rv) != 0 {
		t.Fatalf("revoked a lease the server said was gone: %v", rv)
	}
}

// WithLock releases the lock when fn panics, and the panic goes on; on a
// normal return the result is fn's.
func TestWithLockReleasesOnPanic(t *testing.T) {
	f, c := startLockFake(t, func(_ context.Context, n int, r *pb.AcquireLockRequest) (*pb.AcquireLockResponse, error) {
		return granted(r, uint64(n)), nil
	})
	ls, err := c.NewLockSession(testCtx(t), "ns", "w", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer ls.Close(testCtx(t))
	lk := ls.Lock("a/b")
	func() {
		defer func() {
			if p := recover(); p != "boom" {
				t.Fatalf("recovered %v, want the panic to go on", p)
			}
		}()
		_ = WithLock(testCtx(t), lk, Shared, func(ctx context.Context, g *LockGrant) error {
			if g.Mode != Shared {
				t.Errorf("mode %v", g.Mode)
			}
			panic("boom")
		})
	}()
	if rel := sent[*pb.ReleaseLockRequest](f); len(rel) != 1 || rel[0].LockName != "a/b" || rel[0].LeaseId != ls.LeaseID() {
		t.Fatalf("releases after the panic: %v", rel)
	}
	sentinel := errors.New("fn failed")
	if err := WithLock(testCtx(t), lk, Exclusive, func(context.Context, *LockGrant) error { return sentinel }); err != sentinel {
		t.Fatalf("WithLock: %v", err)
	}
	if rel := sent[*pb.ReleaseLockRequest](f); len(rel) != 2 {
		t.Fatalf("%d releases, want 2", len(rel))
	}
}

// Lock sessions refresh with RefreshLockLease; resuming checks the lock
// lease with GetLockLease; NewSession refuses lease metadata.
func TestLockSessionRefreshAndResume(t *testing.T) {
	f, c := startLockFake(t, nil)
	ls, err := c.NewLockSession(testCtx(t), "ns", "w", 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(15 * time.Second)
	for len(sent[*pb.RefreshLockLeaseRequest](f)) < 2 {
		if time.Now().After(deadline) {
			t.Fatal("no refreshes of the lock lease")
		}
		time.Sleep(20 * time.Millisecond)
	}
	ls.Orphan()
	again, err := c.NewLockSession(testCtx(t), "ns", "", 0, WithLease(ls.LeaseID()))
	if err != nil {
		t.Fatal(err)
	}
	if again.LeaseID() != ls.LeaseID() || again.ProcessID() != "w" || again.TTL() != 2*time.Second {
		t.Fatalf("resumed %s %s %v", again.LeaseID(), again.ProcessID(), again.TTL())
	}
	if again.Lock("x").held != heldUnknown {
		t.Fatal("a resumed session's handle claims to know its hold")
	}
	if err := again.Close(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.NewLockSession(testCtx(t), "ns", "", 0, WithLease(ls.LeaseID())); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("resume of a revoked lease: %v", err)
	}
	if _, err := c.NewSession(testCtx(t), "ns", "w", 0, WithLeaseMetadata(map[string]string{"a": "b"})); err == nil {
		t.Fatal("NewSession took lease metadata")
	}
}

// WatchLockState resumes after a leader change and reports it.
func TestWatchLockStateResumes(t *testing.T) {
	f := &lockFake{leases: map[string]*pb.LockLease{}}
	var calls int
	var mu sync.Mutex
	// The second stream sends once the first state was read, so that a
	// slow reader cannot have the two folded into one (deliverLatest).
	firstRead := make(chan struct{})
	f.watchLock = func(st grpc.ServerStreamingServer[pb.WatchLockResponse]) error {
		mu.Lock()
		calls++
		n := calls
		mu.Unlock()
		if n == 2 {
			select {
			case <-firstRead:
			case <-st.Context().Done():
				return st.Context().Err()
			}
		}
		if err := st.Send(&pb.WatchLockResponse{Initial: true, RaftIndex: uint64(n), Lock: &pb.Lock{Name: "a"}}); err != nil {
			return err
		}
		if n == 1 {
			return unavail(apierr.NotLeader, "", "leadership changed")
		}
		return status.Error(codes.PermissionDenied, "done")
	}
	c, err := New(testCtx(t), fastConfig(startLockServer(t, f)))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var states []LockWatchUpdate
	var last error
	for u := range c.WatchLockState(testCtx(t), "ns", "a") {
		if u.Err != nil {
			last = u.Err
			continue
		}
		if states = append(states, u); len(states) == 1 {
			close(firstRead)
		}
	}
	if len(states) != 2 || states[0].Resumed || !states[1].Resumed || states[1].State.GetLock().GetName() != "a" {
		t.Fatalf("states %v", states)
	}
	if status.Code(last) != codes.PermissionDenied {
		t.Fatalf("end %v", last)
	}
}
