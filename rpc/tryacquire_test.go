package rpc_test

import (
	"sync"
	"testing"

	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
)

// Concurrent non-blocking acquires that fit are all granted: an acquire
// still in flight is not a waiter, and nobody waits here.
func TestConcurrentTryAcquiresAllGranted(t *testing.T) {
	c := startOne(t)
	cl := c.Client(0)
	const n = 50
	ids := seed(t, cl, "try", "s", 1000, n, 60)
	out := make([]*pb.AcquireSemaphoreResponse, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			<-start
			out[i], errs[i] = cl.AcquireSemaphore(ctxT(t), &pb.AcquireSemaphoreRequest{NamespaceName: "try", SemaphoreName: "s", LeaseId: ids[i], Weight: 1})
		}(i)
	}
	close(start)
	wg.Wait()
	for i := 0; i < n; i++ {
		if errs[i] != nil || out[i].Outcome != pb.AcquireOutcome_ACQUIRE_OUTCOME_ACQUIRED {
			t.Errorf("acquire %d: %v %v", i, out[i], errs[i])
		}
	}
	g := must(cl.GetSemaphore(ctxT(t), &pb.GetSemaphoreRequest{NamespaceName: "try", SemaphoreName: "s"}))
	if g.Semaphore.ActiveHolds != n {
		t.Fatalf("active_holds %d, want %d", g.Semaphore.ActiveHolds, n)
	}
}

// A non-blocking acquire that would fit but finds a real waiter ahead of
// it (head-of-line) is UNAVAILABLE, and the waiter keeps its place.
func TestTryAcquireBehindWaiterUnavailable(t *testing.T) {
	c := startOne(t)
	cl := c.Client(0)
	ids := seed(t, cl, "hol", "s", 2, 3, 60)
	acquireNow(t, cl, "hol", "s", ids[0], 1)
	big := acquireAsync(cl, "hol", "s", ids[1], 2, 60) // must wait for ids[0]
	waitQueue(t, c, "hol", "s", 1)
	for i := 0; i < 3; i++ {
		r := must(cl.AcquireSemaphore(ctxT(t), &pb.AcquireSemaphoreRequest{NamespaceName: "hol", SemaphoreName: "s", LeaseId: ids[2], Weight: 1}))
		if r.Outcome != pb.AcquireOutcome_ACQUIRE_OUTCOME_UNAVAILABLE {
			t.Fatalf("try-acquire %d behind a waiter: %v", i, r)
		}
	}
	must(cl.ReleaseSemaphore(ctxT(t), &pb.ReleaseSemaphoreRequest{NamespaceName: "hol", SemaphoreName: "s", LeaseId: ids[0]}))
	if r := acquired(t, recv(t, big)); r.Holder.LeaseId != ids[1] {
		t.Fatalf("granted %v", r.Holder)
	}
}
