package server_test

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grackle-coord/grackle/apierr"
	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
	"github.com/grackle-coord/grackle/server"
	"github.com/grackle-coord/grackle/server/servertest"
)

// A follower that cannot reach the leader says so: Unavailable with
// NOT_SENT (nothing reached the log), naming the leader's id and address
// and the cause, not gRPC's transport text; for forwarded unary calls and
// for the relayed streams and waiter lists.
func TestForwardingToAnUnreachableLeader(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := lis.Addr().String()
	lis.Close()
	// node1 leads and advertises a gRPC address nothing answers: its
	// follower forwards there and fails to connect.
	c := servertest.Start(t, 2, func(cfg *server.Config) {
		if cfg.NodeID == "node1" {
			cfg.AdvertiseGRPC = dead
		}
	})
	if l := c.WaitLeader(); l != 0 {
		t.Skipf("node%d leads, not node1", l+1) // the first node bootstraps alone and leads
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	api := c.Client(1)
	check := func(what string, err error) {
		t.Helper()
		msg := status.Convert(err).Message()
		if status.Code(err) != codes.Unavailable || apierr.ReasonOf(err) != apierr.NotSent {
			t.Errorf("%s: %v (reason %q), want Unavailable NOT_SENT", what, err, apierr.ReasonOf(err))
			return
		}
		if l := apierr.LeaderOf(err); l.ID != "node1" || l.Address != dead {
			t.Errorf("%s: ErrorInfo names leader %+v, want node1 at %s", what, l, dead)
		}
		if !strings.Contains(msg, "could not reach the leader node1 at "+dead) || !strings.Contains(msg, "connection refused") ||
			strings.Contains(msg, "transport:") || strings.Contains(msg, "dial tcp") {
			t.Errorf("%s: message %q should name the leader and the cause, without gRPC's dial text", what, msg)
		}
	}
	_, err = api.CreateNamespace(ctx, &pb.CreateNamespaceRequest{Name: "ns"})
	check("CreateNamespace", err)
	_, err = api.GetNamespace(ctx, &pb.GetNamespaceRequest{NamespaceName: "ns"}) // a follower read: asks the leader's read index
	check("GetNamespace", err)
	_, err = api.ListSemaphoreWaiters(ctx, &pb.ListSemaphoreWaitersRequest{NamespaceName: "ns", SemaphoreName: "s"})
	check("ListSemaphoreWaiters", err)
	check("WatchSemaphore", streamFirst(api.WatchSemaphore(ctx, &pb.WatchSemaphoreRequest{NamespaceName: "ns", SemaphoreName: "s"})))
	check("SaveSnapshot", streamFirst(c.ClusterClient(1).SaveSnapshot(ctx, &pb.SaveSnapshotRequest{})))
}
