package client_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/grackle-coord/grackle/client"
	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
	"github.com/grackle-coord/grackle/server/servertest"
)

// With LeaderOnly, given only a follower and a dead endpoint, the client
// finds the leader and sends calls straight to it; when the leader dies,
// it finds the new one.
func TestRoutesToLeader(t *testing.T) {
	c := servertest.Start(t, 3, nil)
	li := c.WaitLeader() // not Leader(): -1 if an election is under way
	fi := c.Follower()
	leaderAddr := c.Nodes[li].GRPCAddr()
	cli, err := client.New(ctxT(t), client.Config{Endpoints: []string{deadAddr(t), c.Nodes[fi].GRPCAddr()}, LeaderOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx := ctxT(t)

	var hdr metadata.MD
	if _, err := cli.CreateNamespace(ctx, &pb.CreateNamespaceRequest{Name: "route"}, grpc.Header(&hdr)); err != nil {
		t.Fatal(err)
	}
	if got := cli.Leader(); got != leaderAddr {
		t.Fatalf("client's leader %q, want %q", got, leaderAddr)
	}
	if len(hdr.Get("grackle-raft-index")) == 0 {
		t.Fatalf("the write was not answered by the leader itself (headers %v)", hdr)
	}
	if _, err := cli.GetNamespace(ctx, &pb.GetNamespaceRequest{NamespaceName: "route"}); err != nil {
		t.Fatal(err)
	}

	// The leader dies: the client rediscovers the new one (which may be
	// the member it was never given as an endpoint) and carries on.
	c.StopNode(li)
	hdr = nil
	if _, err := cli.CreateSemaphore(ctx, &pb.CreateSemaphoreRequest{NamespaceName: "route", SemaphoreName: "s", Permits: 1}, grpc.Header(&hdr)); err != nil {
		t.Fatal(err)
	}
	// The write went to the new leader (its header, below); the client's
	// record of the leader may be cleared a moment by a late failure of a
	// call to the dead one, and is learned again on the next call: call
	// and look until it names it, generously.
	servertest.Eventually(t, "the client names the new leader", 20*time.Second, func() bool {
		if _, err := cli.GetNamespace(ctx, &pb.GetNamespaceRequest{NamespaceName: "route"}); err != nil {
			return false
		}
		nl := c.Leader()
		return nl >= 0 && cli.Leader() == c.Nodes[nl].GRPCAddr()
	})
	if len(hdr.Get("grackle-raft-index")) == 0 {
		t.Fatalf("the write after the leader change was not answered by the new leader (headers %v)", hdr)
	}
}

// Waiters block on a full semaphore; leadership is transferred while they
// wait (the old leader ends their calls with Unavailable); the holder
// releases; every waiter is granted exactly once on the new leader, and
// the permits are never exceeded.
func TestAcquireAcrossLeaderChange(t *testing.T) {
	c := servertest.Start(t, 3, nil)
	cli := newClient(t, addrs(c)...)
	const ns, sem, permits, n = "lc", "s", 2, 5
	setup(t, cli, ns, sem, permits)
	ctx := ctxT(t)

	holder := newSession(t, cli, ns, "holder", 10*time.Second)
	if _, err := holder.Semaphore(sem).Acquire(ctx, permits); err != nil {
		t.Fatal(err)
	}

	// A monitor checks the invariants while everything runs.
	stopMon := make(chan struct{})
	monErr := make(chan error, 1)
	var monWG sync.WaitGroup
	monWG.Add(1)
	go func() {
		defer monWG.Done()
		for {
			select {
			case <-stopMon:
				return
			case <-time.After(20 * time.Millisecond):
			}
			mctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			r, err := cli.ListSemaphoreHolders(mctx, &pb.ListSemaphoreHoldersRequest{NamespaceName: ns, SemaphoreName: sem, Limit: 250})
			cancel()
			if err != nil {
				continue // a leader change in progress; the client retried until its budget
			}
			sum, seen := int64(0), map[string]bool{}
			for _, h := range r.Holders {
				sum += h.Weight
				if seen[h.LeaseId] {
					monErr <- fmt.Errorf("lease %s listed twice", h.LeaseId)
					return
				}
				seen[h.LeaseId] = true
			}
			if sum > permits {
				monErr <- fmt.Errorf("holders take %d permits > %d: %v", sum, permits, r.Holders)
				return
			}
		}
	}()

	type result struct {
		i     int
		grant *client.Grant
		err   error
	}
	results := make(chan result, n)
	sessions := make([]*client.Session, n)
	for i := range sessions {
		sessions[i] = newSession(t, cli, ns, fmt.Sprintf("w%d", i), 10*time.Second)
	}
	for i, s := range sessions {
		go func(i int, s *client.Session) {
			m := s.Semaphore(sem)
			g, err := m.Acquire(ctx, 1)
			if err == nil {
				// While held, the semaphore never shows more than permits.
				if st, e := cli.GetSemaphore(ctx, &pb.GetSemaphoreRequest{NamespaceName: ns, SemaphoreName: sem}); e != nil {
					err = e
				} else if st.Semaphore.ActiveHolds > permits {
					err = fmt.Errorf("active_holds %d > %d", st.Semaphore.ActiveHolds, permits)
				} else {
					err = m.Release(ctx)
				}
			}
			results <- result{i, g, err}
		}(i, s)
	}
	waitQueue(t, c, ns, sem, n)

	old := c.Leader()
	if _, err := c.TransferLeadership(ctx, old, ""); err != nil {
		t.Fatal(err)
	}
	servertest.Eventually(t, "a new leader", 30*time.Second, func() bool { l := c.Leader(); return l >= 0 && l != old })
	// The waiters re-acquired on the new leader and wait there again.
	waitQueue(t, c, ns, sem, n)

	if err := holder.Semaphore(sem).Release(ctx); err != nil {
		t.Fatal(err)
	}
	got := map[int]bool{}
	tokens := map[uint64]bool{}
	for k := 0; k < n; k++ {
		r := recvWithin(t, results, 45*time.Second, "a waiter's grant")
		if r.err != nil {
			t.Fatalf("waiter %d: %v", r.i, r.err)
		}
		if got[r.i] {
			t.Fatalf("waiter %d returned twice", r.i)
		}
		got[r.i] = true
		if r.grant.LeaseID != sessions[r.i].LeaseID() || r.grant.Weight != 1 {
			t.Fatalf("waiter %d: grant %+v", r.i, r.grant)
		}
		if tokens[r.grant.FencingToken] {
			t.Fatalf("fencing token %d granted twice", r.grant.FencingToken)
		}
		tokens[r.grant.FencingToken] = true
	}
	close(stopMon)
	monWG.Wait()
	select {
	case err := <-monErr:
		t.Fatal(err)
	default:
	}
	if hs := holders(t, cli, ns, sem); len(hs) != 0 {
		t.Fatalf("holders left: %v", hs)
	}
	for i, node := range c.Nodes {
		if node == nil {
			continue
		}
		if err := node.FSM.CheckInvariants(); err != nil {
			t.Fatalf("node %d: %v", i, err)
		}
	}
}
