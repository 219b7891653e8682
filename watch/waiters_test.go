package watch_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grackle-coord/grackle/apierr"
	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
	"github.com/grackle-coord/grackle/server/servertest"
)

type acqResult struct {
	resp *pb.AcquireSemaphoreResponse
	err  error
}

// acquireAsync starts a blocking acquire (no retry: a raw call).
func acquireAsync(c pb.GrackleServiceClient, lease string, weight, timeout int64) chan acqResult {
	ch := make(chan acqResult, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Duration(timeout+30)*time.Second)
		defer cancel()
		r, err := c.AcquireSemaphore(ctx, &pb.AcquireSemaphoreRequest{NamespaceName: "ns", SemaphoreName: "s", LeaseId: lease, Weight: weight, TimeoutSeconds: timeout})
		ch <- acqResult{r, err}
	}()
	return ch
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

func list(t *testing.T, c pb.GrackleServiceClient, limit int32, token string) *pb.ListSemaphoreWaitersResponse {
	t.Helper()
	r, err := c.ListSemaphoreWaiters(ctxT(t), &pb.ListSemaphoreWaitersRequest{NamespaceName: "ns", SemaphoreName: "s", Limit: limit, PaginationToken: token})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// queue renders waiters as "pos:proc:weight/waiting" for comparisons.
func queue(ws []*pb.SemaphoreWaiter) string {
	var out []string
	for _, w := range ws {
		out = append(out, fmt.Sprintf("%d:%s:%d/%d", w.Position, w.ProcessId, w.Weight, w.WaitingWeight))
	}
	return strings.Join(out, " ")
}

func waitQueue(t *testing.T, c pb.GrackleServiceClient, want string) *pb.ListSemaphoreWaitersResponse {
	t.Helper()
	var last *pb.ListSemaphoreWaitersResponse
	servertest.Eventually(t, "queue "+want, 20*time.Second, func() bool {
		last = list(t, c, 0, "")
		return queue(last.Waiters) == want
	})
	return last
}

func acquireNow(t *testing.T, c pb.GrackleServiceClient, lease string, w int64) {
	t.Helper()
	r, err := c.AcquireSemaphore(ctxT(t), &pb.AcquireSemaphoreRequest{NamespaceName: "ns", SemaphoreName: "s", LeaseId: lease, Weight: w})
	if err != nil || r.Outcome != pb.AcquireOutcome_ACQUIRE_OUTCOME_ACQUIRED {
		t.Fatalf("acquire %d: %v %v", w, r, err)
	}
}

func release(t *testing.T, c pb.GrackleServiceClient, lease string) {
	t.Helper()
	if _, err := c.ReleaseSemaphore(ctxT(t), &pb.ReleaseSemaphoreRequest{NamespaceName: "ns", SemaphoreName: "s", LeaseId: lease}); err != nil {
		t.Fatal(err)
	}
}

// FIFO with a heavy head: a big waiter at the head holds back smaller ones
// that would fit; positions, weights, times and pages say so; through a
// follower too.
func TestWaitersFIFOWithHeavyHead(t *testing.T) {
	c := servertest.Start(t, 3, nil)
	li := c.WaitLeader()
	api := c.Client(li)
	ids := setup(t, api, 3, "holder", "heavy", "small1", "small2")
	acquireNow(t, api, ids["holder"], 2)
	before := time.Now().UnixNano()
	heavy := acquireAsync(api, ids["heavy"], 3, 60)
	waitQueue(t, api, "1:heavy:3/3")
	s1 := acquireAsync(api, ids["small1"], 1, 60) // 1 permit is free, but it must wait its turn
	waitQueue(t, api, "1:heavy:3/3 2:small1:1/1")
	s2 := acquireAsync(api, ids["small2"], 1, 60)
	r := waitQueue(t, api, "1:heavy:3/3 2:small1:1/1 3:small2:1/1")
	for i, w := range r.Waiters {
		if w.LeaseId == "" || w.WaitingSince < before || w.Deadline < w.WaitingSince+59e9 || w.Deadline > w.WaitingSince+61e9 {
			t.Errorf("waiter %d: %v", i, w)
		}
		if i > 0 && w.WaitingSince < r.Waiters[i-1].WaitingSince {
			t.Errorf("waiter %d arrived before waiter %d", i, i-1)
		}
	}
	// Pages of 2, forward and back.
	p1 := list(t, api, 2, "")
	if queue(p1.Waiters) != "1:heavy:3/3 2:small1:1/1" || p1.NextPaginationToken == "" || p1.PreviousPaginationToken != "" {
		t.Fatalf("page 1: %v", p1)
	}
	p2 := list(t, api, 2, p1.NextPaginationToken)
	if queue(p2.Waiters) != "3:small2:1/1" || p2.NextPaginationToken != "" || p2.PreviousPaginationToken == "" {
		t.Fatalf("page 2: %v", p2)
	}
	if back := list(t, api, 2, p2.PreviousPaginationToken); queue(back.Waiters) != queue(p1.Waiters) {
		t.Fatalf("page back: %v", back)
	}
	// A follower forwards to the leader.
	if f := list(t, c.Client(c.Follower()), 0, ""); queue(f.Waiters) != queue(r.Waiters) {
		t.Fatalf("through a follower: %v", f)
	}

	// The holder releases: the heavy head is granted, the rest move up.
	release(t, api, ids["holder"])
	if r := recv(t, heavy); r.err != nil || r.resp.Outcome != pb.AcquireOutcome_ACQUIRE_OUTCOME_ACQUIRED {
		t.Fatalf("heavy: %v %v", r.resp, r.err)
	}
	waitQueue(t, api, "1:small1:1/1 2:small2:1/1")
	release(t, api, ids["heavy"])
	for _, ch := range []chan acqResult{s1, s2} {
		if r := recv(t, ch); r.err != nil || r.resp.Outcome != pb.AcquireOutcome_ACQUIRE_OUTCOME_ACQUIRED {
			t.Fatalf("small: %v %v", r.resp, r.err)
		}
	}
	waitQueue(t, api, "")
}

func TestWaitersBadRequests(t *testing.T) {
	c := servertest.Start(t, 1, nil)
	api := c.Client(0)
	setup(t, api, 1)
	ctx := ctxT(t)
	for _, tc := range []struct {
		r     *pb.ListSemaphoreWaitersRequest
		field string
		code  codes.Code
	}{
		{&pb.ListSemaphoreWaitersRequest{NamespaceName: "ns", SemaphoreName: "bad name"}, "semaphore_name", codes.InvalidArgument},
		{&pb.ListSemaphoreWaitersRequest{NamespaceName: "ns", SemaphoreName: "s", Limit: 251}, "limit", codes.InvalidArgument},
		{&pb.ListSemaphoreWaitersRequest{NamespaceName: "ns", SemaphoreName: "s", PaginationToken: "xyz"}, "pagination_token", codes.InvalidArgument},
		{&pb.ListSemaphoreWaitersRequest{NamespaceName: "ns", SemaphoreName: "nope"}, "nope", codes.NotFound},
	} {
		_, err := api.ListSemaphoreWaiters(ctx, tc.r)
		if tc.code == codes.NotFound && apierr.ReasonOf(err) != apierr.SemaphoreNotFound {
			t.Errorf("%v: %v, want reason SEMAPHORE_NOT_FOUND", tc.r, err)
		}
		if status.Code(err) != tc.code || !strings.Contains(status.Convert(err).Message(), tc.field) {
			t.Errorf("%v: %v, want %v naming %q", tc.r, err, tc.code, tc.field)
		}
	}
}

// A re-acquire that raises a hold waits for the difference only.
func TestWaitersReacquireIncrease(t *testing.T) {
	c := servertest.Start(t, 1, nil)
	api := c.Client(0)
	ids := setup(t, api, 4, "a", "b")
	acquireNow(t, api, ids["a"], 2)
	acquireNow(t, api, ids["b"], 2)
	up := acquireAsync(api, ids["a"], 3, 60)
	waitQueue(t, api, "1:a:3/1")
	release(t, api, ids["b"])
	if r := recv(t, up); r.err != nil || r.resp.Outcome != pb.AcquireOutcome_ACQUIRE_OUTCOME_ACQUIRED || r.resp.Holder.Weight != 3 {
		t.Fatalf("raise: %v %v", r.resp, r.err)
	}
	waitQueue(t, api, "")
}

// A waiter whose lease is revoked, or expires, leaves the queue; the one
// behind it moves to the head; a watcher sees each step.
func TestWaitersRevokeAndExpiry(t *testing.T) {
	c := servertest.Start(t, 1, nil)
	api := c.Client(0)
	ids := setup(t, api, 1, "holder", "revoked", "last")
	ctx := ctxT(t)
	short, err := api.CreateSemaphoreLease(ctx, &pb.CreateSemaphoreLeaseRequest{NamespaceName: "ns", ProcessId: "expiring", TtlSeconds: 2})
	if err != nil {
		t.Fatal(err)
	}
	w := openWatch(t, api, ctx, "ns", "s")
	acquireNow(t, api, ids["holder"], 1)
	rv := acquireAsync(api, ids["revoked"], 1, 60)
	waitQueue(t, api, "1:revoked:1/1")
	ex := acquireAsync(api, short.Lease.LeaseId, 1, 60)
	waitQueue(t, api, "1:revoked:1/1 2:expiring:1/1")
	last := acquireAsync(api, ids["last"], 1, 60)
	waitQueue(t, api, "1:revoked:1/1 2:expiring:1/1 3:last:1/1")
	w.waitFor("three waiters", func(m *pb.WatchSemaphoreResponse) bool {
		return queue(m.Waiters) == "1:revoked:1/1 2:expiring:1/1 3:last:1/1" && m.WaitersCount == 3
	})

	if _, err := api.RevokeSemaphoreLease(ctx, &pb.RevokeSemaphoreLeaseRequest{NamespaceName: "ns", LeaseId: ids["revoked"]}); err != nil {
		t.Fatal(err)
	}
	if r := recv(t, rv); status.Code(r.err) != codes.NotFound {
		t.Fatalf("revoked waiter: %v %v", r.resp, r.err)
	}
	waitQueue(t, api, "1:expiring:1/1 2:last:1/1")
	w.waitFor("the revoked waiter gone", func(m *pb.WatchSemaphoreResponse) bool { return queue(m.Waiters) == "1:expiring:1/1 2:last:1/1" })
	// The short lease expires (its TTL is 2 s; nothing refreshes it).
	if r := recv(t, ex); status.Code(r.err) != codes.NotFound {
		t.Fatalf("expired waiter: %v %v", r.resp, r.err)
	}
	waitQueue(t, api, "1:last:1/1")
	w.waitFor("the last waiter at the head", func(m *pb.WatchSemaphoreResponse) bool { return queue(m.Waiters) == "1:last:1/1" })
	release(t, api, ids["holder"])
	if r := recv(t, last); r.err != nil || r.resp.Outcome != pb.AcquireOutcome_ACQUIRE_OUTCOME_ACQUIRED {
		t.Fatalf("last: %v %v", r.resp, r.err)
	}
	m := w.waitFor("last holds", func(m *pb.WatchSemaphoreResponse) bool { return holderIDs(m) == "last" && len(m.Waiters) == 0 })
	if m.WaitersCount != 0 {
		t.Fatalf("final state: %v", m)
	}
	// A waiter that gives up (its timeout: no Raft entry of its own)
	// leaves too; the watch says so, at the index it had already seen.
	gaveUp := acquireAsync(api, ids["holder"], 1, 1)
	seen := w.waitFor("a waiter that will give up", func(m *pb.WatchSemaphoreResponse) bool { return queue(m.Waiters) == "1:holder:1/1" })
	if r := recv(t, gaveUp); r.err != nil || r.resp.Outcome != pb.AcquireOutcome_ACQUIRE_OUTCOME_TIMED_OUT {
		t.Fatalf("gave up: %v %v", r.resp, r.err)
	}
	gone := w.waitAfter(seen, "the waiter gone after its timeout", func(m *pb.WatchSemaphoreResponse) bool {
		return len(m.Waiters) == 0 && holderIDs(m) == "last"
	})
	if gone.RaftIndex < seen.RaftIndex {
		t.Fatalf("index went back from %d to %d", seen.RaftIndex, gone.RaftIndex)
	}
	t.Logf("waiter seen at index %d, gone at index %d", seen.RaftIndex, gone.RaftIndex)
}

// The queue is leader memory: after a leader change the new leader's queue
// holds only the calls retried there. Raw calls (no client retry) end with
// Unavailable and the new queue is empty.
func TestWaitersAcrossLeaderChange(t *testing.T) {
	c := servertest.Start(t, 3, nil)
	li := c.WaitLeader()
	api := c.Client(li)
	ids := setup(t, api, 1, "holder", "waiter")
	acquireNow(t, api, ids["holder"], 1)
	ch := acquireAsync(api, ids["waiter"], 1, 60)
	waitQueue(t, api, "1:waiter:1/1")
	if _, err := c.TransferLeadership(ctxT(t), li, ""); err != nil {
		t.Fatal(err)
	}
	if r := recv(t, ch); status.Code(r.err) != codes.Unavailable {
		t.Fatalf("waiter across the change: %v %v", r.resp, r.err)
	}
	nl := c.WaitLeader()
	if nl == li {
		t.Fatal("leadership did not move")
	}
	waitQueue(t, c.Client(nl), "")
	// The old leader forwards the listing to the new one.
	if r := list(t, c.Client(li), 0, ""); len(r.Waiters) != 0 {
		t.Fatalf("through the old leader: %v", r)
	}
}
