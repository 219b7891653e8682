package server_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/grackle-coord/grackle/apierr"
	"github.com/grackle-coord/grackle/internal/mux"
	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
)

// bearer sends one fixed token with every call of a connection, so that
// the connection's multiplexed stream carries it (a call's own metadata
// would send the call as an ordinary unary call instead).
type bearer string

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	if b == "" {
		return nil, nil
	}
	return map[string]string{"authorization": "Bearer " + string(b)}, nil
}

func (bearer) RequireTransportSecurity() bool { return false }

// muxTo is a multiplexed connection to addr whose calls carry secret.
func muxTo(t *testing.T, addr, secret string) *mux.Conn {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithPerRPCCredentials(bearer(secret)))
	if err != nil {
		t.Fatal(err)
	}
	m := mux.NewConn(cc)
	t.Cleanup(func() { m.Close(); cc.Close() })
	return m
}

// warm makes calls on m until one goes on its stream (which opens in the
// background on first use), or gives up quietly after a while: a
// connection whose token is refused never gets a stream, and its calls go
// as unary calls.
func warm(t *testing.T, ctx context.Context, m *mux.Conn) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for m.StreamCalls() == 0 && time.Now().Before(deadline) {
		_, _ = pb.NewClusterServiceClient(m).GetNodeInfo(ctx, &pb.GetNodeInfoRequest{})
		time.Sleep(20 * time.Millisecond)
	}
}

