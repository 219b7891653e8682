package rpc

import (
	"context"
	"net"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/grackle-coord/grackle/apierr"
	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
)

// Without access control and without --insecure, AddMember takes only
// loopback: members named on loopback, from a caller on loopback. The
// refusal is FailedPrecondition INSECURE_JOIN naming --acl and --insecure.
func TestCheckOpenJoin(t *testing.T) {
	from := func(ip net.IP) context.Context {
		return peer.NewContext(context.Background(), &peer.Peer{Addr: &net.TCPAddr{IP: ip, Port: 50000}})
	}
	local := &pb.AddMemberRequest{NodeId: "n2", RaftAddress: "127.0.0.1:7431", GrpcAddress: "localhost:7430"}
	remoteRaft := &pb.AddMemberRequest{NodeId: "n2", RaftAddress: "10.0.0.2:7421", GrpcAddress: "127.0.0.1:7430"}
	remoteGRPC := &pb.AddMemberRequest{NodeId: "n2", RaftAddress: "127.0.0.1:7431", GrpcAddress: "n2:7420"}
	for _, c := range []struct {
		name          string
		acl, insecure bool
		ctx           context.Context
		req           *pb.AddMemberRequest
		refused       string // a word of the refusal; "" = allowed
	}{
		{"loopback, no peer", false, false, context.Background(), local, ""},
		{"loopback caller", false, false, from(net.IPv4(127, 0, 0, 1)), local, ""},
		{"ipv6 loopback caller", false, false, from(net.IPv6loopback), local, ""},
		{"caller beyond loopback", false, false, from(net.IPv4(10, 0, 0, 9)), local, "the call comes from 10.0.0.9:50000"},
		{"raft address beyond loopback", false, false, from(net.IPv4(127, 0, 0, 1)), remoteRaft, `raft_address "10.0.0.2:7421"`},
		{"grpc address beyond loopback", false, false, context.Background(), remoteGRPC, `grpc_address "n2:7420"`},
		{"with --acl (the token decides)", true, false, from(net.IPv4(10, 0, 0, 9)), remoteRaft, ""},
		{"with --insecure", false, true, from(net.IPv4(10, 0, 0, 9)), remoteRaft, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := &Service{cfg: Config{NodeID: "n1", ACL: c.acl, Insecure: c.insecure}}
			err := s.checkOpenJoin(c.ctx, c.req)
			if c.refused == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if status.Code(err) != codes.FailedPrecondition || apierr.ReasonOf(err) != apierr.InsecureJoin {
				t.Fatalf("got %v, want FailedPrecondition %s", err, apierr.InsecureJoin)
			}
			msg := status.Convert(err).Message()
			for _, w := range []string{c.refused, "--acl", "--insecure", "--join-token"} {
				if !strings.Contains(msg, w) {
					t.Errorf("message lacks %q: %s", w, msg)
				}
			}
		})
	}
}
