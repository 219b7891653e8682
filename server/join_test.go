package server_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grackle-coord/grackle/apierr"
	"github.com/grackle-coord/grackle/internal/syncbuf"
	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
	"github.com/grackle-coord/grackle/server"
	"github.com/grackle-coord/grackle/server/servertest"
)

// A host name under .invalid (RFC 6761) never resolves: an address beyond
// loopback that no test ever reaches.
const unreachableGRPC = "n9.invalid:7420"

// AddMember of a Raft address another member has is a permanent input
// error naming that member (raft refuses the configuration, which read as
// a retryable Unavailable).
func TestAddMemberRaftAddressInUse(t *testing.T) {
	c := servertest.Start(t, 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	self := c.Nodes[0]
	_, err := c.ClusterClient(0).AddMember(ctx, &pb.AddMemberRequest{NodeId: "n9", RaftAddress: self.RaftAddr(), GrpcAddress: freeAddr(t), Voter: true})
	if status.Code(err) != codes.AlreadyExists || apierr.ReasonOf(err) != apierr.RaftAddressInUse {
		t.Fatalf("AddMember with node1's Raft address: %v, want AlreadyExists %s", err, apierr.RaftAddressInUse)
	}
	if m := apierr.Info(err).GetMetadata()[apierr.KeyMember]; m != "node1" {
		t.Fatalf("member in the metadata: %q, want node1", m)
	}
	if msg := status.Convert(err).Message(); !strings.Contains(msg, `member "node1"`) || !strings.Contains(msg, "raft_address") {
		t.Fatalf("message does not name the field and the member: %s", msg)
	}
	if ms := self.FSM.Members(); len(ms) != 1 {
		t.Fatalf("members changed: %+v", ms)
	}
}

// A member without access control and without --insecure refuses to add
// a node named beyond loopback, whoever asks; the joining node's log
// carries the refusal. With --insecure on the member it is added.
func TestOpenJoinBeyondLoopback(t *testing.T) {
	c := servertest.Start(t, 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := c.ClusterClient(0).AddMember(ctx, &pb.AddMemberRequest{NodeId: "n9", RaftAddress: freeAddr(t), GrpcAddress: unreachableGRPC})
	if status.Code(err) != codes.FailedPrecondition || apierr.ReasonOf(err) != apierr.InsecureJoin {
		t.Fatalf("AddMember beyond loopback: %v, want FailedPrecondition %s", err, apierr.InsecureJoin)
	}
	if ms := c.Nodes[0].FSM.Members(); len(ms) != 1 {
		t.Fatalf("members changed: %+v", ms)
	}

	// A node that joins advertising a gRPC address beyond loopback, with
	// --insecure on its side only: the member refuses it.
	var buf syncbuf.Buffer
	cfg := servertest.Config(t, "node2")
	cfg.Join, cfg.AdvertiseGRPC, cfg.Insecure = c.Nodes[0].GRPCAddr(), unreachableGRPC, true
	cfg.LogLevel = "info"
	j, err := server.Start(cfg, hclog.New(&hclog.LoggerOptions{Output: &buf, Level: hclog.Info}))
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	servertest.Eventually(t, "the joiner to log the member's refusal", 30*time.Second, func() bool {
		return strings.Contains(buf.String(), "runs without access control")
	})
	if !strings.Contains(buf.String(), "--insecure accepts --join") {
		t.Errorf("the joiner did not warn about what --insecure accepted:\n%s", buf.String())
	}
	if ms := c.Nodes[0].FSM.Members(); len(ms) != 1 {
		t.Fatalf("members changed: %+v", ms)
	}
	j.Close()

	// The member with --insecure adds it (then it is removed again).
	ci := servertest.Start(t, 1, func(cfg *server.Config) { cfg.Insecure = true })
	req := &pb.AddMemberRequest{NodeId: "n9", RaftAddress: freeAddr(t), GrpcAddress: unreachableGRPC}
	if _, err := ci.ClusterClient(0).AddMember(ctx, req); err != nil {
		t.Fatalf("AddMember on an --insecure node: %v", err)
	}
	if _, err := ci.ClusterClient(0).RemoveMember(ctx, &pb.RemoveMemberRequest{NodeId: "n9"}); err != nil {
		t.Fatalf("RemoveMember: %v", err)
	}
}
