package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
)

// Every acknowledged write survives a SIGKILL of a single node and its
// restart on the same data dir (snapshots included: a low threshold makes
// the node snapshot and compact its log during the run).
func TestSingleNodeRestartAfterSIGKILL(t *testing.T) {
	p := NewCluster(t, 1, "--snapshot-threshold", "50", "--snapshot-interval", "1s", "--trailing-logs", "10")
	p.StartAll()
	p.WaitLeader(0, 20*time.Second)
	cl := pb.NewGrackleServiceClient(p.Dial(0))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := cl.CreateNamespace(ctx, &pb.CreateNamespaceRequest{Name: "ns"}); err != nil {
		t.Fatal(err)
	}
	type hold struct {
		lease, sem string
		token      uint64
	}
	var holds []hold
	for i := 0; i < 60; i++ {
		sem := fmt.Sprintf("s%02d", i)
		if _, err := cl.CreateSemaphore(ctx, &pb.CreateSemaphoreRequest{NamespaceName: "ns", SemaphoreName: sem, Permits: 5}); err != nil {
			t.Fatal(err)
		}
		l, err := cl.CreateSemaphoreLease(ctx, &pb.CreateSemaphoreLeaseRequest{NamespaceName: "ns", ProcessId: "p", TtlSeconds: 300})
		if err != nil {
			t.Fatal(err)
		}
		a, err := cl.AcquireSemaphore(ctx, &pb.AcquireSemaphoreRequest{NamespaceName: "ns", SemaphoreName: sem, LeaseId: l.Lease.LeaseId, Weight: 2})
		if err != nil || a.Outcome != pb.AcquireOutcome_ACQUIRE_OUTCOME_ACQUIRED {
			t.Fatalf("acquire: %v %v", a, err)
		}
		holds = append(holds, hold{l.Lease.LeaseId, sem, a.Holder.FencingToken})
	}
	p.Kill9(0)
	p.Start(0)
	p.WaitLeader(0, 30*time.Second)
	cl = pb.NewGrackleServiceClient(p.Dial(0))
	for _, h := range holds {
		hs, err := cl.ListSemaphoreHolders(ctx, &pb.ListSemaphoreHoldersRequest{NamespaceName: "ns", SemaphoreName: h.sem})
		if err != nil {
			t.Fatal(err)
		}
		if len(hs.Holders) != 1 || hs.Holders[0].LeaseId != h.lease || hs.Holders[0].Weight != 2 || hs.Holders[0].FencingToken != h.token {
			t.Fatalf("after restart %s holders = %v, want lease %s token %d", h.sem, hs.Holders, h.lease, h.token)
		}
	}
	// New tokens keep increasing after the restart.
	l, err := cl.CreateSemaphoreLease(ctx, &pb.CreateSemaphoreLeaseRequest{NamespaceName: "ns", ProcessId: "p", TtlSeconds: 60})
	if err != nil {
		t.Fatal(err)
	}
	a, err := cl.AcquireSemaphore(ctx, &pb.AcquireSemaphoreRequest{NamespaceName: "ns", SemaphoreName: "s00", LeaseId: l.Lease.LeaseId, Weight: 3})
	if err != nil || a.Holder.FencingToken <= holds[len(holds)-1].token {
		t.Fatalf("acquire after restart: %v %v", a, err)
	}
}
