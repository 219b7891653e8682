package client

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/grackle-coord/grackle/apierr"
	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
)

// unavail is an Unavailable error with an apierr reason naming leader addr.
func unavail(reason, addr, msg string) error {
	return apierr.New(codes.Unavailable, reason, "n1", apierr.Leader{ID: "n2", Address: addr}, msg)
}

func TestLeaderHint(t *testing.T) {
	cases := []struct {
		tr   metadata.MD
		err  error
		want string
	}{
		{metadata.Pairs(leaderAddressKey, "10.0.0.1:7420"), unavail(apierr.NotLeader, "", "node n2: not the leader"), "10.0.0.1:7420"},
		{nil, unavail(apierr.NotLeader, "127.0.0.1:4567", "node n2: not the leader"), "127.0.0.1:4567"},
		{nil, unavail(apierr.NotSent, "[::1]:80", "node n2: cannot reach the leader: x"), "[::1]:80"},
		{nil, unavail(apierr.NotLeader, "", "node n2: not the leader; no leader is known right now"), ""},
		{nil, status.Error(codes.Unavailable, "connection error: desc = \"transport: Error while dialing\""), ""},
	}
	for _, c := range cases {
		if got := leaderHint(c.tr, c.err); got != c.want {
			t.Errorf("leaderHint(%v, %v) = %q, want %q", c.tr, c.err, got, c.want)
		}
	}
}

func TestProvesNotSent(t *testing.T) {
	yes := []error{
		unavail(apierr.NotLeader, "127.0.0.1:1", "node n1: not the leader"),
		unavail(apierr.NotLeader, "", "node n1: not the leader; no leader is known right now"),
		unavail(apierr.NotSent, "", "raft is overloaded: the write was not enqueued in time"),
		unavail(apierr.NotSent, "", "node n1: cannot reach the leader: bad address"),
		apierr.Annotate(status.Error(codes.Unavailable, "connection error"), apierr.NotSent, "", apierr.Leader{}),
	}
	no := []error{
		unavail(apierr.OutcomeUnknown, "x:1", "node n1: leadership lost before the write committed (its outcome is unknown)"),
		// A message that names a not-sent cause proves nothing: only the reason counts.
		status.Error(codes.Unavailable, "node n1: not the leader"),
		unavail(apierr.OutcomeUnknown, "", "node n1: leadership lost while waiting"),
		unavail(apierr.OutcomeUnknown, "", "node n1: shutting down"),
		status.Error(codes.Unavailable, "error reading from server: EOF"),
		status.Error(codes.Unavailable, "transport is closing"),
	}
	for _, m := range yes {
		if !retryable(retryIfNotSent, m) {
			t.Errorf("%v: want retryable for a create", m)
		}
	}
	for _, m := range no {
		if retryable(retryIfNotSent, m) {
			t.Errorf("%v: want not retryable for a create", m)
		}
		if !retryable(retryAlways, m) {
			t.Errorf("%v: want retryable for an idempotent call", m)
		}
	}
	if retryable(retryAlways, status.Error(codes.DeadlineExceeded, "x")) || retryable(retryAlways, status.Error(codes.NotFound, "x")) {
		t.Error("only Unavailable is retryable")
	}
}

func TestJitteredBackoff(t *testing.T) {
	base, max := 50*time.Millisecond, 2*time.Second
	for attempt := 0; attempt < 12; attempt++ {
		d := base << attempt
		if d > max || attempt > 6 {
			d = max
		}
		for i := 0; i < 200; i++ {
			got := jittered(base, max, attempt)
			if got < d/2 || got > d {
				t.Fatalf("attempt %d: %v outside [%v, %v]", attempt, got, d/2, d)
			}
		}
	}
}

// fakeNode is a scripted GrackleService + ClusterService.
type fakeNode struct {
	pb.UnimplementedGrackleServiceServer
	pb.UnimplementedClusterServiceServer
	addr   string
	leader atomic.Pointer[string]
	calls  atomic.Int64
	// createNS answers CreateNamespace; call is 1-based.
	createNS func(ctx context.Context, call int64) error
	deleteNS func(ctx context.Context, call int64) error
	// watch serves WatchSemaphore; call is 1-based.
	watch      func(call int64, st grpc.ServerStreamingServer[pb.WatchSemaphoreResponse]) error
	watchCalls atomic.Int64
}

func (f *fakeNode) WatchSemaphore(_ *pb.WatchSemaphoreRequest, st grpc.ServerStreamingServer[pb.WatchSemaphoreResponse]) error {
	return f.watch(f.watchCalls.Add(1), st)
}

