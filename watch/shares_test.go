package watch_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/grackle-coord/grackle/fsm"

	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
	"github.com/grackle-coord/grackle/server"
	"github.com/grackle-coord/grackle/server/servertest"
	"github.com/grackle-coord/grackle/watch"
)

// One client cannot take the watch streams of a node: a flood of watches
// on one connection is refused past the per-connection bound, and past the
// per-client bound over several connections of one address, while another
// connection is still served and the leader keeps its term.
func TestWatchFloodIsBoundedPerClient(t *testing.T) {
	const perConn, perClient = 20, 30
	c := servertest.Start(t, 1, func(cfg *server.Config) {
		cfg.MaxWatchersPerConnection, cfg.MaxWatchersPerClient = perConn, perClient
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	setup(t, c.Client(0), 1)
	term := c.Nodes[0].Node.Raft.Stats()["term"]
	dial := func() pb.GrackleServiceClient {
		cc, err := grpc.NewClient(c.Nodes[0].GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cc.Close() })
		return pb.NewGrackleServiceClient(cc)
	}
	open := func(api pb.GrackleServiceClient) error {
		st, err := api.WatchSemaphore(ctx, &pb.WatchSemaphoreRequest{NamespaceName: "ns", SemaphoreName: "s"})
		if err != nil {
			return err
		}
		_, err = st.Recv()
		return err
	}
	flood := dial()
	admitted := 0
	for i := 0; i < 200; i++ {
		err := open(flood)
		if err == nil {
			admitted++
			continue
		}
		if status.Code(err) != codes.ResourceExhausted {
			t.Fatalf("watch %d of the flood: %v, want ResourceExhausted past the bound", i, err)
		}
	}
	if admitted != perConn {
		t.Fatalf("the flooding connection got %d watches, want %d (--max-watchers-per-connection)", admitted, perConn)
	}
	// A second connection of the same address: up to the client's bound.
	second := dial()
	for i := perConn; i < perClient; i++ {
		if err := open(second); err != nil {
			t.Fatalf("watch %d of the client: %v", i, err)
		}
	}
	if err := open(second); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("watch past the client's bound: %v, want ResourceExhausted", err)
	}
	// The node still serves: a write commits, the term did not change.
	if _, err := c.Client(0).GetSemaphore(ctx, &pb.GetSemaphoreRequest{NamespaceName: "ns", SemaphoreName: "s"}); err != nil {
		t.Fatal(err)
	}
	if now := c.Nodes[0].Node.Raft.Stats()["term"]; now != term {
		t.Fatalf("the term went from %s to %s during the flood", term, now)
	}
}

// A watch message stays under MaxMessageBytes whatever the holders'
// metadata: the lists are cut (the first holders in acquisition order
// kept) and the counts stay complete.
func TestWatchMessageSizeIsBounded(t *testing.T) {
	c := servertest.Start(t, 1, nil)
	api := c.Client(0)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	const holders = 120
	var procs []string
	for i := 0; i < holders; i++ {
		procs = append(procs, fmt.Sprintf("p%03d", i))
	}
	ids := setup(t, api, holders, procs...)
	md := map[string]string{}
	for i := 0; i < fsm.MaxMetadataEntries; i++ {
		md[fmt.Sprintf("%03d%s", i, strings.Repeat("k", fsm.MaxMetadataKeyBytes-3))] = strings.Repeat("v", fsm.MaxMetadataValBytes)
	}
	for _, p := range procs {
		if _, err := api.AcquireSemaphore(ctx, &pb.AcquireSemaphoreRequest{NamespaceName: "ns", SemaphoreName: "s", LeaseId: ids[p], Weight: 1, Metadata: md}); err != nil {
			t.Fatal(err)
		}
	}
	st, err := api.WatchSemaphore(ctx, &pb.WatchSemaphoreRequest{NamespaceName: "ns", SemaphoreName: "s"})
	if err != nil {
		t.Fatal(err)
	}
	m, err := st.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if n := proto.Size(m); n > watch.MaxMessageBytes {
		t.Fatalf("watch message of %d bytes, want at most %d", n, watch.MaxMessageBytes)
	}
	if len(m.Holders) == 0 || len(m.Holders) >= holders {
		t.Fatalf("%d holders listed, want the list cut below %d", len(m.Holders), holders)
	}
	if m.Semaphore.ActiveHoldersCount != holders {
		t.Fatalf("active_holders_count %d, want %d (complete)", m.Semaphore.ActiveHoldersCount, holders)
	}
	for i, h := range m.Holders {
		if h.ProcessId != procs[i] {
			t.Fatalf("holder %d is %s, want %s (acquisition order, the first kept)", i, h.ProcessId, procs[i])
		}
	}
}
