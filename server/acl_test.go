package server_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"

	"github.com/grackle-coord/grackle/acl"
	"github.com/grackle-coord/grackle/apierr"
	peerpb "github.com/grackle-coord/grackle/proto/grackle/peer/v1"
	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
	"github.com/grackle-coord/grackle/server/servertest"
)

// aclCluster starts n nodes with access control on: the first bootstraps
// the ACL, the others join with its admin token.
func aclCluster(t *testing.T, n int) (*servertest.Cluster, string) {
	t.Helper()
	c := servertest.New(t)
	cfg := servertest.Config(t, "node1")
	cfg.ACL = true
	s := c.StartNode(cfg)
	servertest.Eventually(t, "a leader", 20*time.Second, s.IsLeader)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var boot *pb.BootstrapResponse
	servertest.Eventually(t, "bootstrap", 20*time.Second, func() bool {
		var err error
		boot, err = pb.NewACLServiceClient(c.Conn(0)).Bootstrap(ctx, &pb.BootstrapRequest{})
		if status.Code(err) == codes.FailedPrecondition {
			t.Fatalf("bootstrap: %v", err)
		}
		return err == nil
	})
	for i := 1; i < n; i++ {
		cfg := servertest.Config(t, fmt.Sprintf("node%d", i+1))
		cfg.ACL, cfg.Join, cfg.JoinToken = true, c.Nodes[0].GRPCAddr(), boot.Secret
		c.StartNode(cfg)
	}
	withToken(t, c, boot.Secret, func() { c.WaitMembers(n) })
	return c, boot.Secret
}

// withToken runs f with every call of the cluster's test connections
// carrying secret (servertest's helpers make the calls).
func withToken(t *testing.T, c *servertest.Cluster, secret string, f func()) {
	t.Helper()
	c.SetToken(secret)
	defer c.SetToken("")
	f()
}

func tokenCtx(ctx context.Context, secret string) context.Context {
	if secret == "" {
		return ctx
	}
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+secret)
}

// scope of an RPC in the matrix: what a token must cover.
type scope int

const (
	nsScope      scope = iota // the request's namespace (ns1)
	clusterScope              // "*" only
	anyToken                  // any valid token
	open                      // no token at all
)

type matrixRPC struct {
	method string
	role   string
	scope  scope
	call   func(ctx context.Context, cc *grpc.ClientConn) error
}

func streamFirst[T any](s grpc.ServerStreamingClient[T], err error) error {
	if err != nil {
		return err
	}
	_, err = s.Recv()
	return err
}

// matrixLease is a well-formed lease id that names no lease: a follower
// checks a request's shape before it forwards it (a malformed one is
// answered InvalidArgument at once, whoever asks), so the matrix's
// requests are well formed and only the token decides.
const matrixLease = "ls_00000000000000000000"

// matrixLockLease is matrixLease's lock lease counterpart.
const matrixLockLease = "ll_00000000000000000000"

