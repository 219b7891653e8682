package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
)

// loadWorkers runs acquire/release loops through a retrying caller until
// stop is closed; any call that still fails after retries is an error.
func loadWorkers(t *testing.T, ctx context.Context, a func() *Any, ns string, ids []string, stop chan struct{}) (wait func() (ops int64, errs []error)) {
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	var ops atomic.Int64
	for i, id := range ids {
		wg.Add(1)
		go func(i int, id string) {
			defer wg.Done()
			c := a()
			sem := fmt.Sprintf("s%d", i%2)
			for {
				select {
				case <-stop:
					return
				default:
				}
				err := c.Do(ctx, func(ctx context.Context, cl pb.GrackleServiceClient) error {
					_, err := cl.AcquireSemaphore(ctx, &pb.AcquireSemaphoreRequest{NamespaceName: ns, SemaphoreName: sem, LeaseId: id, Weight: 1, TimeoutSeconds: 2})
					return err
				})
				if err == nil {
					err = c.Do(ctx, func(ctx context.Context, cl pb.GrackleServiceClient) error {
						_, err := cl.ReleaseSemaphore(ctx, &pb.ReleaseSemaphoreRequest{NamespaceName: ns, SemaphoreName: sem, LeaseId: id})
						return err
					})
				}
				if err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
					return
				}
				ops.Add(1)
			}
		}(i, id)
	}
	return func() (int64, []error) { wg.Wait(); return ops.Load(), errs }
}

// Test_MultiNode_ReplaceNodeUnderLoad removes a member and adds a fresh
// node while clients keep working; the log has been compacted, so the new
// node catches up from a snapshot.
func Test_MultiNode_ReplaceNodeUnderLoad(t *testing.T) {
	p := NewCluster(t, 3, "--snapshot-threshold", "64", "--snapshot-interval", "500ms", "--trailing-logs", "16")
	p.StartAll()
	li := leaderIndex(t, p, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ids := setup(t, ctx, anyOf(p), "rep", 2, 2, 4)
	victim := (li + 1) % 3
	keep := []int{}
	for i := range p.Nodes {
		if i != victim {
			keep = append(keep, i)
		}
	}
	stop := make(chan struct{})
	wait := loadWorkers(t, ctx, func() *Any { return anyOf(p, keep...) }, "rep", ids, stop)

	cc := anyOf(p, keep...)
	if err := cc.Do(ctx, func(ctx context.Context, _ pb.GrackleServiceClient) error {
		_, err := pb.NewClusterServiceClient(cc.Conns[0]).RemoveMember(ctx, &pb.RemoveMemberRequest{NodeId: p.Nodes[victim].ID})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	p.Kill9(victim)
	// Let the log grow past the snapshot threshold so the newcomer needs one.
	st0 := clusterStatus(t, ctx, cc)
	waitFor(t, "the log to grow by 300 entries", 60*time.Second, func() bool {
		return clusterStatus(t, ctx, cc).CommitIndex > st0.CommitIndex+300
	})

	ports := FreePorts(t, 2)
	n4 := &Node{ID: "n4", GRPC: fmt.Sprintf("127.0.0.1:%d", ports[0]), Raft: fmt.Sprintf("127.0.0.1:%d", ports[1]),
		DataDir: filepath.Join(t.TempDir(), "n4"), LogPath: filepath.Join(t.TempDir(), "n4.log")}
	n4.Args = []string{"server", "--node-id", "n4", "--data-dir", n4.DataDir, "--grpc-addr", n4.GRPC, "--raft-addr", n4.Raft,
		"--http-addr", "", "--log-level", "info", "--join", p.Nodes[keep[0]].GRPC}
	p.Nodes = append(p.Nodes, n4)
	p.Start(len(p.Nodes) - 1)
	fresh := anyOf(p, len(p.Nodes)-1)
	waitFor(t, "n4 to apply the leader's log", 60*time.Second, func() bool {
		lead := clusterStatus(t, ctx, cc)
		own := clusterStatus(t, ctx, fresh)
		return len(lead.Members) == 3 && own.AppliedIndex >= st0.CommitIndex+300
	})
	// It joined as a nonvoter; caught up, the leader promotes it, under
	// load.
	waitFor(t, "n4 to be promoted to voter", 60*time.Second, func() bool {
		for _, m := range clusterStatus(t, ctx, cc).Members {
			if m.NodeId == "n4" {
				return m.Suffrage == "voter"
			}
		}
		return false
	})
	close(stop)
	ops, errs := wait()
	if len(errs) > 0 {
		t.Fatalf("%d client calls failed after retries, first: %v", len(errs), errs[0])
	}
	t.Logf("%d acquire+release pairs during the replacement", ops)
	if logs := readFile(n4.LogPath); !strings.Contains(logs, "snapshot") {
		t.Logf("note: n4's log does not mention a snapshot:\n%s", tail(logs, 2000))
	}
}

// Test_MultiNode_RollingRestart restarts every node in turn (SIGTERM, then
// start) under load: no client call fails once retries are counted.
func Test_MultiNode_RollingRestart(t *testing.T) {
	p := NewCluster(t, 3)
	p.StartAll()
	leaderIndex(t, p, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ids := setup(t, ctx, anyOf(p), "roll", 2, 2, 4)
	stop := make(chan struct{})
	wait := loadWorkers(t, ctx, func() *Any { return anyOf(p) }, "roll", ids, stop)
	for i := range p.Nodes {
		p.Signal(i, syscall.SIGTERM)
		<-p.Nodes[i].waitDone
		p.Nodes[i].cmd = nil
		p.Start(i)
		p.WaitLeader(i, 30*time.Second)
	}
	close(stop)
	ops, errs := wait()
	if len(errs) > 0 {
		t.Fatalf("%d client calls failed after retries, first: %v", len(errs), errs[0])
	}
	if ops == 0 {
		t.Fatal("no operation completed during the rolling restart")
	}
	t.Logf("%d acquire+release pairs during the rolling restart", ops)
}

func clusterStatus(t *testing.T, ctx context.Context, a *Any) *pb.GetClusterStatusResponse {
	t.Helper()
	for ctx.Err() == nil {
		for _, cc := range a.Conns {
			cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			st, err := pb.NewClusterServiceClient(cc).GetClusterStatus(cctx, &pb.GetClusterStatusRequest{})
			cancel()
			if err == nil {
				return st
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("cluster status: context ended")
	return nil
}

func waitFor(t *testing.T, what string, within time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", within, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
