package rpc_test

import (
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
	"github.com/grackle-coord/grackle/server/servertest"
)

// everyRPC drives every GrackleService and ClusterService call, valid and
// invalid, through c, and returns a transcript of what each answered
// (codes and the fields that do not depend on timing), so that two nodes
// can be compared.
func everyRPC(t *testing.T, c pb.GrackleServiceClient, cc pb.ClusterServiceClient) []string {
	ctx := ctxT(t)
	var out []string
	note := func(what string, err error, detail string) {
		out = append(out, what+": "+status.Code(err).String()+" "+detail)
	}
	_, err := c.CreateNamespace(ctx, &pb.CreateNamespaceRequest{Name: "e", Description: "d", Metadata: map[string]string{"team": "x"}})
	note("CreateNamespace", err, "")
	_, err = c.CreateNamespace(ctx, &pb.CreateNamespaceRequest{Name: "e"})
	note("CreateNamespace again", err, "")
	_, err = c.CreateNamespace(ctx, &pb.CreateNamespaceRequest{Name: "bad name"})
	note("CreateNamespace bad name", err, "")
	if !strings.Contains(status.Convert(err).Message(), "name") {
		t.Fatalf("error does not name the field: %v", err)
	}
	g, err := c.GetNamespace(ctx, &pb.GetNamespaceRequest{NamespaceName: "e"})
	note("GetNamespace", err, g.GetNamespace().GetMetadata()["team"])
	_, err = c.GetNamespace(ctx, &pb.GetNamespaceRequest{NamespaceName: "nope"})
	note("GetNamespace missing", err, "")
	u, err := c.UpdateNamespace(ctx, &pb.UpdateNamespaceRequest{NamespaceName: "e", Description: "d2", ExpectedVersion: 1})
	note("UpdateNamespace", err, u.GetNamespace().GetDescription())
	_, err = c.UpdateNamespace(ctx, &pb.UpdateNamespaceRequest{NamespaceName: "e", ExpectedVersion: 1})
	note("UpdateNamespace stale version", err, status.Convert(err).Message())
	ln, err := c.ListNamespaces(ctx, &pb.ListNamespacesRequest{Limit: 1})
	note("ListNamespaces", err, strings.Repeat("+", len(ln.GetNamespaces())))
	_, err = c.ListNamespaces(ctx, &pb.ListNamespacesRequest{Limit: 251})
	note("ListNamespaces limit 251", err, "")
	_, err = c.ListNamespaces(ctx, &pb.ListNamespacesRequest{PaginationToken: "!!"})
	note("ListNamespaces bad token", err, "")

	_, err = c.CreateSemaphore(ctx, &pb.CreateSemaphoreRequest{NamespaceName: "e", SemaphoreName: "s", Permits: 2})
	note("CreateSemaphore", err, "")
	_, err = c.CreateSemaphore(ctx, &pb.CreateSemaphoreRequest{NamespaceName: "e", SemaphoreName: "z", Permits: 0})
	note("CreateSemaphore permits 0", err, "")
	_, err = c.CreateSemaphore(ctx, &pb.CreateSemaphoreRequest{NamespaceName: "nope", SemaphoreName: "s", Permits: 1})
	note("CreateSemaphore no namespace", err, "")
	gs, err := c.GetSemaphore(ctx, &pb.GetSemaphoreRequest{NamespaceName: "e", SemaphoreName: "s"})
	note("GetSemaphore", err, strings.Repeat("#", int(gs.GetSemaphore().GetPermits())))
	ls, err := c.ListSemaphores(ctx, &pb.ListSemaphoresRequest{NamespaceName: "e"})
	note("ListSemaphores", err, strings.Repeat("+", len(ls.GetSemaphores())))

	l, err := c.CreateSemaphoreLease(ctx, &pb.CreateSemaphoreLeaseRequest{NamespaceName: "e", ProcessId: "p", TtlSeconds: 60})
	note("CreateSemaphoreLease", err, "")
	_, err = c.CreateSemaphoreLease(ctx, &pb.CreateSemaphoreLeaseRequest{NamespaceName: "e", ProcessId: "p", TtlSeconds: 301})
	note("CreateSemaphoreLease ttl 301", err, "")
	id := l.GetLease().GetLeaseId()
	gl, err := c.GetSemaphoreLease(ctx, &pb.GetSemaphoreLeaseRequest{NamespaceName: "e", LeaseId: id})
	note("GetSemaphoreLease", err, gl.GetLease().GetProcessId())
	rl, err := c.RefreshSemaphoreLease(ctx, &pb.RefreshSemaphoreLeaseRequest{NamespaceName: "e", LeaseId: id, TtlSeconds: 120})
	note("RefreshSemaphoreLease", err, "")
	if err == nil && rl.Lease.ExpiresAt <= gl.GetLease().GetExpiresAt() {
		t.Fatalf("refresh did not extend: %v -> %v", gl, rl)
	}
	lls, err := c.ListSemaphoreLeases(ctx, &pb.ListSemaphoreLeasesRequest{NamespaceName: "e", ProcessId: "p"})
	note("ListSemaphoreLeases", err, strings.Repeat("+", len(lls.GetLeases())))

	a, err := c.AcquireSemaphore(ctx, &pb.AcquireSemaphoreRequest{NamespaceName: "e", SemaphoreName: "s", LeaseId: id, Weight: 2})
	note("AcquireSemaphore", err, a.GetOutcome().String())
	_, err = c.AcquireSemaphore(ctx, &pb.AcquireSemaphoreRequest{NamespaceName: "e", SemaphoreName: "s", LeaseId: id, Weight: 3})
	note("AcquireSemaphore weight > permits", err, status.Convert(err).Message())
	_, err = c.AcquireSemaphore(ctx, &pb.AcquireSemaphoreRequest{NamespaceName: "e", SemaphoreName: "s", LeaseId: id, Weight: 1, TimeoutSeconds: 301})
	note("AcquireSemaphore timeout 301", err, "")
	_, err = c.UpdateSemaphore(ctx, &pb.UpdateSemaphoreRequest{NamespaceName: "e", SemaphoreName: "s", Permits: 1, ExpectedVersion: 1})
	note("UpdateSemaphore below holds", err, "")
	us, err := c.UpdateSemaphore(ctx, &pb.UpdateSemaphoreRequest{NamespaceName: "e", SemaphoreName: "s", Permits: 3, ExpectedVersion: 1})
	note("UpdateSemaphore", err, strings.Repeat("#", int(us.GetSemaphore().GetPermits())))
	h, err := c.ListSemaphoreHolders(ctx, &pb.ListSemaphoreHoldersRequest{NamespaceName: "e", SemaphoreName: "s"})
	note("ListSemaphoreHolders", err, strings.Repeat("+", len(h.GetHolders())))
	r, err := c.ReleaseSemaphore(ctx, &pb.ReleaseSemaphoreRequest{NamespaceName: "e", SemaphoreName: "s", LeaseId: id})
	note("ReleaseSemaphore", err, strings.Repeat("#", int(r.GetSemaphore().GetActiveHolds())))
	_, err = c.ReleaseSemaphore(ctx, &pb.ReleaseSemaphoreRequest{NamespaceName: "e", SemaphoreName: "s", LeaseId: id})
	note("ReleaseSemaphore again", err, "")
	_, err = c.RevokeSemaphoreLease(ctx, &pb.RevokeSemaphoreLeaseRequest{NamespaceName: "e", LeaseId: id})
	note("RevokeSemaphoreLease", err, "")
	_, err = c.RevokeSemaphoreLease(ctx, &pb.RevokeSemaphoreLeaseRequest{NamespaceName: "e", LeaseId: id})
	note("RevokeSemaphoreLease again", err, "")
	_, err = c.DeleteSemaphore(ctx, &pb.DeleteSemaphoreRequest{NamespaceName: "e", SemaphoreName: "s"})
	note("DeleteSemaphore", err, "")
	_, err = c.DeleteSemaphore(ctx, &pb.DeleteSemaphoreRequest{NamespaceName: "e", SemaphoreName: "s"})
	note("DeleteSemaphore missing", err, "")
	_, err = c.DeleteNamespace(ctx, &pb.DeleteNamespaceRequest{NamespaceName: "e"})
	note("DeleteNamespace", err, "")
	_, err = c.DeleteNamespace(ctx, &pb.DeleteNamespaceRequest{NamespaceName: "e"})
	note("DeleteNamespace missing", err, "")

	st, err := cc.GetClusterStatus(ctx, &pb.GetClusterStatusRequest{})
	note("GetClusterStatus", err, strings.Repeat("+", len(st.GetMembers())))
	if err == nil && (st.LeaderId == "" || st.LeaderAddress == "" || st.CommitIndex == 0) {
		t.Fatalf("cluster status: %v", st)
	}
	_, err = cc.AddMember(ctx, &pb.AddMemberRequest{NodeId: "x"})
	note("AddMember missing addresses", err, "")
	_, err = cc.RemoveMember(ctx, &pb.RemoveMemberRequest{NodeId: "nobody"})
	note("RemoveMember unknown", err, "")
	return out
}