func matrixRPCs() []matrixRPC {
	g := func(cc *grpc.ClientConn) pb.GrackleServiceClient { return pb.NewGrackleServiceClient(cc) }
	cl := func(cc *grpc.ClientConn) pb.ClusterServiceClient { return pb.NewClusterServiceClient(cc) }
	a := func(cc *grpc.ClientConn) pb.ACLServiceClient { return pb.NewACLServiceClient(cc) }
	const ns = "ns1"
	return []matrixRPC{
		{"GrackleService/CreateNamespace", "admin", nsScope, func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := g(cc).CreateNamespace(ctx, &pb.CreateNamespaceRequest{Name: ns})
			return err
		}},
		{"GrackleService/GetNamespace", "read", nsScope, func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := g(cc).GetNamespace(ctx, &pb.GetNamespaceRequest{NamespaceName: ns})
			return err
		}},
		{"GrackleService/ListNamespaces", "read", clusterScope, func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := g(cc).ListNamespaces(ctx, &pb.ListNamespacesRequest{})
			return err
		}},
		{"GrackleService/UpdateNamespace", "admin", nsScope, func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := g(cc).UpdateNamespace(ctx, &pb.UpdateNamespaceRequest{NamespaceName: ns, Description: "x", ExpectedVersion: 1})
			return err
		}},
		{"GrackleService/DeleteNamespace", "admin", nsScope, func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := g(cc).DeleteNamespace(ctx, &pb.DeleteNamespaceRequest{NamespaceName: "ns1"})
			return err
		}},
		{"GrackleService/CreateSemaphore", "write", nsScope, func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := g(cc).CreateSemaphore(ctx, &pb.CreateSemaphoreRequest{NamespaceName: ns, SemaphoreName: "s", Permits: 1})
			return err
		}},
		{"GrackleService/GetSemaphore", "read", nsScope, func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := g(cc).GetSemaphore(ctx, &pb.GetSemaphoreRequest{NamespaceName: ns, SemaphoreName: "s"})
			return err
		}},
		{"GrackleService/ListSemaphores", "read", nsScope, func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := g(cc).ListSemaphores(ctx, &pb.ListSemaphoresRequest{NamespaceName: ns})
			return err
		}},
		{"GrackleService/UpdateSemaphore", "write", nsScope, func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := g(cc).UpdateSemaphore(ctx, &pb.UpdateSemaphoreRequest{NamespaceName: ns, SemaphoreName: "s", Permits: 2, ExpectedVersion: 1})
			return err
		}},
		{"GrackleService/DeleteSemaphore", "write", nsScope, func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := g(cc).DeleteSemaphore(ctx, &pb.DeleteSemaphoreRequest{NamespaceName: ns, SemaphoreName: "gone"})
			return err
		}},
		{"GrackleService/AcquireSemaphore", "write", nsScope, func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := g(cc).AcquireSemaphore(ctx, &pb.AcquireSemaphoreRequest{NamespaceName: ns, SemaphoreName: "s", LeaseId: matrixLease, Weight: 1})
			return err
		}},
		{"GrackleService/ReleaseSemaphore", "write", nsScope, func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := g(cc).ReleaseSemaphore(ctx, &pb.ReleaseSemaphoreRequest{NamespaceName: ns, SemaphoreName: "s", LeaseId: matrixLease})
			return err
		}},
		{"GrackleService/ListSemaphoreHolders", "read", nsScope, func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := g(cc).ListSemaphoreHolders(ctx, &pb.ListSemaphoreHoldersRequest{NamespaceName: ns, SemaphoreName: "s"})
			return err
		}},
		{"GrackleService/ListSemaphoreWaiters", "read", nsScope, func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := g(cc).ListSemaphoreWaiters(ctx, &pb.ListSemaphoreWaitersRequest{NamespaceName: ns, SemaphoreName: "s"})
			return err
		}},
		{"GrackleService/WatchSemaphore", "read", nsScope, func(ctx context.Context, cc *grpc.ClientConn) error {
			ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			err := streamFirst(g(cc).WatchSemaphore(ctx, &pb.WatchSemaphoreRequest{NamespaceName: ns, SemaphoreName: "s"}))
			if status.Code(err) == codes.DeadlineExceeded {
				return nil // watching: admitted
			}
			return err
		}},
		{"GrackleService/CreateSemaphoreLease", "write", nsScope, func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := g(cc).CreateSemaphoreLease(ctx, &pb.CreateSemaphoreLeaseRequest{NamespaceName: ns, ProcessId: "p", TtlSeconds: 60})
			return err
		}},
		{"GrackleService/GetSemaphoreLease", "read", nsScope, func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := g(cc).GetSemaphoreLease(ctx, &pb.GetSemaphoreLeaseRequest{NamespaceName: ns, LeaseId: matrixLease})
			return err
		}},
		{"GrackleService/RefreshSemaphoreLease", "write", nsScope, func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := g(cc).RefreshSemaphoreLease(ctx, &pb.RefreshSemaphoreLeaseRequest{NamespaceName: ns, LeaseId: matrixLease, TtlSeconds: 60})
			return err
		}},
		{"GrackleService/RevokeSemaphoreLease", "write", nsScope, func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := g(cc).RevokeSemaphoreLease(ctx, &pb.RevokeSemaphoreLeaseRequest{NamespaceName: ns, LeaseId: matrixLease})
			return err
		}},
		{"GrackleService/ListSemaphoreLeases", "read", nsScope, func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := g(cc).ListSemaphoreLeases(ctx, &pb.ListSemaphoreLeasesRequest{NamespaceName: ns})
			return err
		}},
		{"GrackleService/CreateLockLease", "write", nsScope, func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := g(cc).CreateLockLease(ctx, &pb.CreateLockLeaseRequest{NamespaceName: ns, ProcessId: "p", TtlSeconds: 60})
			return err
		}},
		{"GrackleService/GetLockLease", "read", nsScope, func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := g(cc).GetLockLease(ctx, &pb.GetLockLeaseRequest{NamespaceName: ns, LeaseId: matrixLockLease})
			return err
		}},
		{"GrackleService/RefreshLockLease", "write", nsScope, func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := g(cc).RefreshLockLease(ctx, &pb.RefreshLockLeaseRequest{NamespaceName: ns, LeaseId: matrixLockLease, TtlSeconds: 60})
			return err
		}},
		{"GrackleService/RevokeLockLease", "write", nsScope, func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := g(cc).RevokeLockLease(ctx, &pb.RevokeLockLeaseRequest{NamespaceName: ns, LeaseId: matrixLockLease})
			return err
		}},
		{"GrackleService/ListLockLeases", "read", nsScope, func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := g(cc).ListLockLeases(ctx, &pb.ListLockLeasesRequest{NamespaceName: ns})
			return err
		}},
		{"GrackleService/AcquireLock", "write", nsScope, func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := g(cc).AcquireLock(ctx, &pb.AcquireLockRequest{NamespaceName: ns, LockName: "l", LeaseId: matrixLockLease, Exclusive: true})
			return err
		}},
		{"GrackleService/ReleaseLock", "write", nsScope, func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := g(cc).ReleaseLock(ctx, &pb.ReleaseLockRequest{NamespaceName: ns, LockName: "l", LeaseId: matrixLockLease})
			return err
		}},
		{"GrackleService/GetLock", "read", nsScope, func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := g(cc).GetLock(ctx, &pb.GetLockRequest{NamespaceName: ns, LockName: "l"})
			return err
		}},
		{"GrackleService/ListLocks", "read", nsScope, func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := g(cc).ListLocks(ctx, &pb.ListLocksRequest{NamespaceName: ns})
			return err
		}},
		{"GrackleService/DeleteLock", "write", nsScope, func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := g(cc).DeleteLock(ctx, &pb.DeleteLockRequest{NamespaceName: ns, LockName: "l"})
			return err
		}},
		{"GrackleService/ListLockWaiters", "read", nsScope, func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := g(cc).ListLockWaiters(ctx, &pb.ListLockWaitersRequest{NamespaceName: ns, LockName: "l"})
			return err
		}},
		{"GrackleService/WatchLock", "read", nsScope, func(ctx context.Context, cc *grpc.ClientConn) error {
			ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			err := streamFirst(g(cc).WatchLock(ctx, &pb.WatchLockRequest{NamespaceName: ns, LockName: "l"}))
			if status.Code(err) == codes.DeadlineExceeded {
				return nil // watching: admitted
			}
			return err
		}},
		{"GrackleService/CreateWaitGroup", "write", nsScope, func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := g(cc).CreateWaitGroup(ctx, &pb.CreateWaitGroupRequest{NamespaceName: ns, WaitGroupName: "w", Counter: 1})
			return err
		}},
		{"GrackleService/GetWaitGroup", "read", nsScope, func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := g(cc).GetWaitGroup(ctx, &pb.GetWaitGroupRequest{NamespaceName: ns, WaitGroupName: "w"})
			return err
		}},
		{"GrackleService/ListWaitGroups", "read", nsScope, func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := g(cc).ListWaitGroups(ctx, &pb.ListWaitGroupsRequest{NamespaceName: ns})
			return err
		}},
		{"GrackleService/UpdateWaitGroup", "write", nsScope, func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := g(cc).UpdateWaitGroup(ctx, &pb.UpdateWaitGroupRequest{NamespaceName: ns, WaitGroupName: "w", Counter: 2, ExpectedVersion: 1})
			return err
		}},
		{"GrackleService/DeleteWaitGroup", "write", nsScope, func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := g(cc).DeleteWaitGroup(ctx, &pb.DeleteWaitGroupRequest{NamespaceName: ns, WaitGroupName: "w-none"})
			return err
		}},
		{"GrackleService/CompleteJobsFromWaitGroup", "write", nsScope, func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := g(cc).CompleteJobsFromWaitGroup(ctx, &pb.CompleteJobsFromWaitGroupRequest{NamespaceName: ns, WaitGroupName: "w", Jobs: []*pb.WaitGroupJob{{JobId: "j"}}})
			return err
		}},
		{"GrackleService/ListWaitGroupCompletedJobs", "read", nsScope, func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := g(cc).ListWaitGroupCompletedJobs(ctx, &pb.ListWaitGroupCompletedJobsRequest{NamespaceName: ns, WaitGroupName: "w"})
			return err
		}},
		{"GrackleService/WaitForWaitGroup", "read", nsScope, func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := g(cc).WaitForWaitGroup(ctx, &pb.WaitForWaitGroupRequest{NamespaceName: ns, WaitGroupName: "w"})
			return err
		}},
		{"GrackleService/CreateBarrier", "write", nsScope, func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := g(cc).CreateBarrier(ctx, &pb.CreateBarrierRequest{NamespaceName: ns, BarrierName: "b", ExpectedProcesses: 2})
			return err
		}},
		{"GrackleService/GetBarrier", "read", nsScope, func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := g(cc).GetBarrier(ctx, &pb.GetBarrierRequest{NamespaceName: ns, BarrierName: "b"})
			return err
		}},
		{"GrackleService/ListBarriers", "read", nsScope, func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := g(cc).ListBarriers(ctx, &pb.ListBarriersRequest{NamespaceName: ns})
			return err
		}},
		{"GrackleService/UpdateBarrier", "write", nsScope, func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := g(cc).UpdateBarrier(ctx, &pb.UpdateBarrierRequest{NamespaceName: ns, BarrierName: "b", ExpectedProcesses: 3, ExpectedVersion: 1})
			return err
		}},
		{"GrackleService/DeleteBarrier", "write", nsScope, func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := g(cc).DeleteBarrier(ctx, &pb.DeleteBarrierRequest{NamespaceName: ns, BarrierName: "b-none"})
			return err
		}},
		{"GrackleService/ArriveAtBarrier", "write", nsScope, func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := g(cc).ArriveAtBarrier(ctx, &pb.ArriveAtBarrierRequest{NamespaceName: ns, BarrierName: "b", ProcessId: "p", ExpectedGeneration: 1})
			return err
		}},
		{"GrackleService/WaitAtBarrier", "read", nsScope, func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := g(cc).WaitAtBarrier(ctx, &pb.WaitAtBarrierRequest{NamespaceName: ns, BarrierName: "b", ExpectedGeneration: 1})
			return err
		}},
		{"GrackleService/ListBarrierParticipants", "read", nsScope, func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := g(cc).ListBarrierParticipants(ctx, &pb.ListBarrierParticipantsRequest{NamespaceName: ns, BarrierName: "b"})
			return err
		}},
		{"ClusterService/GetClusterStatus", "", anyToken, func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := cl(cc).GetClusterStatus(ctx, &pb.GetClusterStatusRequest{})
			return err
		}},
		{"ClusterService/GetNodeInfo", "", anyToken, func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := cl(cc).GetNodeInfo(ctx, &pb.GetNodeInfoRequest{})
			return err
		}},
		{"ClusterService/AddMember", "admin", clusterScope, func(ctx context.Context, cc *grpc.ClientConn) error {
			// A non-voter that never answers: harmless to the quorum.
			_, err := cl(cc).AddMember(ctx, &pb.AddMemberRequest{NodeId: "matrix", RaftAddress: "127.0.0.1:9", GrpcAddress: "127.0.0.1:9"})
			return err
		}},
		{"ClusterService/RemoveMember", "admin", clusterScope, func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := cl(cc).RemoveMember(ctx, &pb.RemoveMemberRequest{NodeId: "nobody"})
			return err
		}},
		{"ClusterService/TransferLeadership", "admin", clusterScope, func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := cl(cc).TransferLeadership(ctx, &pb.TransferLeadershipRequest{NodeId: "nobody"})
			return err
		}},
		{"ClusterService/SaveSnapshot", "admin", clusterScope, func(ctx context.Context, cc *grpc.ClientConn) error {
			return streamFirst(cl(cc).SaveSnapshot(ctx, &pb.SaveSnapshotRequest{}))
		}},
		{"ACLService/Bootstrap", "", open, func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := a(cc).Bootstrap(ctx, &pb.BootstrapRequest{})
			return err
		}},
		// The stream is open; each call on it is checked as its unary call
		// is (internal/mux's tests).
		{"MuxService/Calls", "", open, func(ctx context.Context, cc *grpc.ClientConn) error {
			ctx, cancel := context.WithCancel(ctx)
			defer cancel()
			st, err := pb.NewMuxServiceClient(cc).Calls(ctx)
			if err != nil {
				return err
			}
			_, err = st.Header()
			return err
		}},
		// Internal (a follower's read index), open: see acl/rules.go.
		{"/grackle.peer.v1.PeerService/ReadIndex", "", open, func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := peerpb.NewPeerServiceClient(cc).ReadIndex(ctx, &peerpb.ReadIndexRequest{})
			return err
		}},
		{"/grackle.peer.v1.PeerService/Probe", "", open, func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := peerpb.NewPeerServiceClient(cc).Probe(ctx, &peerpb.ProbeRequest{})
			return err
		}},
		{"ACLService/CreateToken", "admin", nsScope, func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := a(cc).CreateToken(ctx, &pb.CreateTokenRequest{Role: "read", Namespace: ns})
			return err
		}},
		{"ACLService/ListTokens", "admin", clusterScope, func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := a(cc).ListTokens(ctx, &pb.ListTokensRequest{})
			return err
		}},
		{"ACLService/RevokeToken", "admin", clusterScope, func(ctx context.Context, cc *grpc.ClientConn) error {
			_, err := a(cc).RevokeToken(ctx, &pb.RevokeTokenRequest{Id: "tk_nobody"})
			return err
		}},
	}
}

