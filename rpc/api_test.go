package rpc_test

import (
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"

	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
	"github.com/grackle-coord/grackle/rpc"
	"github.com/grackle-coord/grackle/server/servertest"
)

// The README's tour (a namespace, a semaphore, a lease, acquire, release)
// through real gRPC.
func seedWorkflow(t *testing.T, c pb.GrackleServiceClient) {
	ctx := ctxT(t)
	ns := must(c.CreateNamespace(ctx, &pb.CreateNamespaceRequest{Name: "third_parties"}))
	if ns.Namespace.Version != 1 || ns.Namespace.CreatedAt == 0 {
		t.Fatalf("namespace: %v", ns)
	}
	sem := must(c.CreateSemaphore(ctx, &pb.CreateSemaphoreRequest{NamespaceName: "third_parties", SemaphoreName: "partner_1",
		Description: "Partner 1 API", Permits: 20}))
	if sem.Semaphore.Permits != 20 || sem.Semaphore.LastActivityAt != sem.Semaphore.CreatedAt {
		t.Fatalf("semaphore: %v", sem)
	}
	l := must(c.CreateSemaphoreLease(ctx, &pb.CreateSemaphoreLeaseRequest{NamespaceName: "third_parties", ProcessId: "host-123/pid-4567", TtlSeconds: 60}))
	if !strings.HasPrefix(l.Lease.LeaseId, "ls_") || len(l.Lease.LeaseId) < 23 || l.Lease.ExpiresAt != l.Lease.CreatedAt+60e9 {
		t.Fatalf("lease: %v", l)
	}
	a := must(c.AcquireSemaphore(ctx, &pb.AcquireSemaphoreRequest{NamespaceName: "third_parties", SemaphoreName: "partner_1",
		LeaseId: l.Lease.LeaseId, Weight: 3, TimeoutSeconds: 60}))
	if a.Outcome != pb.AcquireOutcome_ACQUIRE_OUTCOME_ACQUIRED || a.Semaphore.ActiveHolds != 3 || a.Holder.FencingToken == 0 ||
		a.Holder.ProcessId != "host-123/pid-4567" {
		t.Fatalf("acquire: %v", a)
	}
	hs := must(c.ListSemaphoreHolders(ctx, &pb.ListSemaphoreHoldersRequest{NamespaceName: "third_parties", SemaphoreName: "partner_1"}))
	if len(hs.Holders) != 1 || hs.Holders[0].Weight != 3 {
		t.Fatalf("holders: %v", hs)
	}
	r := must(c.ReleaseSemaphore(ctx, &pb.ReleaseSemaphoreRequest{NamespaceName: "third_parties", SemaphoreName: "partner_1", LeaseId: l.Lease.LeaseId}))
	if r.Semaphore.ActiveHolds != 0 || r.Semaphore.ActiveHoldersCount != 0 {
		t.Fatalf("release: %v", r)
	}
	g := must(c.GetSemaphore(ctx, &pb.GetSemaphoreRequest{NamespaceName: "third_parties", SemaphoreName: "partner_1"}))
	if g.Semaphore.ActiveHolds != 0 {
		t.Fatalf("get: %v", g)
	}
	ls := must(c.ListSemaphoreLeases(ctx, &pb.ListSemaphoreLeasesRequest{NamespaceName: "third_parties", ProcessId: "host-123/pid-4567"}))
	if len(ls.Leases) != 1 {
		t.Fatalf("leases: %v", ls)
	}
	must(c.RevokeSemaphoreLease(ctx, &pb.RevokeSemaphoreLeaseRequest{NamespaceName: "third_parties", LeaseId: l.Lease.LeaseId}))
	_, err := c.RevokeSemaphoreLease(ctx, &pb.RevokeSemaphoreLeaseRequest{NamespaceName: "third_parties", LeaseId: l.Lease.LeaseId})
	wantCode(t, err, codes.NotFound)
}

func TestSeedWorkflowSingleNode(t *testing.T) {
	c := startOne(t)
	seedWorkflow(t, c.Client(0))
}

func TestSeedWorkflowThroughFollower(t *testing.T) {
	c := servertest.Start(t, 3, nil)
	f := c.Follower()
	seedWorkflow(t, c.Client(f))
	// The same reads answered by the leader and by a follower agree.
	ctx := ctxT(t)
	a := must(c.Client(f).GetNamespace(ctx, &pb.GetNamespaceRequest{NamespaceName: "third_parties"}))
	b := must(c.Client(c.Leader()).GetNamespace(ctx, &pb.GetNamespaceRequest{NamespaceName: "third_parties"}))
	if a.Namespace.UpdatedAt != b.Namespace.UpdatedAt {
		t.Fatalf("follower %v leader %v", a, b)
	}
}

// A write sent to a follower is forwarded, and the leader's response
// header (the Raft index) reaches the caller through the follower.
func TestForwardedWriteCarriesRaftIndex(t *testing.T) {
	c := servertest.Start(t, 3, nil)
	var hdr metadata.MD
	must(c.Client(c.Follower()).CreateNamespace(ctxT(t), &pb.CreateNamespaceRequest{Name: "fwd"}, grpc.Header(&hdr)))
	if v := hdr.Get(rpc.RaftIndexKey); len(v) != 1 || v[0] == "" || v[0] == "0" {
		t.Fatalf("header %s = %v", rpc.RaftIndexKey, v)
	}
}
