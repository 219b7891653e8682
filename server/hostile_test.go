package server_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
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