var rank = map[string]int{"read": 1, "write": 2, "admin": 3}

// Every RPC x every role x a token on the matching namespace, on another
// namespace and on "*", plus no token and an unknown one: each answers
// with its expected code, a refusal naming the role needed and the
// namespace.
//
// Every call is made to the leader and to a follower: the follower
// forwards most, and checks itself what it serves or relays on its own
// (GetClusterStatus, GetNodeInfo, ListSemaphoreWaiters and the
// WatchSemaphore and SaveSnapshot streams), against its replicated tokens.
func TestACLMatrix(t *testing.T) {
	c, root := aclCluster(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 240*time.Second)
	defer cancel()
	var leaderIdx, followerIdx int
	withToken(t, c, root, func() { leaderIdx = c.WaitLeader(); followerIdx = c.Follower() })
	admin := pb.NewACLServiceClient(c.Conn(leaderIdx))
	// The setup is asked again through an election (two voters under
	// load): an extra namespace or token changes nothing below.
	if err := answered(t, "CreateNamespace ns2", func() error {
		_, err := pb.NewGrackleServiceClient(c.Conn(leaderIdx)).CreateNamespace(tokenCtx(ctx, root), &pb.CreateNamespaceRequest{Name: "ns2"})
		if status.Code(err) == codes.AlreadyExists {
			return nil
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	type tok = matrixToken
	var toks []tok
	for _, role := range []string{"read", "write", "admin"} {
		for _, ns := range []string{"ns1", "ns2", "*"} {
			var r *pb.CreateTokenResponse
			if err := answered(t, "CreateToken", func() (err error) {
				r, err = admin.CreateToken(tokenCtx(ctx, root), &pb.CreateTokenRequest{Role: role, Namespace: ns, Description: role + " " + ns})
				return err
			}); err != nil {
				t.Fatal(err)
			}
			toks = append(toks, tok{role, ns, r.Secret})
		}
	}
	// The follower decides its own calls with the tokens it applied.
	for _, k := range toks {
		servertest.Eventually(t, "the follower applies the tokens", 20*time.Second, func() bool {
			_, ok := c.Nodes[followerIdx].FSM.TokenBySecretHash(sha256.Sum256([]byte(k.secret)))
			return ok
		})
	}
	rpcs := matrixRPCs()
	listed := map[string]bool{}
	for _, m := range acl.Methods() {
		listed[m] = true
	}
	for _, r := range rpcs {
		full := r.method
		if !strings.HasPrefix(full, "/") {
			full = "/grackle.v1." + full
		}
		if !listed[full] {
			t.Errorf("%s has no access rule", r.method)
		}
		delete(listed, full)
	}
	for m := range listed {
		t.Errorf("the matrix does not cover %s", m)
	}
	for _, svc := range []string{"grackle.v1.GrackleService", "grackle.v1.ClusterService", "grackle.v1.ACLService"} {
		_ = svc // every method of the services has a rule: checked against acl.Methods above
	}

	for _, node := range []struct {
		role string
		i    int
	}{{"leader", leaderIdx}, {"follower", followerIdx}} {
		matrixOn(t, ctx, c.Conn(node.i), node.role, rpcs, toks)
	}

	// Health and reflection stay open.
	cc := c.Conn(followerIdx)
	if _, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatalf("health without a token: %v", err)
	}
	rs, err := reflectionpb.NewServerReflectionClient(cc).ServerReflectionInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := rs.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}); err != nil {
		t.Fatal(err)
	}
	if _, err := rs.Recv(); err != nil {
		t.Fatalf("reflection without a token: %v", err)
	}
}

