package rpc_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/grackle-coord/grackle/apierr"
	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
	"github.com/grackle-coord/grackle/server"
	"github.com/grackle-coord/grackle/server/servertest"
)

// A queue has room for --max-waiters calls, and one process for
// --max-waiters-per-process of them: past either, a blocking acquire is
// refused ResourceExhausted QUEUE_FULL, and a non-blocking one answers
// outcome UNAVAILABLE (not granted now), as it would behind the queue.
func TestQueueFullAndProcessShare(t *testing.T) {
	const maxWaiters, perProcess = 6, 3
	c := servertest.Start(t, 1, func(cfg *server.Config) {
		cfg.MaxWaiters, cfg.MaxWaitersPerProcess = maxWaiters, perProcess
	})
	api := c.Client(0)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	must(api.CreateNamespace(ctx, &pb.CreateNamespaceRequest{Name: "q"}))
	must(api.CreateSemaphore(ctx, &pb.CreateSemaphoreRequest{NamespaceName: "q", SemaphoreName: "s", Permits: 1}))
	lease := func(proc string) string {
		return must(api.CreateSemaphoreLease(ctx, &pb.CreateSemaphoreLeaseRequest{NamespaceName: "q", ProcessId: proc, TtlSeconds: 60})).Lease.LeaseId
	}
	lockLease := func(proc string) string {
		return must(api.CreateLockLease(ctx, &pb.CreateLockLeaseRequest{NamespaceName: "q", ProcessId: proc, TtlSeconds: 60})).Lease.LeaseId
	}
	semAcquire := func(id string, timeout int64) (*pb.AcquireSemaphoreResponse, error) {
		return api.AcquireSemaphore(ctx, &pb.AcquireSemaphoreRequest{NamespaceName: "q", SemaphoreName: "s", LeaseId: id, Weight: 1, TimeoutSeconds: timeout})
	}
	lockAcquire := func(id string, timeout int64) (*pb.AcquireLockResponse, error) {
		return api.AcquireLock(ctx, &pb.AcquireLockRequest{NamespaceName: "q", LockName: "l", LeaseId: id, Exclusive: true, TimeoutSeconds: timeout})
	}
	semWaiters := func() int {
		return len(must(api.ListSemaphoreWaiters(ctx, &pb.ListSemaphoreWaitersRequest{NamespaceName: "q", SemaphoreName: "s"})).Waiters)
	}
	lockWaiters := func() int {
		return len(must(api.ListLockWaiters(ctx, &pb.ListLockWaitersRequest{NamespaceName: "q", LockName: "l"})).Waiters)
	}
	// Waiting calls end with the test's context.
	wait := func(what string, waiters func() int, n int, call func()) {
		t.Helper()
		go call()
		servertest.Eventually(t, fmt.Sprintf("%s: %d waiters", what, n), 20*time.Second, func() bool { return waiters() == n })
	}

	if r := must(semAcquire(lease("holder"), 0)); r.Outcome != pb.AcquireOutcome_ACQUIRE_OUTCOME_ACQUIRED {
		t.Fatalf("the holder: %v", r)
	}
	if r := must(lockAcquire(lockLease("holder"), 0)); r.Outcome != pb.AcquireOutcome_ACQUIRE_OUTCOME_ACQUIRED {
		t.Fatalf("the lock's holder: %v", r)
	}
	// One process takes its share of each queue...
	for i := 1; i <= perProcess; i++ {
		id, lid := lease("greedy"), lockLease("greedy")
		wait("semaphore", semWaiters, i, func() { _, _ = semAcquire(id, 60) })
		wait("lock", lockWaiters, i, func() { _, _ = lockAcquire(lid, 60) })
	}
	// ... and no more.
	_, err := semAcquire(lease("greedy"), 60)
	wantReason(t, err, codes.ResourceExhausted, apierr.QueueFull)
	_, err = lockAcquire(lockLease("greedy"), 60)
	wantReason(t, err, codes.ResourceExhausted, apierr.QueueFull)
	// Other processes still queue, up to the queue's own bound.
	for i := perProcess + 1; i <= maxWaiters; i++ {
		id, lid := lease(fmt.Sprintf("other-%d", i)), lockLease(fmt.Sprintf("other-%d", i))
		wait("semaphore", semWaiters, i, func() { _, _ = semAcquire(id, 60) })
		wait("lock", lockWaiters, i, func() { _, _ = lockAcquire(lid, 60) })
	}
	_, err = semAcquire(lease("late"), 60)
	wantReason(t, err, codes.ResourceExhausted, apierr.QueueFull)
	_, err = lockAcquire(lockLease("late"), 60)
	wantReason(t, err, codes.ResourceExhausted, apierr.QueueFull)
	// A try on a full queue is not granted now: UNAVAILABLE, no error.
	if r, err := semAcquire(lease("try"), 0); err != nil || r.Outcome != pb.AcquireOutcome_ACQUIRE_OUTCOME_UNAVAILABLE || r.Semaphore == nil {
		t.Fatalf("a try on a full semaphore queue: %v, %v; want outcome UNAVAILABLE with the semaphore", r, err)
	}
	if r, err := lockAcquire(lockLease("try"), 0); err != nil || r.Outcome != pb.AcquireOutcome_ACQUIRE_OUTCOME_UNAVAILABLE || r.Lock == nil {
		t.Fatalf("a try on a full lock queue: %v, %v; want outcome UNAVAILABLE with the lock", r, err)
	}
}
