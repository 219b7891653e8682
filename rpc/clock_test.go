package rpc_test

import (
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
	"github.com/grackle-coord/grackle/server"
	"github.com/grackle-coord/grackle/server/servertest"
)

// jumpClock is the system's monotonic clock with a wall clock the test
// moves by off.
type jumpClock struct {
	t0  time.Time
	off atomic.Int64
}

func (j *jumpClock) Wall() int64              { return time.Now().UnixNano() + j.off.Load() }
func (j *jumpClock) Monotonic() time.Duration { return time.Since(j.t0) }

// A jump of the leader's wall clock changes nothing within its term: a
// forward jump reaps no lease early, a backward one does not stop time.
func TestLeaderClockSurvivesWallJumps(t *testing.T) {
	jc := &jumpClock{t0: time.Now()}
	c := servertest.Start(t, 1, func(cfg *server.Config) { cfg.Clock = jc })
	cl := c.Client(0)
	ids := seed(t, cl, "jump", "s", 1, 1, 30)
	acquireNow(t, cl, "jump", "s", ids[0], 1)

	jc.off.Store(int64(time.Hour))
	// A write kicks the expiry timer; with a wall-clock `now` it would reap.
	must(cl.CreateNamespace(ctxT(t), &pb.CreateNamespaceRequest{Name: "kick"}))
	l := must(cl.GetSemaphoreLease(ctxT(t), &pb.GetSemaphoreLeaseRequest{NamespaceName: "jump", LeaseId: ids[0]}))
	if time.Duration(l.Lease.ExpiresAt-time.Now().UnixNano()) > 31*time.Second {
		t.Fatalf("lease expires_at moved with the jump: %v from now", time.Duration(l.Lease.ExpiresAt-time.Now().UnixNano()))
	}
	hs := must(cl.ListSemaphoreHolders(ctxT(t), &pb.ListSemaphoreHoldersRequest{NamespaceName: "jump", SemaphoreName: "s"}))
	if len(hs.Holders) != 1 {
		t.Fatalf("holders after a forward jump: %v", hs.Holders)
	}

	jc.off.Store(-int64(time.Hour))
	short := must(cl.CreateSemaphoreLease(ctxT(t), &pb.CreateSemaphoreLeaseRequest{NamespaceName: "jump", ProcessId: "w", TtlSeconds: 1}))
	servertest.Eventually(t, "the 1 s lease expires although the wall clock went back an hour", 20*time.Second, func() bool {
		_, err := cl.GetSemaphoreLease(ctxT(t), &pb.GetSemaphoreLeaseRequest{NamespaceName: "jump", LeaseId: short.Lease.LeaseId})
		return status.Code(err) == codes.NotFound
	})
}

// A follower measures its clock against the leader's stamped now and
// reports it in GetNodeInfo; the leader reports none.
func TestFollowerReportsClockSkew(t *testing.T) {
	c := servertest.Start(t, 3, nil)
	li, fi := c.Leader(), c.Follower()
	must(c.Client(li).CreateNamespace(ctxT(t), &pb.CreateNamespaceRequest{Name: "skew"}))
	servertest.Eventually(t, "a skew measurement on the follower", 20*time.Second, func() bool {
		must(c.Client(li).CreateSemaphoreLease(ctxT(t), &pb.CreateSemaphoreLeaseRequest{NamespaceName: "skew", ProcessId: "p", TtlSeconds: 60}))
		ni := must(c.ClusterClient(fi).GetNodeInfo(ctxT(t), &pb.GetNodeInfoRequest{}))
		return ni.LeaderClockSkewMs != nil
	})
	ni := must(c.ClusterClient(fi).GetNodeInfo(ctxT(t), &pb.GetNodeInfoRequest{}))
	if d := time.Duration(*ni.LeaderClockSkewMs) * time.Millisecond; d > 5*time.Second || d < -5*time.Second {
		t.Fatalf("skew on one machine: %v", d)
	}
	if ni := must(c.ClusterClient(li).GetNodeInfo(ctxT(t), &pb.GetNodeInfoRequest{})); ni.LeaderClockSkewMs != nil {
		t.Fatalf("the leader reports a skew with itself: %d", *ni.LeaderClockSkewMs)
	}
}

// The waiter list is on the leader clock, the time base of every other
// timestamp (a lease's created_at, expires_at): the term starts on a wall
// clock an hour ahead, then the wall clock jumps back two hours; a
// waiter's waiting_since stays in step with the leases stamped beside it,
// so no wait reads as negative or hours long next to them.
func TestWaitersOnLeaderClockAcrossWallJumps(t *testing.T) {
	jc := &jumpClock{t0: time.Now()}
	jc.off.Store(int64(time.Hour))
	c := servertest.Start(t, 1, func(cfg *server.Config) { cfg.Clock = jc })
	cl := c.Client(0)
	ids := seed(t, cl, "jumpw", "s", 1, 3, 60)
	acquireNow(t, cl, "jumpw", "s", ids[0], 1)
	for i, off := range []time.Duration{time.Hour, -time.Hour} {
		jc.off.Store(int64(off))
		// Stamped by the leader clock just before the waiter arrives.
		marker := must(cl.CreateSemaphoreLease(ctxT(t), &pb.CreateSemaphoreLeaseRequest{NamespaceName: "jumpw", ProcessId: "marker", TtlSeconds: 60}))
		ch := acquireAsync(cl, "jumpw", "s", ids[1+i], 1, 30)
		waitQueue(t, c, "jumpw", "s", 1)
		ws := must(cl.ListSemaphoreWaiters(ctxT(t), &pb.ListSemaphoreWaitersRequest{NamespaceName: "jumpw", SemaphoreName: "s"}))
		if len(ws.Waiters) != 1 {
			t.Fatalf("waiters: %v", ws.Waiters)
		}
		w := ws.Waiters[0]
		if d := time.Duration(w.WaitingSince - marker.Lease.CreatedAt); d < 0 || d > 20*time.Second {
			t.Fatalf("wall clock at %v: waiting_since is %v after a lease created just before it, want 0..20s", off, d)
		}
		if d := time.Duration(w.Deadline - w.WaitingSince); d != 30*time.Second {
			t.Fatalf("deadline - waiting_since = %v, want the 30 s timeout", d)
		}
		must(cl.RevokeSemaphoreLease(ctxT(t), &pb.RevokeSemaphoreLeaseRequest{NamespaceName: "jumpw", LeaseId: ids[1+i]}))
		recv(t, ch)
		waitQueue(t, c, "jumpw", "s", 0)
	}
}