type matrixToken struct{ role, ns, secret string }

// answered runs call until it answers other than Unavailable (which
// decides nothing: an election under load), generously, and returns that.
func answered(t *testing.T, what string, call func() error) error {
	t.Helper()
	var err error
	deadline := time.Now().Add(30 * time.Second)
	for {
		if err = call(); status.Code(err) != codes.Unavailable {
			return err
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still Unavailable after 30s: %v", what, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// matrixOn makes every call of rpcs to one node with every token.
func matrixOn(t *testing.T, ctx context.Context, cc *grpc.ClientConn, node string, rpcs []matrixRPC, toks []matrixToken) {
	t.Helper()
	type tok = matrixToken
	for _, r := range rpcs {
		// Tokens: each role x scope; then none; then an unknown secret.
		cases := append([]tok{}, toks...)
		cases = append(cases, tok{role: "none"}, tok{role: "unknown", secret: "grk_not_a_token"})
		for _, k := range cases {
			// Unavailable decides nothing (an election under load): ask
			// again until the node answers.
			var err error
			if r.scope == open {
				// No token decides: any answer but a refusal (ReadIndex
				// answers only on the leader).
				err = r.call(tokenCtx(ctx, k.secret), cc)
			} else {
				err = answered(t, fmt.Sprintf("%s to the %s as %s on %q", r.method, node, k.role, k.ns), func() error { return r.call(tokenCtx(ctx, k.secret), cc) })
			}
			code := status.Code(err)
			var want string // "allow", or the code
			switch {
			case r.scope == open:
				want = "allow"
			case k.secret == "" || k.role == "unknown":
				want = codes.Unauthenticated.String()
			case r.scope == anyToken:
				want = "allow"
			case rank[k.role] >= rank[r.role] && (k.ns == "*" || (r.scope == nsScope && k.ns == "ns1")):
				want = "allow"
			default:
				want = codes.PermissionDenied.String()
			}
			name := fmt.Sprintf("%s to the %s as %s on %q", r.method, node, k.role, k.ns)
			if want == "allow" {
				if code == codes.Unauthenticated || code == codes.PermissionDenied {
					t.Errorf("%s: refused (%v), want admitted", name, err)
				}
				continue
			}
			if code.String() != want {
				t.Errorf("%s: %v, want %s", name, err, want)
				continue
			}
			if code == codes.PermissionDenied {
				info := errorInfo(err)
				wantNS := "ns1"
				if r.scope == clusterScope {
					wantNS = "*"
				}
				if info == nil || info.Metadata["role"] != r.role || info.Metadata["namespace"] != wantNS {
					t.Errorf("%s: %v does not name role %s and namespace %s", name, err, r.role, wantNS)
				}
			}
		}
	}
}

func errorInfo(err error) *errdetails.ErrorInfo {
	for _, d := range status.Convert(err).Details() {
		if ei, ok := d.(*errdetails.ErrorInfo); ok {
			return ei
		}
	}
	return nil
}

// A follower forwards the caller's token and the leader decides; a
// revoked token is refused through every node once the revoke committed.
func TestACLForwardingAndRevocation(t *testing.T) {
	c, root := aclCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var f int
	withToken(t, c, root, func() { c.WaitLeader(); f = c.Follower() })
	fc := c.Conn(f)
	if _, err := pb.NewGrackleServiceClient(fc).CreateNamespace(tokenCtx(ctx, root), &pb.CreateNamespaceRequest{Name: "ns1"}); err != nil {
		t.Fatalf("admin through follower: %v", err)
	}
	w, err := pb.NewACLServiceClient(fc).CreateToken(tokenCtx(ctx, root), &pb.CreateTokenRequest{Role: "write", Namespace: "ns1"})
	if err != nil {
		t.Fatal(err)
	}
	api := pb.NewGrackleServiceClient(fc)
	if _, err := api.CreateSemaphore(tokenCtx(ctx, w.Secret), &pb.CreateSemaphoreRequest{NamespaceName: "ns1", SemaphoreName: "s", Permits: 1}); err != nil {
		t.Fatalf("write token through follower: %v", err)
	}
	if _, err := api.DeleteNamespace(tokenCtx(ctx, w.Secret), &pb.DeleteNamespaceRequest{NamespaceName: "ns1"}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("write token deleting a namespace through a follower: %v, want PermissionDenied", err)
	}
	if _, err := api.GetSemaphore(ctx, &pb.GetSemaphoreRequest{NamespaceName: "ns1", SemaphoreName: "s"}); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("no token through a follower: %v, want Unauthenticated", err)
	}

	// Secrets never listed.
	list, err := pb.NewACLServiceClient(fc).ListTokens(tokenCtx(ctx, root), &pb.ListTokensRequest{})
	if err != nil || len(list.Tokens) != 2 {
		t.Fatalf("list: %v %v", list, err)
	}
	for _, tk := range list.Tokens {
		if s := tk.String(); containsAny(s, root, w.Secret) {
			t.Fatalf("ListTokens shows a secret: %s", s)
		}
	}

	if _, err := pb.NewACLServiceClient(fc).RevokeToken(tokenCtx(ctx, root), &pb.RevokeTokenRequest{Id: w.Token.Id}); err != nil {
		t.Fatal(err)
	}
	// Committed: the leader decides every forwarded call at once.
	for i := range c.Nodes {
		_, err := pb.NewGrackleServiceClient(c.Conn(i)).GetSemaphore(tokenCtx(ctx, w.Secret), &pb.GetSemaphoreRequest{NamespaceName: "ns1", SemaphoreName: "s"})
		if status.Code(err) != codes.Unauthenticated {
			t.Fatalf("revoked token through node %d: %v, want Unauthenticated", i, err)
		}
	}
	// The calls each node answers itself see it once applied there.
	for i := range c.Nodes {
		servertest.Eventually(t, fmt.Sprintf("node %d refuses the revoked token", i), 20*time.Second, func() bool {
			_, err := pb.NewClusterServiceClient(c.Conn(i)).GetClusterStatus(tokenCtx(ctx, w.Secret), &pb.GetClusterStatusRequest{})
			return status.Code(err) == codes.Unauthenticated
		})
	}
}

func containsAny(s string, subs ...string) bool {
	for _, x := range subs {
		if x != "" && len(s) >= len(x) && strings.Contains(s, x) {
			return true
		}
	}
	return false
}

// A node whose state lacks a token the log holds (here one that has not
// joined yet: empty state, no leader; a lagging follower is the same) does
// not decide the calls it relays to the leader: it answers NOT_LEADER, as
// without access control, never "token unknown". Found by the
// fault-injection suite with -secure: a follower forwarded to the address
// of a removed leader, where a wiped node was starting.
func TestACLRelayedCallsLeftToTheLeader(t *testing.T) {
	c, root := aclCluster(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var f int
	withToken(t, c, root, func() { c.WaitLeader(); f = c.Follower() })
	g := pb.NewGrackleServiceClient(c.Conn(f))
	if _, err := g.CreateNamespace(tokenCtx(ctx, root), &pb.CreateNamespaceRequest{Name: "ns1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := g.CreateSemaphore(tokenCtx(ctx, root), &pb.CreateSemaphoreRequest{NamespaceName: "ns1", SemaphoreName: "s", Permits: 1}); err != nil {
		t.Fatal(err)
	}
	rd, err := pb.NewACLServiceClient(c.Conn(f)).CreateToken(tokenCtx(ctx, root), &pb.CreateTokenRequest{Role: "read", Namespace: "ns1"})
	if err != nil {
		t.Fatal(err)
	}
	waiters := func(cc *grpc.ClientConn, secret string) error {
		_, err := pb.NewGrackleServiceClient(cc).ListSemaphoreWaiters(tokenCtx(ctx, secret), &pb.ListSemaphoreWaitersRequest{NamespaceName: "ns1", SemaphoreName: "s"})
		return err
	}
	watch := func(cc *grpc.ClientConn, secret string) error {
		return streamFirst(pb.NewGrackleServiceClient(cc).WatchSemaphore(tokenCtx(ctx, secret), &pb.WatchSemaphoreRequest{NamespaceName: "ns1", SemaphoreName: "s"}))
	}

	// Through the follower: the leader decides, both ways.
	for name, call := range map[string]func(*grpc.ClientConn, string) error{"ListSemaphoreWaiters": waiters, "WatchSemaphore": watch} {
		servertest.Eventually(t, name+" with the read token through the follower", 20*time.Second, func() bool {
			return call(c.Conn(f), rd.Secret) == nil
		})
		for _, bad := range []string{"", "grk_not_a_token"} {
			if err := call(c.Conn(f), bad); status.Code(err) != codes.Unauthenticated {
				t.Errorf("%s with token %q through the follower: %v, want Unauthenticated", name, bad, err)
			}
		}
	}

	// A node that knows no token yet.
	cfg := servertest.Config(t, "stray")
	cfg.ACL, cfg.Join = true, "127.0.0.1:1" // never reachable: it stays out of the cluster
	c.StartNode(cfg)
	stray := c.Conn(len(c.Nodes) - 1)
	for name, call := range map[string]func(*grpc.ClientConn, string) error{"ListSemaphoreWaiters": waiters, "WatchSemaphore": watch} {
		err := call(stray, rd.Secret)
		if info := errorInfo(err); status.Code(err) != codes.Unavailable || info == nil || info.Reason != "NOT_LEADER" {
			t.Errorf("%s with a valid token on a node that does not know it yet: %v (%v), want Unavailable NOT_LEADER", name, err, info)
		}
	}
}

// A follower decides by itself, against the tokens it applied, the calls
// it answers on its own (GetClusterStatus, GetNodeInfo) and SaveSnapshot,
// which it checks before relaying: with the leader gone (so no leader can
// decide for it), it still refuses no token, a revoked token and a token
// of another scope, and admits the others (a relay then finds no leader).
// ListSemaphoreWaiters and WatchSemaphore are the leader's to decide
// (TestACLRelayedCallsLeftToTheLeader): without one, every token gets
// NOT_LEADER.
func TestACLFollowerChecksItself(t *testing.T) {
	c, root := aclCluster(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// The setup is asked again through an election (two voters under
	// load), through either node (a follower forwards).
	setup := func(what string, call func(cc *grpc.ClientConn) error) {
		t.Helper()
		err := answered(t, what, func() error { return call(c.Conn(0)) })
		if code := status.Code(err); code != codes.OK && code != codes.AlreadyExists && code != codes.NotFound {
			t.Fatalf("%s: %v", what, err)
		}
	}
	setup("CreateNamespace", func(cc *grpc.ClientConn) error {
		_, err := pb.NewGrackleServiceClient(cc).CreateNamespace(tokenCtx(ctx, root), &pb.CreateNamespaceRequest{Name: "ns1"})
		return err
	})
	setup("CreateSemaphore", func(cc *grpc.ClientConn) error {
		_, err := pb.NewGrackleServiceClient(cc).CreateSemaphore(tokenCtx(ctx, root), &pb.CreateSemaphoreRequest{NamespaceName: "ns1", SemaphoreName: "s", Permits: 1})
		return err
	})
	mk := func(role, ns string) *pb.CreateTokenResponse {
		var r *pb.CreateTokenResponse
		setup("CreateToken", func(cc *grpc.ClientConn) (err error) {
			r, err = pb.NewACLServiceClient(cc).CreateToken(tokenCtx(ctx, root), &pb.CreateTokenRequest{Role: role, Namespace: ns})
			return err
		})
		return r
	}
	read, other, admin, revokedRead, revokedAdmin := mk("read", "ns1"), mk("read", "ns2"), mk("admin", "*"), mk("read", "ns1"), mk("admin", "*")
	for _, r := range []*pb.CreateTokenResponse{revokedRead, revokedAdmin} {
		setup("RevokeToken", func(cc *grpc.ClientConn) error { // NotFound: an earlier try revoked it
			_, err := pb.NewACLServiceClient(cc).RevokeToken(tokenCtx(ctx, root), &pb.RevokeTokenRequest{Id: r.Token.Id})
			return err
		})
	}
	var l, f int
	withToken(t, c, root, func() { l = c.WaitLeader(); f = c.Follower() })
	has := func(r *pb.CreateTokenResponse) bool {
		_, ok := c.Nodes[f].FSM.TokenBySecretHash(sha256.Sum256([]byte(r.Secret)))
		return ok
	}
	servertest.Eventually(t, "the follower applies the tokens and the revokes", 20*time.Second, func() bool {
		return has(read) && has(other) && has(admin) && !has(revokedRead) && !has(revokedAdmin)
	})
	c.StopNode(l)

	fc := c.Conn(f)
	calls := []struct {
		name  string
		role  string // "" any token
		call  func(ctx context.Context) error
		local bool // answered by the follower itself (else relayed: no leader)
		// leaderDecides: relayed unchecked, so NOT_LEADER for any token.
		leaderDecides bool
	}{
		{"GetClusterStatus", "", func(ctx context.Context) error {
			_, err := pb.NewClusterServiceClient(fc).GetClusterStatus(ctx, &pb.GetClusterStatusRequest{})
			return err
		}, true, false},
		{"GetNodeInfo", "", func(ctx context.Context) error {
			_, err := pb.NewClusterServiceClient(fc).GetNodeInfo(ctx, &pb.GetNodeInfoRequest{})
			return err
		}, true, false},
		{"ListSemaphoreWaiters", "read", func(ctx context.Context) error {
			_, err := pb.NewGrackleServiceClient(fc).ListSemaphoreWaiters(ctx, &pb.ListSemaphoreWaitersRequest{NamespaceName: "ns1", SemaphoreName: "s"})
			return err
		}, false, true},
		{"WatchSemaphore", "read", func(ctx context.Context) error {
			return streamFirst(pb.NewGrackleServiceClient(fc).WatchSemaphore(ctx, &pb.WatchSemaphoreRequest{NamespaceName: "ns1", SemaphoreName: "s"}))
		}, false, true},
		{"SaveSnapshot", "admin", func(ctx context.Context) error {
			return streamFirst(pb.NewClusterServiceClient(fc).SaveSnapshot(ctx, &pb.SaveSnapshotRequest{}))
		}, false, false},
	}
	for _, k := range []struct {
		name, secret, role string
	}{{"no token", "", ""}, {"revoked read", revokedRead.Secret, ""}, {"revoked admin", revokedAdmin.Secret, ""},
		{"read on ns2", other.Secret, "read-other"}, {"read on ns1", read.Secret, "read"}, {"admin", admin.Secret, "admin"}} {
		for _, cl := range calls {
			err := cl.call(tokenCtx(ctx, k.secret))
			var want codes.Code
			switch {
			case cl.leaderDecides:
				want = codes.Unavailable
			case k.role == "":
				want = codes.Unauthenticated
			case cl.role == "" && cl.local:
				want = codes.OK
			case cl.role == "admin" && k.role != "admin", cl.role == "read" && k.role == "read-other":
				want = codes.PermissionDenied
			default:
				want = codes.Unavailable // admitted; no leader to relay to
			}
			// Left to the leader: NOT_LEADER once the follower knows the
			// leader is gone, NOT_SENT while it still tries to reach it.
			if status.Code(err) != want || (cl.leaderDecides && !apierr.ProvesNotSent(err)) {
				t.Errorf("%s to the leaderless follower with %s: %v, want %v", cl.name, k.name, err, want)
			}
		}
	}
}

// A follower forwards its callers' writes to the leader on its one
// multiplexed stream, each call with its caller's token: the leader sees
// one connection from the follower however many clients it serves, and
// still decides each call on the caller's identity.
func TestACLForwardedCallsRideTheStream(t *testing.T) {
	c, root := aclCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var f int
	withToken(t, c, root, func() { c.WaitLeader(); f = c.Follower() })
	api := pb.NewGrackleServiceClient(c.Conn(f))
	if _, err := api.CreateNamespace(tokenCtx(ctx, root), &pb.CreateNamespaceRequest{Name: "ns1"}); err != nil {
		t.Fatalf("admin through follower: %v", err)
	}
	acls := pb.NewACLServiceClient(c.Conn(f))
	w, err := acls.CreateToken(tokenCtx(ctx, root), &pb.CreateTokenRequest{Role: "write", Namespace: "ns1"})
	if err != nil {
		t.Fatal(err)
	}
	r, err := acls.CreateToken(tokenCtx(ctx, root), &pb.CreateTokenRequest{Role: "read", Namespace: "ns1"})
	if err != nil {
		t.Fatal(err)
	}
	// The stream opens on the connection's first call, in the background.
	n := 0
	create := func(secret string) error {
		n++
		_, err := api.CreateSemaphore(tokenCtx(ctx, secret), &pb.CreateSemaphoreRequest{NamespaceName: "ns1", SemaphoreName: fmt.Sprintf("s%d", n), Permits: 1})
		return err
	}
	servertest.Eventually(t, "a forwarded call on the stream", 20*time.Second, func() bool {
		if err := create(w.Secret); err != nil {
			t.Fatalf("write token through follower: %v", err)
		}
		return c.Nodes[f].PeerStreamCalls() > 0
	})
	before := c.Nodes[f].PeerStreamCalls()
	const writes = 10
	for range writes {
		if err := create(w.Secret); err != nil {
			t.Fatalf("write token through follower: %v", err)
		}
	}
	if got := c.Nodes[f].PeerStreamCalls() - before; got < writes {
		t.Fatalf("%d of %d forwarded writes rode the follower's stream", got, writes)
	}
	// Each call is decided on its own token, not on the last one sent.
	for range 3 {
		if err := create(r.Secret); status.Code(err) != codes.PermissionDenied {
			t.Fatalf("read token creating through the follower: %v, want PermissionDenied", err)
		}
		if err := create(""); status.Code(err) != codes.Unauthenticated {
			t.Fatalf("no token through the follower: %v, want Unauthenticated", err)
		}
		if err := create("grk_unknown"); status.Code(err) != codes.Unauthenticated {
			t.Fatalf("an unknown token through the follower: %v, want Unauthenticated", err)
		}
		if err := create(w.Secret); err != nil {
			t.Fatalf("write token after refused calls: %v", err)
		}
	}
}