func (f *fakeNode) GetClusterStatus(context.Context, *pb.GetClusterStatusRequest) (*pb.GetClusterStatusResponse, error) {
	l := ""
	if p := f.leader.Load(); p != nil {
		l = *p
	}
	return &pb.GetClusterStatusResponse{LeaderId: "x", LeaderAddress: l, Term: 1}, nil
}

func (f *fakeNode) CreateNamespace(ctx context.Context, r *pb.CreateNamespaceRequest) (*pb.CreateNamespaceResponse, error) {
	n := f.calls.Add(1)
	if err := f.createNS(ctx, n); err != nil {
		return nil, err
	}
	return &pb.CreateNamespaceResponse{Namespace: &pb.Namespace{Name: r.Name, Version: 1}}, nil
}

func (f *fakeNode) DeleteNamespace(ctx context.Context, r *pb.DeleteNamespaceRequest) (*pb.DeleteNamespaceResponse, error) {
	n := f.calls.Add(1)
	if err := f.deleteNS(ctx, n); err != nil {
		return nil, err
	}
	return &pb.DeleteNamespaceResponse{}, nil
}

func startFake(t *testing.T, f *fakeNode) *fakeNode {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	pb.RegisterGrackleServiceServer(s, f)
	pb.RegisterClusterServiceServer(s, f)
	go s.Serve(lis)
	t.Cleanup(s.Stop)
	f.addr = lis.Addr().String()
	if f.leader.Load() == nil {
		f.leader.Store(&f.addr)
	}
	return f
}

func fastConfig(eps ...string) Config {
	return Config{Endpoints: eps, DialTimeout: 2 * time.Second, BackoffBase: 5 * time.Millisecond, BackoffMax: 50 * time.Millisecond}
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestCreateNotRetriedWhenOutcomeUnknown(t *testing.T) {
	f := startFake(t, &fakeNode{createNS: func(context.Context, int64) error {
		return unavail(apierr.OutcomeUnknown, "", "node n1: leadership lost before the write committed (its outcome is unknown)")
	}})
	c, err := New(testCtx(t), fastConfig(f.addr))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = c.CreateNamespace(testCtx(t), &pb.CreateNamespaceRequest{Name: "a"})
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("want Unavailable, got %v", err)
	}
	if n := f.calls.Load(); n != 1 {
		t.Fatalf("CreateNamespace sent %d times, want 1", n)
	}
}

func TestCreateRetriedWhenNotLeader(t *testing.T) {
	f := startFake(t, &fakeNode{createNS: func(_ context.Context, n int64) error {
		if n < 3 {
			return unavail(apierr.NotLeader, "", "node n1: not the leader; no leader is known right now")
		}
		return nil
	}})
	c, err := New(testCtx(t), fastConfig(f.addr))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.CreateNamespace(testCtx(t), &pb.CreateNamespaceRequest{Name: "a"}); err != nil {
		t.Fatal(err)
	}
	if n := f.calls.Load(); n != 3 {
		t.Fatalf("CreateNamespace sent %d times, want 3", n)
	}
}

func TestIdempotentRetriedWhenOutcomeUnknown(t *testing.T) {
	f := startFake(t, &fakeNode{deleteNS: func(_ context.Context, n int64) error {
		if n == 1 {
			return unavail(apierr.OutcomeUnknown, "", "node n1: leadership lost before the write committed (its outcome is unknown)")
		}
		return nil
	}})
	c, err := New(testCtx(t), fastConfig(f.addr))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.DeleteNamespace(testCtx(t), &pb.DeleteNamespaceRequest{NamespaceName: "a"}); err != nil {
		t.Fatal(err)
	}
	if n := f.calls.Load(); n != 2 {
		t.Fatalf("DeleteNamespace sent %d times, want 2", n)
	}
}

