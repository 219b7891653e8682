package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
)

func anyOf(p *Proc, idx ...int) *Any {
	a := &Any{}
	if len(idx) == 0 {
		for i := range p.Nodes {
			idx = append(idx, i)
		}
	}
	for _, i := range idx {
		a.Conns = append(a.Conns, p.Dial(i))
	}
	return a
}

func leaderIndex(t *testing.T, p *Proc, from int) int {
	id := p.WaitLeader(from, 30*time.Second)
	return p.Index(id)
}

type grant struct {
	sem, lease string
	token      uint64
}

// holdersOf returns lease -> token of a semaphore's holders.
func holdersOf(t *testing.T, ctx context.Context, a *Any, ns, sem string) map[string]uint64 {
	t.Helper()
	var hs *pb.ListSemaphoreHoldersResponse
	if err := a.Do(ctx, func(ctx context.Context, c pb.GrackleServiceClient) (err error) {
		hs, err = c.ListSemaphoreHolders(ctx, &pb.ListSemaphoreHoldersRequest{NamespaceName: ns, SemaphoreName: sem, Limit: 250})
		return
	}); err != nil {
		t.Fatal(err)
	}
	m := map[string]uint64{}
	for _, h := range hs.Holders {
		m[h.LeaseId] = h.FencingToken
	}
	return m
}

