package server_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grackle-coord/grackle/apierr"
	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
	"github.com/grackle-coord/grackle/server"
	"github.com/grackle-coord/grackle/server/servertest"
)

// With a proposal queue of one command, a burst of writes is either
// applied or refused with ResourceExhausted OVERLOADED (nothing written):
// no other error, and exactly the acknowledged writes exist afterwards.
func TestOverloadedLeaderRefusesWrites(t *testing.T) {
	c := servertest.Start(t, 1, func(cfg *server.Config) { cfg.MaxQueuedProposals = 1 })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	api := c.Client(0)
	if _, err := api.CreateNamespace(ctx, &pb.CreateNamespaceRequest{Name: "ns"}); err != nil {
		t.Fatal(err)
	}
	const n = 200
	var wg sync.WaitGroup
	var mu sync.Mutex
	acked, refused := map[string]bool{}, 0
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := api.CreateSemaphoreLease(ctx, &pb.CreateSemaphoreLeaseRequest{NamespaceName: "ns", ProcessId: "p", TtlSeconds: 300})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				acked[r.Lease.LeaseId] = true
			case status.Code(err) == codes.ResourceExhausted && apierr.ReasonOf(err) == apierr.Overloaded && apierr.ProvesNotSent(err):
				refused++
			default:
				t.Errorf("a write to an overloaded leader: %v (reason %q)", err, apierr.ReasonOf(err))
			}
		}()
	}
	wg.Wait()
	t.Logf("%d applied, %d refused as OVERLOADED", len(acked), refused)
	var got []string
	token := ""
	for {
		page, err := api.ListSemaphoreLeases(ctx, &pb.ListSemaphoreLeasesRequest{NamespaceName: "ns", Limit: 250, PaginationToken: token})
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range page.Leases {
			got = append(got, l.LeaseId)
		}
		if token = page.NextPaginationToken; token == "" {
			break
		}
	}
	if len(got) != len(acked) {
		t.Fatalf("%d leases exist, %d were acknowledged", len(got), len(acked))
	}
	for _, id := range got {
		if !acked[id] {
			t.Fatalf("lease %s exists but its create was not acknowledged", id)
		}
	}
}
