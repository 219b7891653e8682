package server_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
	"github.com/grackle-coord/grackle/rpc"
	"github.com/grackle-coord/grackle/server/servertest"
)

func wantInvalid(t *testing.T, what string, err error, field string) {
	t.Helper()
	if status.Code(err) != codes.InvalidArgument || !strings.HasPrefix(status.Convert(err).Message(), field+":") {
		t.Fatalf("%s: %v, want InvalidArgument naming %s", what, err, field)
	}
}

// AddMember refuses what is not a member: ids that are not names,
// addresses that are not host:port, and an existing id with other
// addresses (it used to rewrite the member's gRPC address silently).
func TestAddMemberInputIsValidated(t *testing.T) {
	c := servertest.Start(t, 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl := c.ClusterClient(0)
	self := c.Nodes[0]
	for _, tc := range []struct {
		req   *pb.AddMemberRequest
		field string
	}{
		{&pb.AddMemberRequest{NodeId: "n\x00\n", RaftAddress: "127.0.0.1:1", GrpcAddress: "127.0.0.1:2"}, "node_id"},
		{&pb.AddMemberRequest{NodeId: "n9", RaftAddress: "not an address", GrpcAddress: "127.0.0.1:2"}, "raft_address"},
		{&pb.AddMemberRequest{NodeId: "n9", RaftAddress: "127.0.0.1:0", GrpcAddress: "127.0.0.1:2"}, "raft_address"},
		{&pb.AddMemberRequest{NodeId: "n9", RaftAddress: "127.0.0.1:1", GrpcAddress: "javascript:alert(1)"}, "grpc_address"},
		{&pb.AddMemberRequest{NodeId: "n9", RaftAddress: "127.0.0.1:1", GrpcAddress: "evil host:80"}, "grpc_address"},
	} {
		_, err := cl.AddMember(ctx, tc.req)
		wantInvalid(t, tc.req.String(), err, tc.field)
	}
	_, err := cl.AddMember(ctx, &pb.AddMemberRequest{NodeId: "node1", RaftAddress: self.RaftAddr(), GrpcAddress: "127.0.0.1:6666"})
	if status.Code(err) != codes.AlreadyExists {
		t.Fatalf("existing id with another gRPC address: %v, want AlreadyExists", err)
	}
	if _, err := cl.AddMember(ctx, &pb.AddMemberRequest{NodeId: "node1", RaftAddress: self.RaftAddr(), GrpcAddress: self.GRPCAddr(), Voter: true}); err != nil {
		t.Fatalf("existing id with its own addresses (a join retried): %v", err)
	}
	ms := self.FSM.Members()
	if len(ms) != 1 || ms[0].GRPCAddress != self.GRPCAddr() {
		t.Fatalf("members changed: %+v", ms)
	}
	_, err = cl.RemoveMember(ctx, &pb.RemoveMemberRequest{NodeId: "a\nb"})
	wantInvalid(t, "RemoveMember", err, "node_id")
}

// process_id must be printable: Unicode separators, bidi overrides and
// zero-width spaces are refused naming the field.
func TestProcessIDMustBePrintable(t *testing.T) {
	c := servertest.Start(t, 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	api := c.Client(0)
	if _, err := api.CreateNamespace(ctx, &pb.CreateNamespaceRequest{Name: "ns"}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"host\u2028pid", "host\u202epid", "host\u200bpid"} {
		_, err := api.CreateSemaphoreLease(ctx, &pb.CreateSemaphoreLeaseRequest{NamespaceName: "ns", ProcessId: p, TtlSeconds: 30})
		wantInvalid(t, "CreateSemaphoreLease "+p, err, "process_id")
		_, err = api.ListSemaphoreLeases(ctx, &pb.ListSemaphoreLeasesRequest{NamespaceName: "ns", ProcessId: p})
		wantInvalid(t, "ListSemaphoreLeases "+p, err, "process_id")
	}
	if _, err := api.CreateSemaphoreLease(ctx, &pb.CreateSemaphoreLeaseRequest{NamespaceName: "ns", ProcessId: "host-123/pid 4567 é", TtlSeconds: 30}); err != nil {
		t.Fatalf("a printable process_id: %v", err)
	}
}

// Leadership transfers through one node: one at a time, at most one per
// rpc.MinTransferInterval.
func TestTransferLeadershipIsRateLimited(t *testing.T) {
	c := servertest.Start(t, 3, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	l := c.WaitLeader()
	id := func(i int) string { return c.Cfgs[i].NodeID }
	other := (l + 1) % 3
	sent := time.Now()
	if _, err := c.ClusterClient(l).TransferLeadership(ctx, &pb.TransferLeadershipRequest{NodeId: id(other)}); err != nil {
		t.Fatal(err)
	}
	answered := time.Now()
	servertest.Eventually(t, "the new leader", 20*time.Second, func() bool { return c.Nodes[other].IsLeader() })
	c.WaitLeader()
	// Back to the first leader, which transferred moments ago.
	if _, err := c.ClusterClient(other).TransferLeadership(ctx, &pb.TransferLeadershipRequest{NodeId: id(l)}); err != nil {
		t.Fatal(err)
	}
	servertest.Eventually(t, "the first leader back", 20*time.Second, func() bool { return c.Nodes[l].IsLeader() })
	c.WaitLeader()
	before := time.Now()
	_, err := c.ClusterClient(l).TransferLeadership(ctx, &pb.TransferLeadershipRequest{NodeId: id(other)})
	after := time.Now()
	// The node stamped its first transfer between sent and answered.
	switch {
	case after.Sub(sent) < rpc.MinTransferInterval:
		if status.Code(err) != codes.FailedPrecondition {
			t.Fatalf("a second transfer through the same node within the interval: %v, want FailedPrecondition", err)
		}
	case before.Sub(answered) >= rpc.MinTransferInterval:
		if err != nil {
			t.Fatalf("a transfer after the interval: %v", err)
		}
	default:
		t.Logf("the machine was too slow to tell (%v since the first transfer); not checked", after.Sub(sent))
	}
}
