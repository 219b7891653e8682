package rpc_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/grackle-coord/grackle/apierr"
	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
	"github.com/grackle-coord/grackle/server"
	"github.com/grackle-coord/grackle/server/servertest"
)

// A cluster started with a small --max-state-bytes fills up: past it a
// write that grows the state answers ResourceExhausted STATE_QUOTA, on the
// leader and through a follower, while deletes, releases and revokes still
// work and make room again.
func TestStateQuotaRefusesGrowth(t *testing.T) {
	const quota = 8 << 10
	c := servertest.Start(t, 3, func(cfg *server.Config) { cfg.MaxStateBytes = "8KiB" })
	li := c.Leader()
	api, viaFollower := c.Client(li), c.Client(c.Follower())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if got := c.Nodes[li].FSM.Limits().MaxStateBytes; got != quota {
		t.Fatalf("replicated quota %d, want %d", got, quota)
	}
	must(api.CreateNamespace(ctx, &pb.CreateNamespaceRequest{Name: "q"}))
	must(api.CreateSemaphore(ctx, &pb.CreateSemaphoreRequest{NamespaceName: "q", SemaphoreName: "s", Permits: 5}))
	lease := must(api.CreateSemaphoreLease(ctx, &pb.CreateSemaphoreLeaseRequest{NamespaceName: "q", ProcessId: "p", TtlSeconds: 60})).Lease.LeaseId
	must(api.AcquireSemaphore(ctx, &pb.AcquireSemaphoreRequest{NamespaceName: "q", SemaphoreName: "s", LeaseId: lease, Weight: 1}))

	var err error
	n := 0
	for ; n < 500 && err == nil; n++ {
		_, err = api.CreateNamespace(ctx, &pb.CreateNamespaceRequest{Name: fmt.Sprintf("fill-%03d", n), Description: "filling the state up to its quota"})
	}
	wantReason(t, err, codes.ResourceExhausted, apierr.StateQuota)
	_, err = viaFollower.CreateSemaphore(ctx, &pb.CreateSemaphoreRequest{NamespaceName: "q", SemaphoreName: "s2", Permits: 1})
	wantReason(t, err, codes.ResourceExhausted, apierr.StateQuota)
	_, err = viaFollower.CreateSemaphoreLease(ctx, &pb.CreateSemaphoreLeaseRequest{NamespaceName: "q", ProcessId: "p2", TtlSeconds: 60})
	wantReason(t, err, codes.ResourceExhausted, apierr.StateQuota)

	// Every replica accounts the same size.
	servertest.Eventually(t, "replicas agree on the state size", 20*time.Second, func() bool {
		want := c.Nodes[li].FSM.StateBytes()
		for _, s := range c.Nodes {
			if s.FSM.StateBytes() != want {
				return false
			}
		}
		return want >= quota
	})

	// Releases, revokes and deletes work at the quota and make room.
	must(api.ReleaseSemaphore(ctx, &pb.ReleaseSemaphoreRequest{NamespaceName: "q", SemaphoreName: "s", LeaseId: lease}))
	must(viaFollower.RevokeSemaphoreLease(ctx, &pb.RevokeSemaphoreLeaseRequest{NamespaceName: "q", LeaseId: lease}))
	for i := 0; i < 5; i++ {
		must(api.DeleteNamespace(ctx, &pb.DeleteNamespaceRequest{NamespaceName: fmt.Sprintf("fill-%03d", i)}))
	}
	must(api.CreateSemaphore(ctx, &pb.CreateSemaphoreRequest{NamespaceName: "q", SemaphoreName: "s2", Permits: 1}))
}
