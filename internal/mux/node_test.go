package mux_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/grackle-coord/grackle/internal/mux"
	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
	"github.com/grackle-coord/grackle/server/servertest"
)

// On a real node with access control, each call on the stream is checked
// as its unary call is, with the token the stream opened with: allowed,
// refused for its role, and refused once the token is revoked; a write's
// answer carries its Raft index.
func TestNodeChecksEachCallOnTheStream(t *testing.T) {
	c := servertest.New(t)
	cfg := servertest.Config(t, "node1")
	cfg.ACL = true
	node := c.StartNode(cfg)
	servertest.Eventually(t, "a leader", 20*time.Second, node.IsLeader)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var boot *pb.BootstrapResponse
	servertest.Eventually(t, "bootstrap", 20*time.Second, func() bool {
		var err error
		boot, err = pb.NewACLServiceClient(c.Conn(0)).Bootstrap(ctx, &pb.BootstrapRequest{})
		return err == nil
	})
	c.SetToken(boot.Secret)
	g := pb.NewGrackleServiceClient(c.Conn(0))
	if _, err := g.CreateNamespace(ctx, &pb.CreateNamespaceRequest{Name: "ns1"}); err != nil {
		t.Fatal(err)
	}
	wr, err := pb.NewACLServiceClient(c.Conn(0)).CreateToken(ctx, &pb.CreateTokenRequest{Role: "write", Namespace: "ns1"})
	if err != nil {
		t.Fatal(err)
	}

	// The stream opens with the write token (the connection's credentials
	// when it opens); the admin token comes back for the unary calls below.
	c.SetToken(wr.Secret)
	m := mux.NewConn(c.Conn(0))
	defer m.Close()
	mg := pb.NewGrackleServiceClient(m)
	untilStream(t, m, func() error {
		_, err := mg.GetNamespace(ctx, &pb.GetNamespaceRequest{NamespaceName: "ns1"})
		return err
	})
	c.SetToken(boot.Secret)

	var hdr metadata.MD
	before := m.StreamCalls()
	if _, err := mg.CreateSemaphore(ctx, &pb.CreateSemaphoreRequest{NamespaceName: "ns1", SemaphoreName: "s", Permits: 2}, grpc.Header(&hdr)); err != nil {
		t.Fatalf("a write within the token's role: %v", err)
	}
	if len(hdr.Get("grackle-raft-index")) != 1 {
		t.Errorf("a write's header on the stream: %v, want its grackle-raft-index", hdr)
	}
	if _, err := mg.CreateNamespace(ctx, &pb.CreateNamespaceRequest{Name: "ns2"}); status.Code(err) != codes.PermissionDenied {
		t.Errorf("an admin call with a write token: %v, want PermissionDenied", err)
	}
	if m.StreamCalls() != before+2 {
		t.Fatalf("%d of 2 calls went over the stream", m.StreamCalls()-before)
	}
	if _, err := pb.NewACLServiceClient(c.Conn(0)).RevokeToken(ctx, &pb.RevokeTokenRequest{Id: wr.Token.Id}); err != nil {
		t.Fatal(err)
	}
	servertest.Eventually(t, "a call with the revoked token is refused", 20*time.Second, func() bool {
		_, err := mg.GetNamespace(ctx, &pb.GetNamespaceRequest{NamespaceName: "ns1"})
		return status.Code(err) == codes.Unauthenticated
	})
}