// A follower's multiplexed stream relays every refusal the leader gives
// intact, error details included (the leader's binary status trailer once
// made the result fail to encode, which ended the stream and every call on
// it), and the stream carries on: a waiting acquire on it is granted after
// the refusals.
func TestFollowerStreamRelaysRefusals(t *testing.T) {
	c, root := aclCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	var leaderIdx, followerIdx int
	withToken(t, c, root, func() { leaderIdx = c.WaitLeader(); followerIdx = c.Follower() })
	rootG := pb.NewGrackleServiceClient(c.Conn(leaderIdx))
	rctx := tokenCtx(ctx, root)
	mustAnswer := func(what string, call func() error) {
		t.Helper()
		if err := answered(t, what, call); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	mustAnswer("CreateNamespace", func() error {
		_, err := rootG.CreateNamespace(rctx, &pb.CreateNamespaceRequest{Name: "ns1"})
		return err
	})
	mustAnswer("CreateSemaphore", func() error {
		_, err := rootG.CreateSemaphore(rctx, &pb.CreateSemaphoreRequest{NamespaceName: "ns1", SemaphoreName: "s", Permits: 1})
		return err
	})
	var holder *pb.CreateSemaphoreLeaseResponse
	mustAnswer("CreateSemaphoreLease", func() (err error) {
		holder, err = rootG.CreateSemaphoreLease(rctx, &pb.CreateSemaphoreLeaseRequest{NamespaceName: "ns1", ProcessId: "holder", TtlSeconds: 60})
		return err
	})
	mustAnswer("AcquireSemaphore", func() error {
		_, err := rootG.AcquireSemaphore(rctx, &pb.AcquireSemaphoreRequest{NamespaceName: "ns1", SemaphoreName: "s", LeaseId: holder.Lease.LeaseId, Weight: 1})
		return err
	})
	admin := pb.NewACLServiceClient(c.Conn(leaderIdx))
	var readNS1 *pb.CreateTokenResponse
	mustAnswer("CreateToken", func() (err error) {
		readNS1, err = admin.CreateToken(rctx, &pb.CreateTokenRequest{Role: "read", Namespace: "ns1", Description: "reader"})
		return err
	})

	follower := c.Nodes[followerIdx].GRPCAddr()
	rootMux := muxTo(t, follower, root)
	g := pb.NewGrackleServiceClient(rootMux)
	// The waiter: a lease of its own and an acquire that waits for the
	// holder's permit, on the follower's stream.
	var waiterLease *pb.CreateSemaphoreLeaseResponse
	mustAnswer("the waiter's lease", func() (err error) {
		waiterLease, err = g.CreateSemaphoreLease(ctx, &pb.CreateSemaphoreLeaseRequest{NamespaceName: "ns1", ProcessId: "waiter", TtlSeconds: 60})
		return err
	})
	type acq struct {
		r   *pb.AcquireSemaphoreResponse
		err error
	}
	waited := make(chan acq, 1)
	go func() {
		r, err := g.AcquireSemaphore(ctx, &pb.AcquireSemaphoreRequest{NamespaceName: "ns1", SemaphoreName: "s",
			LeaseId: waiterLease.Lease.LeaseId, Weight: 1, TimeoutSeconds: 60})
		waited <- acq{r, err}
	}()

	cases := []struct {
		name   string
		conn   *mux.Conn
		code   codes.Code
		reason string
		call   func(ctx context.Context, cc grpc.ClientConnInterface) error
	}{
		{"a read token writing", muxTo(t, follower, readNS1.Secret), codes.PermissionDenied, "", func(ctx context.Context, cc grpc.ClientConnInterface) error {
			_, err := pb.NewGrackleServiceClient(cc).CreateSemaphore(ctx, &pb.CreateSemaphoreRequest{NamespaceName: "ns1", SemaphoreName: "t", Permits: 1})
			return err
		}},
		{"an unknown token", muxTo(t, follower, "grk_not_a_token"), codes.Unauthenticated, "", func(ctx context.Context, cc grpc.ClientConnInterface) error {
			_, err := pb.NewGrackleServiceClient(cc).CreateSemaphore(ctx, &pb.CreateSemaphoreRequest{NamespaceName: "ns1", SemaphoreName: "t", Permits: 1})
			return err
		}},
		{"no namespace", rootMux, codes.NotFound, apierr.NamespaceNotFound, func(ctx context.Context, cc grpc.ClientConnInterface) error {
			_, err := pb.NewGrackleServiceClient(cc).CreateSemaphore(ctx, &pb.CreateSemaphoreRequest{NamespaceName: "nowhere", SemaphoreName: "t", Permits: 1})
			return err
		}},
		{"no semaphore", rootMux, codes.NotFound, apierr.SemaphoreNotFound, func(ctx context.Context, cc grpc.ClientConnInterface) error {
			_, err := pb.NewGrackleServiceClient(cc).AcquireSemaphore(ctx, &pb.AcquireSemaphoreRequest{NamespaceName: "ns1", SemaphoreName: "none", LeaseId: waiterLease.Lease.LeaseId, Weight: 1})
			return err
		}},
		{"no lease", rootMux, codes.NotFound, apierr.LeaseNotFound, func(ctx context.Context, cc grpc.ClientConnInterface) error {
			_, err := pb.NewGrackleServiceClient(cc).RefreshSemaphoreLease(ctx, &pb.RefreshSemaphoreLeaseRequest{NamespaceName: "ns1", LeaseId: matrixLease, TtlSeconds: 60})
			return err
		}},
		{"no wait group", rootMux, codes.NotFound, apierr.WaitGroupNotFound, func(ctx context.Context, cc grpc.ClientConnInterface) error {
			_, err := pb.NewGrackleServiceClient(cc).CompleteJobsFromWaitGroup(ctx, &pb.CompleteJobsFromWaitGroupRequest{NamespaceName: "ns1", WaitGroupName: "none", Jobs: []*pb.WaitGroupJob{{JobId: "j"}}})
			return err
		}},
		{"no barrier", rootMux, codes.NotFound, apierr.BarrierNotFound, func(ctx context.Context, cc grpc.ClientConnInterface) error {
			_, err := pb.NewGrackleServiceClient(cc).ArriveAtBarrier(ctx, &pb.ArriveAtBarrierRequest{NamespaceName: "ns1", BarrierName: "none", ProcessId: "p", ExpectedGeneration: 1})
			return err
		}},
		{"no token", rootMux, codes.NotFound, apierr.TokenNotFound, func(ctx context.Context, cc grpc.ClientConnInterface) error {
			_, err := pb.NewACLServiceClient(cc).RevokeToken(ctx, &pb.RevokeTokenRequest{Id: "tok_none"})
			return err
		}},
		{"no member", rootMux, codes.NotFound, apierr.MemberNotFound, func(ctx context.Context, cc grpc.ClientConnInterface) error {
			_, err := pb.NewClusterServiceClient(cc).RemoveMember(ctx, &pb.RemoveMemberRequest{NodeId: "nobody"})
			return err
		}},
	}
	for _, k := range cases {
		warm(t, ctx, k.conn)
		before := k.conn.StreamCalls()
		err := answered(t, k.name, func() error { return k.call(ctx, k.conn) })
		if status.Code(err) != k.code {
			t.Errorf("%s through the follower's stream: %v, want %s", k.name, err, k.code)
			continue
		}
		info := errorInfo(err)
		if info == nil || info.Domain != apierr.Domain {
			t.Errorf("%s: %v carries no ErrorInfo", k.name, err)
		} else if k.reason != "" && info.Reason != k.reason {
			t.Errorf("%s: reason %q, want %q", k.name, info.Reason, k.reason)
		}
		if k.conn.StreamCalls() == before {
			t.Errorf("%s: the call did not go on the stream (the test checks the stream's relay)", k.name)
		}
	}

	// The waiter is still waiting on the same stream, and is granted
	// once the holder lets go.
	select {
	case a := <-waited:
		t.Fatalf("the waiting acquire ended before the permit was free: %v, %v", a.r, a.err)
	default:
	}
	mustAnswer("ReleaseSemaphore", func() error {
		_, err := rootG.ReleaseSemaphore(rctx, &pb.ReleaseSemaphoreRequest{NamespaceName: "ns1", SemaphoreName: "s", LeaseId: holder.Lease.LeaseId})
		return err
	})
	select {
	case a := <-waited:
		if a.err != nil || a.r.Outcome != pb.AcquireOutcome_ACQUIRE_OUTCOME_ACQUIRED {
			t.Fatalf("the waiting acquire: %v, %v; want acquired", a.r, a.err)
		}
	case <-ctx.Done():
		t.Fatal("the waiting acquire never ended")
	}
}
