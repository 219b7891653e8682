package rpc_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
	"github.com/grackle-coord/grackle/server/servertest"
)

type acqResult struct {
	resp *pb.AcquireSemaphoreResponse
	err  error
}

// acquireAsync starts a blocking acquire and returns its result channel.
func acquireAsync(c pb.GrackleServiceClient, ns, sem, lease string, weight, timeout int64) chan acqResult {
	ch := make(chan acqResult, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Duration(timeout+30)*time.Second)
		defer cancel()
		r, err := c.AcquireSemaphore(ctx, &pb.AcquireSemaphoreRequest{NamespaceName: ns, SemaphoreName: sem, LeaseId: lease, Weight: weight, TimeoutSeconds: timeout})
		ch <- acqResult{r, err}
	}()
	return ch
}

func waitQueue(t *testing.T, c *servertest.Cluster, ns, sem string, n int) {
	t.Helper()
	servertest.Eventually(t, fmt.Sprintf("%d waiters on %s", n, sem), 20*time.Second, func() bool {
		li := c.Leader()
		return li >= 0 && c.QueueLen(li, ns, sem) == n
	})
}

func recv(t *testing.T, ch chan acqResult) acqResult {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(30 * time.Second):
		t.Fatal("blocked acquire did not end within 30s")
	}
	return acqResult{}
}

func acquired(t *testing.T, r acqResult) *pb.AcquireSemaphoreResponse {
	t.Helper()
	if r.err != nil || r.resp.Outcome != pb.AcquireOutcome_ACQUIRE_OUTCOME_ACQUIRED {
		t.Fatalf("want ACQUIRED, got %v %v", r.resp, r.err)
	}
	return r.resp
}

func acquireNow(t *testing.T, c pb.GrackleServiceClient, ns, sem, lease string, w int64) *pb.AcquireSemaphoreResponse {
	t.Helper()
	r := must(c.AcquireSemaphore(ctxT(t), &pb.AcquireSemaphoreRequest{NamespaceName: ns, SemaphoreName: sem, LeaseId: lease, Weight: w}))
	if r.Outcome != pb.AcquireOutcome_ACQUIRE_OUTCOME_ACQUIRED {
		t.Fatalf("want ACQUIRED, got %v", r)
	}
	return r
}

// wakeCase: a full semaphore, one waiter; wake() must grant it.
func TestBlockedAcquireWokenBy(t *testing.T) {
	c := startOne(t)
	cl := c.Client(0)
	cases := map[string]func(ns, holder string){
		"release": func(ns, holder string) {
			must(cl.ReleaseSemaphore(ctxT(t), &pb.ReleaseSemaphoreRequest{NamespaceName: ns, SemaphoreName: "s", LeaseId: holder}))
		},
		"revoke": func(ns, holder string) {
			must(cl.RevokeSemaphoreLease(ctxT(t), &pb.RevokeSemaphoreLeaseRequest{NamespaceName: ns, LeaseId: holder}))
		},
		"raised permits": func(ns, holder string) {
			must(cl.UpdateSemaphore(ctxT(t), &pb.UpdateSemaphoreRequest{NamespaceName: ns, SemaphoreName: "s", Permits: 2, ExpectedVersion: 1}))
		},
		"decrease": func(ns, holder string) {
			// Re-acquire with a smaller weight frees permits at once.
			acquireNow(t, cl, ns, "s", holder, 1)
		},
	}
	i := 0
	for name, wake := range cases {
		i++
		ns := fmt.Sprintf("wake-%d", i)
		t.Run(name, func(t *testing.T) {
			permits := int64(1)
			w := int64(1)
			if name == "decrease" {
				permits, w = 2, 1
			}
			ids := seed(t, cl, ns, "s", permits, 2, 60)
			acquireNow(t, cl, ns, "s", ids[0], permits)
			ch := acquireAsync(cl, ns, "s", ids[1], w, 60)
			waitQueue(t, c, ns, "s", 1)
			wake(ns, ids[0])
			r := acquired(t, recv(t, ch))
			if r.Holder.LeaseId != ids[1] {
				t.Fatalf("granted to %v", r.Holder)
			}
		})
	}
}