// setup creates a namespace, semaphores and leases through any node.
func setup(t *testing.T, ctx context.Context, a *Any, ns string, sems int, permits int64, leases int) []string {
	t.Helper()
	if err := a.Do(ctx, func(ctx context.Context, c pb.GrackleServiceClient) error {
		_, err := c.CreateNamespace(ctx, &pb.CreateNamespaceRequest{Name: ns})
		if status.Code(err) == codes.AlreadyExists {
			return nil
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < sems; i++ {
		if err := a.Do(ctx, func(ctx context.Context, c pb.GrackleServiceClient) error {
			_, err := c.CreateSemaphore(ctx, &pb.CreateSemaphoreRequest{NamespaceName: ns, SemaphoreName: fmt.Sprintf("s%d", i), Permits: permits})
			if status.Code(err) == codes.AlreadyExists {
				return nil
			}
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	var ids []string
	for i := 0; i < leases; i++ {
		var l *pb.CreateSemaphoreLeaseResponse
		if err := a.Do(ctx, func(ctx context.Context, c pb.GrackleServiceClient) (err error) {
			l, err = c.CreateSemaphoreLease(ctx, &pb.CreateSemaphoreLeaseRequest{NamespaceName: ns, ProcessId: fmt.Sprintf("p%d", i), TtlSeconds: 300})
			return
		}); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, l.Lease.LeaseId)
	}
	return ids
}

func acquire(ctx context.Context, a *Any, ns, sem, lease string, w int64) (*pb.AcquireSemaphoreResponse, error) {
	var r *pb.AcquireSemaphoreResponse
	err := a.Do(ctx, func(ctx context.Context, c pb.GrackleServiceClient) (err error) {
		r, err = c.AcquireSemaphore(ctx, &pb.AcquireSemaphoreRequest{NamespaceName: ns, SemaphoreName: sem, LeaseId: lease, Weight: w})
		return
	})
	return r, err
}

// Test_MultiNode_LeaderKill: SIGKILL the leader; writes resume through
// the other nodes, and no acknowledged grant is lost.
func Test_MultiNode_LeaderKill(t *testing.T) {
	p := NewCluster(t, 3)
	p.StartAll()
	li := leaderIndex(t, p, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	a := anyOf(p)
	ids := setup(t, ctx, a, "ha", 4, 10, 20)
	var acked []grant
	for i, id := range ids[:10] {
		sem := fmt.Sprintf("s%d", i%4)
		r, err := acquire(ctx, a, "ha", sem, id, 1)
		if err != nil || r.Outcome != pb.AcquireOutcome_ACQUIRE_OUTCOME_ACQUIRED {
			t.Fatalf("acquire: %v %v", r, err)
		}
		acked = append(acked, grant{sem, id, r.Holder.FencingToken})
	}
	p.Kill9(li)
	others := []int{}
	for i := range p.Nodes {
		if i != li {
			others = append(others, i)
		}
	}
	b := anyOf(p, others...)
	for i, id := range ids[10:] {
		sem := fmt.Sprintf("s%d", i%4)
		r, err := acquire(ctx, b, "ha", sem, id, 1)
		if err != nil || r.Outcome != pb.AcquireOutcome_ACQUIRE_OUTCOME_ACQUIRED {
			t.Fatalf("acquire after failover: %v %v", r, err)
		}
		if r.Holder.FencingToken <= acked[len(acked)-1].token {
			t.Fatalf("fencing token went backwards: %d after %d", r.Holder.FencingToken, acked[len(acked)-1].token)
		}
		acked = append(acked, grant{sem, id, r.Holder.FencingToken})
	}
	for _, g := range acked {
		hs := holdersOf(t, ctx, b, "ha", g.sem)
		if tok, ok := hs[g.lease]; !ok || tok != g.token {
			t.Fatalf("acknowledged grant %v lost after failover (holders %v)", g, hs)
		}
	}
	// The killed node comes back and serves the same state.
	p.Start(li)
	p.WaitLeader(li, 30*time.Second)
	one := anyOf(p, li)
	for _, g := range acked {
		if tok, ok := holdersOf(t, ctx, one, "ha", g.sem)[g.lease]; !ok || tok != g.token {
			t.Fatalf("restarted node lost grant %v", g)
		}
	}
}

// Test_MultiNode_PausedLeader: SIGSTOP the leader until another is
// elected, then SIGCONT it: the old leader grants nothing and serves no
// stale read.
func Test_MultiNode_PausedLeader(t *testing.T) {
	p := NewCluster(t, 3)
	p.StartAll()
	li := leaderIndex(t, p, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	all := anyOf(p)
	ids := setup(t, ctx, all, "pause", 1, 1, 2)
	old := pb.NewGrackleServiceClient(p.Dial(li))

	p.Signal(li, syscall.SIGSTOP)
	var others []int
	for i := range p.Nodes {
		if i != li {
			others = append(others, i)
		}
	}
	rest := anyOf(p, others...)
	// The majority elects a new leader and grants the only permit.
	r, err := acquire(ctx, rest, "pause", "s0", ids[0], 1)
	if err != nil || r.Outcome != pb.AcquireOutcome_ACQUIRE_OUTCOME_ACQUIRED {
		t.Fatalf("acquire on the new leader: %v %v", r, err)
	}
	// The old leader wakes up believing it leads, at least for a moment:
	// it must neither grant the permit again nor report it free.
	p.Signal(li, syscall.SIGCONT)
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		cctx, cc := context.WithTimeout(ctx, time.Second)
		g, err := old.GetSemaphore(cctx, &pb.GetSemaphoreRequest{NamespaceName: "pause", SemaphoreName: "s0"})
		if err == nil && g.Semaphore.ActiveHolds != 1 {
			cc()
			t.Fatalf("stale read from the old leader: active_holds %d", g.Semaphore.ActiveHolds)
		}
		a, err := old.AcquireSemaphore(cctx, &pb.AcquireSemaphoreRequest{NamespaceName: "pause", SemaphoreName: "s0", LeaseId: ids[1], Weight: 1})
		cc()
		if err == nil && a.Outcome == pb.AcquireOutcome_ACQUIRE_OUTCOME_ACQUIRED {
			t.Fatalf("double grant through the old leader: %v", a)
		}
		time.Sleep(50 * time.Millisecond)
	}
	hs := holdersOf(t, ctx, all, "pause", "s0")
	if len(hs) != 1 || hs[ids[0]] == 0 {
		t.Fatalf("holders after the pause: %v", hs)
	}
}

// Test_MultiNode_RestartAll: stop every node and start them again: the
// state is intact.
func Test_MultiNode_RestartAll(t *testing.T) {
	p := NewCluster(t, 3, "--snapshot-threshold", "40", "--snapshot-interval", "1s", "--trailing-logs", "10")
	p.StartAll()
	leaderIndex(t, p, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	a := anyOf(p)
	ids := setup(t, ctx, a, "ra", 5, 3, 30)
	var acked []grant
	for i, id := range ids {
		sem := fmt.Sprintf("s%d", i%5)
		r, err := acquire(ctx, a, "ra", sem, id, 1)
		if err != nil {
			t.Fatal(err)
		}
		if r.Outcome == pb.AcquireOutcome_ACQUIRE_OUTCOME_ACQUIRED {
			acked = append(acked, grant{sem, id, r.Holder.FencingToken})
		}
	}
	for i := range p.Nodes {
		p.Kill9(i)
	}
	p.StartAll()
	leaderIndex(t, p, 0)
	a = anyOf(p)
	for _, g := range acked {
		if tok, ok := holdersOf(t, ctx, a, "ra", g.sem)[g.lease]; !ok || tok != g.token {
			t.Fatalf("grant %v lost across a full restart", g)
		}
	}
}

// Test_MultiNode_LaggingFollowerCatchesUpBySnapshot: a follower that was
// down while the leader snapshotted and compacted far past its last entry
// comes back with its old log, installs the leader's snapshot, and appends
// after it: with the other follower down it is the leader's only quorum
// partner, and writes still commit. raft-wal cannot hold a gap in its log;
// until raft was told so (raftnode's IsMonotonic), it kept the follower's
// old log after the snapshot, every append after it failed, and the leader
// sent the snapshot again forever (the fault-injection suite found a
// cluster that never served again).
func Test_MultiNode_LaggingFollowerCatchesUpBySnapshot(t *testing.T) {
	p := NewCluster(t, 3, "--snapshot-threshold", "40", "--snapshot-interval", "1s", "--trailing-logs", "10", "--log-level", "info")
	p.StartAll()
	li := leaderIndex(t, p, 0)
	lag, other := (li+1)%3, (li+2)%3
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ids := setup(t, ctx, anyOf(p), "lag", 1, 10, 1)
	refresh := func(a *Any) error {
		wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		return a.Do(wctx, func(ctx context.Context, c pb.GrackleServiceClient) error {
			_, err := c.RefreshSemaphoreLease(ctx, &pb.RefreshSemaphoreLeaseRequest{NamespaceName: "lag", LeaseId: ids[0], TtlSeconds: 300})
			return err
		})
	}
	for i := 0; i < 20; i++ { // the lagging follower's log is not empty
		if err := refresh(anyOf(p)); err != nil {
			t.Fatal(err)
		}
	}
	p.Kill9(lag)
	// Enough entries, over long enough, that the leader snapshots (every
	// 40 entries, checked every second) and compacts far past lag's log.
	b := anyOf(p, li, other)
	for n, start := 0, time.Now(); n < 400 || time.Since(start) < 3*time.Second; n++ {
		if err := refresh(b); err != nil {
			t.Fatal(err)
		}
	}
	p.Start(lag)
	installed := false
	for deadline := time.Now().Add(60 * time.Second); !installed && time.Now().Before(deadline); {
		if out, err := os.ReadFile(p.Nodes[lag].LogPath); err == nil && bytes.Contains(out, []byte("Installed remote snapshot")) {
			installed = true
			break
		}
		time.Sleep(50 * time.Millisecond) // polling the log file, not a timing assumption
	}
	if !installed {
		t.Fatal("the lagging follower installed no snapshot within 60 s")
	}
	p.Kill9(other)
	c := anyOf(p, li, lag)
	for i := 0; i < 20; i++ {
		if err := refresh(c); err != nil {
			t.Fatalf("write %d with only the leader and the caught-up follower: %v", i, err)
		}
	}
}