// A node that says "not the leader" and names the leader in its trailer
// sends the client there, and the client keeps going there.
func TestFollowsLeaderTrailer(t *testing.T) {
	b := startFake(t, &fakeNode{createNS: func(context.Context, int64) error { return nil }})
	a := &fakeNode{}
	a.createNS = func(ctx context.Context, _ int64) error {
		_ = grpc.SetTrailer(ctx, metadata.Pairs(leaderAddressKey, b.addr))
		return unavail(apierr.NotLeader, "", "node a: not the leader")
	}
	startFake(t, a) // a believes it leads itself: discovery points at a
	c, err := New(testCtx(t), fastConfig(a.addr))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for i := 0; i < 3; i++ {
		if _, err := c.CreateNamespace(testCtx(t), &pb.CreateNamespaceRequest{Name: "a"}); err != nil {
			t.Fatal(err)
		}
	}
	if a.calls.Load() != 1 || b.calls.Load() != 3 {
		t.Fatalf("calls: a %d (want 1), b %d (want 3)", a.calls.Load(), b.calls.Load())
	}
	if c.Leader() != b.addr {
		t.Fatalf("leader %q, want %q", c.Leader(), b.addr)
	}
}

// Retries stop at the caller's deadline.
func TestRetriesBoundedByDeadline(t *testing.T) {
	f := startFake(t, &fakeNode{deleteNS: func(context.Context, int64) error {
		return unavail(apierr.NotLeader, "", "node n1: not the leader; no leader is known right now")
	}})
	c, err := New(testCtx(t), fastConfig(f.addr))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = c.DeleteNamespace(ctx, &pb.DeleteNamespaceRequest{NamespaceName: "a"})
	if el := time.Since(start); el > 2*time.Second {
		t.Fatalf("returned after %v", el)
	}
	if code := status.Code(err); code != codes.DeadlineExceeded && code != codes.Unavailable {
		t.Fatalf("want DeadlineExceeded or Unavailable, got %v", err)
	}
	if f.calls.Load() < 2 {
		t.Fatalf("only %d attempts", f.calls.Load())
	}
}

func TestNewFailsWithoutReachableEndpoint(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := lis.Addr().String()
	lis.Close()
	start := time.Now()
	_, err = New(context.Background(), Config{Endpoints: []string{dead}, DialTimeout: 500 * time.Millisecond})
	if err == nil {
		t.Fatal("New succeeded with only a dead endpoint")
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Fatalf("New took %v", el)
	}
	if _, err := New(context.Background(), Config{}); err == nil {
		t.Fatal("New succeeded without endpoints")
	}
}

// Concurrent calls after the leader is forgotten rediscover it (sharing one
// probe); after Close every call fails with ErrClientClosed.
func TestRediscoveryAndClose(t *testing.T) {
	f := startFake(t, &fakeNode{deleteNS: func(context.Context, int64) error { return nil }})
	c, err := New(testCtx(t), fastConfig(f.addr))
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.forgetLeader()
			if _, err := c.DeleteNamespace(testCtx(t), &pb.DeleteNamespaceRequest{NamespaceName: "a"}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	c.Close()
	if _, err := c.DeleteNamespace(testCtx(t), &pb.DeleteNamespaceRequest{NamespaceName: "a"}); err != ErrClientClosed {
		t.Fatalf("after Close: %v", err)
	}
}

// Client.Watch resumes after the ends docs/watch.md names as transient (a
// leader change: Unavailable; a stalled watcher: WATCH_STALLED) and ends
// on Internal: a bug on the server, which reopening would only repeat.
func TestWatchResumesOnTransientEndsAndStopsOnInternal(t *testing.T) {
	internal := status.Error(codes.Internal, "watch: a bug")
	f := startFake(t, &fakeNode{watch: func(call int64, st grpc.ServerStreamingServer[pb.WatchSemaphoreResponse]) error {
		if err := st.Send(&pb.WatchSemaphoreResponse{Initial: true, RaftIndex: uint64(call)}); err != nil {
			return err
		}
		switch call {
		case 1:
			return unavail(apierr.NotLeader, "", "leadership changed")
		case 2:
			return apierr.New(codes.ResourceExhausted, apierr.WatchStalled, "n1", apierr.Leader{}, "slow watcher")
		case 3:
			return internal
		}
		return status.Error(codes.FailedPrecondition, "reopened after Internal")
	}})
	c, err := New(testCtx(t), fastConfig(f.addr))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var states int
	var last error
	for u := range c.Watch(testCtx(t), "ns", "s") {
		if u.Err != nil {
			last = u.Err
			continue
		}
		if states++; u.Resumed != (states > 1) {
			t.Errorf("state %d: Resumed %v", states, u.Resumed)
		}
	}
	if status.Code(last) != codes.Internal {
		t.Fatalf("the watch ended with %v, want the Internal error", last)
	}
	if n := f.watchCalls.Load(); n != 3 || states != 3 {
		t.Fatalf("%d streams opened, %d states: want 3 and 3 (resumed twice, not after Internal)", n, states)
	}
}