func TestBlockedAcquireWokenByExpiry(t *testing.T) {
	c := startOne(t)
	cl := c.Client(0)
	ids := seed(t, cl, "exp", "s", 1, 1, 1) // holder with a 1 s TTL
	long := must(cl.CreateSemaphoreLease(ctxT(t), &pb.CreateSemaphoreLeaseRequest{NamespaceName: "exp", ProcessId: "w2", TtlSeconds: 60}))
	a := acquireNow(t, cl, "exp", "s", ids[0], 1)
	expiresAt := a.Holder.ExpiresAt
	r := acquired(t, recv(t, acquireAsync(cl, "exp", "s", long.Lease.LeaseId, 1, 30)))
	if r.Holder.LockedAt < expiresAt {
		t.Fatalf("granted at %d before the old hold expired at %d", r.Holder.LockedAt, expiresAt)
	}
	_, err := cl.GetSemaphoreLease(ctxT(t), &pb.GetSemaphoreLeaseRequest{NamespaceName: "exp", LeaseId: ids[0]})
	wantCode(t, err, codes.NotFound)
}

func TestBlockedAcquireEndsNotFound(t *testing.T) {
	c := startOne(t)
	cl := c.Client(0)
	cases := map[string]func(ns, waiter string){
		"semaphore deleted": func(ns, _ string) {
			must(cl.DeleteSemaphore(ctxT(t), &pb.DeleteSemaphoreRequest{NamespaceName: ns, SemaphoreName: "s"}))
		},
		"namespace deleted": func(ns, _ string) {
			must(cl.DeleteNamespace(ctxT(t), &pb.DeleteNamespaceRequest{NamespaceName: ns}))
		},
		"lease revoked": func(ns, waiter string) {
			must(cl.RevokeSemaphoreLease(ctxT(t), &pb.RevokeSemaphoreLeaseRequest{NamespaceName: ns, LeaseId: waiter}))
		},
	}
	i := 0
	for name, kill := range cases {
		i++
		ns := fmt.Sprintf("nf%d", i)
		t.Run(name, func(t *testing.T) {
			ids := seed(t, cl, ns, "s", 1, 2, 60)
			acquireNow(t, cl, ns, "s", ids[0], 1)
			ch := acquireAsync(cl, ns, "s", ids[1], 1, 60)
			waitQueue(t, c, ns, "s", 1)
			kill(ns, ids[1])
			r := recv(t, ch)
			wantCode(t, r.err, codes.NotFound)
		})
	}
	t.Run("lease expired", func(t *testing.T) {
		ids := seed(t, cl, "nf-exp", "s", 1, 1, 60)
		short := must(cl.CreateSemaphoreLease(ctxT(t), &pb.CreateSemaphoreLeaseRequest{NamespaceName: "nf-exp", ProcessId: "w", TtlSeconds: 1}))
		acquireNow(t, cl, "nf-exp", "s", ids[0], 1)
		r := recv(t, acquireAsync(cl, "nf-exp", "s", short.Lease.LeaseId, 1, 30))
		wantCode(t, r.err, codes.NotFound)
	})
}

func TestBlockedAcquireTimesOut(t *testing.T) {
	c := startOne(t)
	cl := c.Client(0)
	ids := seed(t, cl, "to", "s", 1, 2, 60)
	acquireNow(t, cl, "to", "s", ids[0], 1)
	r := recv(t, acquireAsync(cl, "to", "s", ids[1], 1, 1))
	if r.err != nil || r.resp.Outcome != pb.AcquireOutcome_ACQUIRE_OUTCOME_TIMED_OUT || r.resp.Semaphore.ActiveHolds != 1 {
		t.Fatalf("want TIMED_OUT with state, got %v %v", r.resp, r.err)
	}
	// Non-blocking: UNAVAILABLE at once, no error.
	u := must(cl.AcquireSemaphore(ctxT(t), &pb.AcquireSemaphoreRequest{NamespaceName: "to", SemaphoreName: "s", LeaseId: ids[1], Weight: 1}))
	if u.Outcome != pb.AcquireOutcome_ACQUIRE_OUTCOME_UNAVAILABLE || u.Holder != nil {
		t.Fatalf("want UNAVAILABLE, got %v", u)
	}
	if n := c.QueueLen(0, "to", "s"); n != 0 {
		t.Fatalf("%d waiters left queued", n)
	}
}

