package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
)

// BenchmarkJoinCatchUp: a 3-node cluster holding GRACKLE_JOIN_LEASES
// leases (default 100,000) gets a fourth node through --join; the figure
// is the time from starting that process until its own state machine has
// applied the leader's commit index (it catches up from a snapshot).
//
//	go test -run '^$' -bench JoinCatchUp -benchtime 1x -timeout 30m ./e2e/
func BenchmarkJoinCatchUp(b *testing.B) {
	leases := 100_000
	if v, err := strconv.Atoi(os.Getenv("GRACKLE_JOIN_LEASES")); err == nil && v > 0 {
		leases = v
	}
	for n := 0; n < b.N; n++ {
		p := NewCluster(b, 3, "--snapshot-threshold", "8192", "--trailing-logs", "1024", "--max-leases-per-namespace", "1000000")
		p.StartAll()
		li := p.Index(p.WaitLeader(0, 30*time.Second))
		ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
		cl := pb.NewGrackleServiceClient(p.Dial(li))
		if _, err := cl.CreateNamespace(ctx, &pb.CreateNamespaceRequest{Name: "big"}); err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		var wg sync.WaitGroup
		per := leases / 64
		for w := 0; w < 64; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				for i := 0; i < per; i++ {
					if _, err := cl.CreateSemaphoreLease(ctx, &pb.CreateSemaphoreLeaseRequest{NamespaceName: "big", ProcessId: fmt.Sprintf("w%d", w), TtlSeconds: 300}); err != nil {
						b.Error(err)
						return
					}
				}
			}(w)
		}
		wg.Wait()
		b.Logf("created %d leases in %v", per*64, time.Since(start).Round(time.Millisecond))
		st, err := pb.NewClusterServiceClient(p.Dial(li)).GetClusterStatus(ctx, &pb.GetClusterStatusRequest{})
		if err != nil {
			b.Fatal(err)
		}
		ports := FreePorts(b, 2)
		nd := &Node{ID: "n4", GRPC: fmt.Sprintf("127.0.0.1:%d", ports[0]), Raft: fmt.Sprintf("127.0.0.1:%d", ports[1]),
			DataDir: filepath.Join(b.TempDir(), "n4"), LogPath: filepath.Join(b.TempDir(), "n4.log")}
		nd.Args = []string{"server", "--node-id", "n4", "--data-dir", nd.DataDir, "--grpc-addr", nd.GRPC, "--raft-addr", nd.Raft,
			"--http-addr", "", "--log-level", "warn", "--join", p.Nodes[li].GRPC}
		p.Nodes = append(p.Nodes, nd)
		joined := time.Now()
		p.Start(len(p.Nodes) - 1)
		me := pb.NewClusterServiceClient(p.Dial(len(p.Nodes) - 1))
		for {
			cctx, cc := context.WithTimeout(ctx, time.Second)
			s, err := me.GetClusterStatus(cctx, &pb.GetClusterStatusRequest{})
			cc()
			if err == nil && s.AppliedIndex >= st.CommitIndex {
				break
			}
			if ctx.Err() != nil {
				b.Fatal("n4 did not catch up")
			}
			time.Sleep(20 * time.Millisecond)
		}
		took := time.Since(joined)
		b.Logf("n4 caught up to index %d in %v", st.CommitIndex, took.Round(time.Millisecond))
		b.ReportMetric(float64(took.Milliseconds()), "catchup-ms")
		b.ReportMetric(float64(per*64), "leases")
		cancel()
		p.KillAll()
	}
}