// Every RPC answers the same on a single node and through a follower of a
// three-node cluster (which forwards to the leader).
func TestEveryRPCSingleNodeAndFollower(t *testing.T) {
	one := startOne(t)
	a := everyRPC(t, one.Client(0), one.ClusterClient(0))
	three := servertest.Start(t, 3, nil)
	f := three.Follower()
	b := everyRPC(t, three.Client(f), three.ClusterClient(f))
	for i := range a {
		// The member count differs by design (1 vs 3 nodes).
		if strings.HasPrefix(a[i], "GetClusterStatus") {
			continue
		}
		if a[i] != b[i] {
			t.Errorf("single node %q, follower %q", a[i], b[i])
		}
	}
	want := map[string]codes.Code{"CreateNamespace again": codes.AlreadyExists, "CreateNamespace bad name": codes.InvalidArgument,
		"GetNamespace missing": codes.NotFound, "UpdateNamespace stale version": codes.InvalidArgument,
		"ListNamespaces limit 251": codes.InvalidArgument, "ListNamespaces bad token": codes.InvalidArgument,
		"CreateSemaphore permits 0": codes.InvalidArgument, "CreateSemaphore no namespace": codes.NotFound,
		"CreateSemaphoreLease ttl 301": codes.InvalidArgument, "AcquireSemaphore weight > permits": codes.InvalidArgument,
		"AcquireSemaphore timeout 301": codes.InvalidArgument, "UpdateSemaphore below holds": codes.FailedPrecondition,
		"ReleaseSemaphore again": codes.OK, "RevokeSemaphoreLease again": codes.NotFound, "DeleteSemaphore missing": codes.OK,
		"DeleteNamespace missing": codes.OK, "AddMember missing addresses": codes.InvalidArgument, "RemoveMember unknown": codes.NotFound}
	for _, line := range a {
		name, rest, _ := strings.Cut(line, ": ")
		c, ok := want[name]
		if !ok {
			c = codes.OK
		}
		if !strings.HasPrefix(rest, c.String()+" ") {
			t.Errorf("%s: want %v, got %s", name, c, rest)
		}
	}
	for _, line := range a {
		if strings.HasPrefix(line, "UpdateNamespace stale version") && !strings.Contains(line, "version mismatch") {
			t.Errorf("version mismatch message: %s", line)
		}
		if strings.HasPrefix(line, "AcquireSemaphore weight > permits") && !strings.Contains(line, "weight exceeds semaphore permits") {
			t.Errorf("weight message: %s", line)
		}
	}
}