// FIFO: waiters queued in a known order are granted in that order, and a
// heavy waiter at the head is not overtaken by light ones behind it.
func TestFIFOHandOff(t *testing.T) {
	for _, nodes := range []int{1, 3} {
		t.Run(fmt.Sprintf("%d nodes", nodes), func(t *testing.T) {
			c := servertest.Start(t, nodes, nil)
			cl := c.Client(c.Leader())
			const n = 8
			ids := seed(t, cl, "fifo", "s", 3, n+1, 60)
			acquireNow(t, cl, "fifo", "s", ids[0], 3)
			var chans []chan acqResult
			weights := make([]int64, n)
			for i := 0; i < n; i++ {
				weights[i] = 1
				if i == 0 {
					weights[i] = 3 // heavy head
				}
				chans = append(chans, acquireAsync(c.Client(i%len(c.Nodes)), "fifo", "s", ids[i+1], weights[i], 60))
				waitQueue(t, c, "fifo", "s", i+1)
			}
			// Release the initial holder: only the heavy head fits (3).
			must(cl.ReleaseSemaphore(ctxT(t), &pb.ReleaseSemaphoreRequest{NamespaceName: "fifo", SemaphoreName: "s", LeaseId: ids[0]}))
			r := acquired(t, recv(t, chans[0]))
			if r.Holder.LeaseId != ids[1] {
				t.Fatalf("first grant went to %s, want %s", r.Holder.LeaseId, ids[1])
			}
			// Nothing behind it was granted while it holds all 3 permits.
			if q := c.QueueLen(c.Leader(), "fifo", "s"); q != n-1 {
				t.Fatalf("queue %d, want %d", q, n-1)
			}
			prevToken := r.Holder.FencingToken
			must(cl.ReleaseSemaphore(ctxT(t), &pb.ReleaseSemaphoreRequest{NamespaceName: "fifo", SemaphoreName: "s", LeaseId: ids[1]}))
			// The light waiters are granted strictly in queue order; each
			// releases as soon as it is granted, letting the next one in.
			for i := 1; i < n; i++ {
				r := acquired(t, recv(t, chans[i]))
				if r.Holder.LeaseId != ids[i+1] {
					t.Fatalf("grant %d went to %s, want %s", i, r.Holder.LeaseId, ids[i+1])
				}
				if r.Holder.FencingToken <= prevToken {
					t.Fatalf("fencing token %d not above %d", r.Holder.FencingToken, prevToken)
				}
				prevToken = r.Holder.FencingToken
				must(cl.ReleaseSemaphore(ctxT(t), &pb.ReleaseSemaphoreRequest{NamespaceName: "fifo", SemaphoreName: "s", LeaseId: ids[i+1]}))
			}
		})
	}
}

// Many concurrent waiters on one permit: every one is granted exactly once
// and the holders never exceed the permits.
func TestConcurrentHandOffNeverOverGrants(t *testing.T) {
	c := startOne(t)
	cl := c.Client(0)
	const workers, rounds = 8, 10
	ids := seed(t, cl, "conc", "s", 2, workers, 60)
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(lease string) {
			defer wg.Done()
			for i := 0; i < rounds; i++ {
				r, err := cl.AcquireSemaphore(context.Background(), &pb.AcquireSemaphoreRequest{NamespaceName: "conc", SemaphoreName: "s", LeaseId: lease, Weight: 1, TimeoutSeconds: 60})
				if err != nil || r.Outcome != pb.AcquireOutcome_ACQUIRE_OUTCOME_ACQUIRED {
					errs <- fmt.Errorf("acquire: %v %v", r, err)
					return
				}
				if r.Semaphore.ActiveHolds > 2 {
					errs <- fmt.Errorf("active_holds %d > permits 2", r.Semaphore.ActiveHolds)
					return
				}
				if _, err := cl.ReleaseSemaphore(context.Background(), &pb.ReleaseSemaphoreRequest{NamespaceName: "conc", SemaphoreName: "s", LeaseId: lease}); err != nil {
					errs <- err
					return
				}
			}
		}(ids[w])
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if err := c.Nodes[0].FSM.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}
