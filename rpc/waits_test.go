package rpc_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grackle-coord/grackle/apierr"
	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
)

// Wait groups and barriers end to end on a real node: the waits are woken
// by the commits that finish, trip or delete what they wait for.

func newWaitEnv(t *testing.T) (pb.GrackleServiceClient, string) {
	cl := startOne(t)
	c := cl.Client(cl.WaitLeader())
	must(c.CreateNamespace(ctxT(t), &pb.CreateNamespaceRequest{Name: "batch"}))
	return c, "batch"
}

func jobs(ids ...string) []*pb.WaitGroupJob {
	out := make([]*pb.WaitGroupJob, len(ids))
	for i, id := range ids {
		out[i] = &pb.WaitGroupJob{JobId: id}
	}
	return out
}

type waitResult[T any] struct {
	r   T
	err error
}

func asyncWait[T any](f func() (T, error)) <-chan waitResult[T] {
	out := make(chan waitResult[T], 1)
	go func() {
		r, err := f()
		out <- waitResult[T]{r, err}
	}()
	return out
}

func recvWait[T any](t *testing.T, ch <-chan waitResult[T]) waitResult[T] {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(30 * time.Second):
		t.Fatal("a wait did not return")
	}
	panic("unreachable")
}

func TestWaitGroupCompletesAndWakesWaiters(t *testing.T) {
	c, ns := newWaitEnv(t)
	ctx := ctxT(t)
	must(c.CreateWaitGroup(ctx, &pb.CreateWaitGroupRequest{NamespaceName: ns, WaitGroupName: "nightly", Counter: 3}))
	waiter := asyncWait(func() (*pb.WaitForWaitGroupResponse, error) {
		return c.WaitForWaitGroup(context.Background(), &pb.WaitForWaitGroupRequest{NamespaceName: ns, WaitGroupName: "nightly", TimeoutSeconds: 60})
	})
	r := must(c.CompleteJobsFromWaitGroup(ctx, &pb.CompleteJobsFromWaitGroupRequest{NamespaceName: ns, WaitGroupName: "nightly", Jobs: jobs("a", "b", "a")}))
	if r.NewlyCompleted != 2 || r.WaitGroup.CompletedJobs != 2 || r.WaitGroup.Status != pb.WaitGroupStatus_WAIT_GROUP_STATUS_ACTIVE {
		t.Fatalf("after a, b, a: %v", r)
	}
	look := must(c.WaitForWaitGroup(ctx, &pb.WaitForWaitGroupRequest{NamespaceName: ns, WaitGroupName: "nightly"}))
	if look.Outcome != pb.WaitGroupWaitOutcome_WAIT_GROUP_WAIT_OUTCOME_TIMED_OUT {
		t.Fatalf("a look at an active group: %v", look)
	}
	_, err := c.CompleteJobsFromWaitGroup(ctx, &pb.CompleteJobsFromWaitGroupRequest{NamespaceName: ns, WaitGroupName: "nightly", Jobs: jobs("c", "d")})
	wantCode(t, err, codes.InvalidArgument) // too many jobs: all or none
	r = must(c.CompleteJobsFromWaitGroup(ctx, &pb.CompleteJobsFromWaitGroupRequest{NamespaceName: ns, WaitGroupName: "nightly", Jobs: jobs("b", "c")}))
	if r.NewlyCompleted != 1 || r.WaitGroup.Status != pb.WaitGroupStatus_WAIT_GROUP_STATUS_COMPLETED || r.WaitGroup.FinishedAt == 0 {
		t.Fatalf("the completing call: %v", r)
	}
	w := recvWait(t, waiter)
	if w.err != nil || w.r.Outcome != pb.WaitGroupWaitOutcome_WAIT_GROUP_WAIT_OUTCOME_COMPLETED || w.r.WaitGroup.CompletedJobs != 3 {
		t.Fatalf("waiter: %v %v", w.r, w.err)
	}
	// A retried batch succeeds with the state as it is; a new job is refused.
	r = must(c.CompleteJobsFromWaitGroup(ctx, &pb.CompleteJobsFromWaitGroupRequest{NamespaceName: ns, WaitGroupName: "nightly", Jobs: jobs("c", "a")}))
	if r.NewlyCompleted != 0 || r.WaitGroup.CompletedJobs != 3 {
		t.Fatalf("retry: %v", r)
	}
	_, err = c.CompleteJobsFromWaitGroup(ctx, &pb.CompleteJobsFromWaitGroupRequest{NamespaceName: ns, WaitGroupName: "nightly", Jobs: jobs("z")})
	wantCode(t, err, codes.FailedPrecondition)
	if apierr.ReasonOf(err) != apierr.WaitGroupNotActive || apierr.Info(err).GetMetadata()[apierr.KeyStatus] != "WAIT_GROUP_STATUS_COMPLETED" {
		t.Fatalf("new job on a completed group: %v", err)
	}
	page := must(c.ListWaitGroupCompletedJobs(ctx, &pb.ListWaitGroupCompletedJobsRequest{NamespaceName: ns, WaitGroupName: "nightly"}))
	if len(page.Jobs) != 3 || page.Jobs[0].JobId != "a" || page.Jobs[2].JobId != "c" {
		t.Fatalf("jobs: %v", page.Jobs)
	}
}

func TestWaitGroupExpiresAndWakesWaiters(t *testing.T) {
	c, ns := newWaitEnv(t)
	ctx := ctxT(t)
	at := time.Now().Add(500 * time.Millisecond).UnixNano()
	must(c.CreateWaitGroup(ctx, &pb.CreateWaitGroupRequest{NamespaceName: ns, WaitGroupName: "late", Counter: 2, ExpiresAt: at}))
	w := must(c.WaitForWaitGroup(ctx, &pb.WaitForWaitGroupRequest{NamespaceName: ns, WaitGroupName: "late", TimeoutSeconds: 30}))
	if w.Outcome != pb.WaitGroupWaitOutcome_WAIT_GROUP_WAIT_OUTCOME_EXPIRED || w.WaitGroup.FinishedAt != at ||
		w.WaitGroup.Status != pb.WaitGroupStatus_WAIT_GROUP_STATUS_EXPIRED {
		t.Fatalf("waiter of an expiring group: %v", w)
	}
	_, err := c.CreateWaitGroup(ctx, &pb.CreateWaitGroupRequest{NamespaceName: ns, WaitGroupName: "past", Counter: 2, ExpiresAt: at})
	wantCode(t, err, codes.InvalidArgument)
}

func TestWaitGroupDeletedEndsWaiters(t *testing.T) {
	c, ns := newWaitEnv(t)
	ctx := ctxT(t)
	must(c.CreateWaitGroup(ctx, &pb.CreateWaitGroupRequest{NamespaceName: ns, WaitGroupName: "gone", Counter: 2}))
	waiter := asyncWait(func() (*pb.WaitForWaitGroupResponse, error) {
		return c.WaitForWaitGroup(context.Background(), &pb.WaitForWaitGroupRequest{NamespaceName: ns, WaitGroupName: "gone", TimeoutSeconds: 60})
	})
	// Whether the waiter registered before the delete or looks after it,
	// its outcome is the same: NotFound.
	if !must(c.DeleteWaitGroup(ctx, &pb.DeleteWaitGroupRequest{NamespaceName: ns, WaitGroupName: "gone"})).Existed {
		t.Fatal("delete did not find the group")
	}
	w := recvWait(t, waiter)
	if status.Code(w.err) != codes.NotFound || apierr.ReasonOf(w.err) != apierr.WaitGroupNotFound {
		t.Fatalf("waiter of a deleted group: %v %v", w.r, w.err)
	}
	if must(c.DeleteWaitGroup(ctx, &pb.DeleteWaitGroupRequest{NamespaceName: ns, WaitGroupName: "gone"})).Existed {
		t.Fatal("a second delete found the group")
	}
}

func TestBarrierTripsAndWakesWaiters(t *testing.T) {
	c, ns := newWaitEnv(t)
	ctx := ctxT(t)
	must(c.CreateBarrier(ctx, &pb.CreateBarrierRequest{NamespaceName: ns, BarrierName: "phase", ExpectedProcesses: 3}))
	arrive := func(proc string, gen int64) (*pb.ArriveAtBarrierResponse, error) {
		return c.ArriveAtBarrier(ctx, &pb.ArriveAtBarrierRequest{NamespaceName: ns, BarrierName: "phase", ProcessId: proc, ExpectedGeneration: gen})
	}
	for _, p := range []string{"s1", "s2", "s1"} {
		if r := must(arrive(p, 1)); r.AllArrived || r.Barrier.Generation != 1 {
			t.Fatalf("arrival of %s: %v", p, r)
		}
	}
	var waiters []<-chan waitResult[*pb.WaitAtBarrierResponse]
	for range 2 {
		waiters = append(waiters, asyncWait(func() (*pb.WaitAtBarrierResponse, error) {
			return c.WaitAtBarrier(context.Background(), &pb.WaitAtBarrierRequest{NamespaceName: ns, BarrierName: "phase", ExpectedGeneration: 1, TimeoutSeconds: 60})
		}))
	}
	if b := must(c.GetBarrier(ctx, &pb.GetBarrierRequest{NamespaceName: ns, BarrierName: "phase"})).Barrier; b.ArrivedProcesses != 2 {
		t.Fatalf("before the last arrival: %v", b)
	}
	r := must(arrive("s3", 1))
	if !r.AllArrived || r.Barrier.Generation != 2 || r.Barrier.ArrivedProcesses != 0 {
		t.Fatalf("the last arrival: %v", r)
	}
	for _, w := range waiters {
		if got := recvWait(t, w); got.err != nil || got.r.Outcome != pb.BarrierWaitOutcome_BARRIER_WAIT_OUTCOME_TRIPPED {
			t.Fatalf("waiter: %v %v", got.r, got.err)
		}
	}
	// Retries of counted arrivals after the trip succeed.
	for _, p := range []string{"s3", "s1"} {
		if r := must(arrive(p, 1)); !r.AllArrived || r.Barrier.Generation != 2 {
			t.Fatalf("retry of %s: %v", p, r)
		}
	}
	_, err := arrive("s9", 1) // never arrived at generation 1
	wantCode(t, err, codes.FailedPrecondition)
	_, err = arrive("s1", 3)
	if apierr.ReasonOf(err) != apierr.GenerationMismatch || apierr.Info(err).GetMetadata()[apierr.KeyCurrentGeneration] != "2" {
		t.Fatalf("arrival at generation 3: %v", err)
	}
	_, err = c.WaitAtBarrier(ctx, &pb.WaitAtBarrierRequest{NamespaceName: ns, BarrierName: "phase", ExpectedGeneration: 3})
	if apierr.ReasonOf(err) != apierr.GenerationMismatch {
		t.Fatalf("wait at a generation not begun: %v", err)
	}
	p := must(c.ListBarrierParticipants(ctx, &pb.ListBarrierParticipantsRequest{NamespaceName: ns, BarrierName: "phase", Generation: 1}))
	if p.Generation != 1 || len(p.Participants) != 3 || p.Participants[0].ProcessId != "s1" || p.Participants[2].ProcessId != "s3" {
		t.Fatalf("participants of generation 1: %v", p)
	}
	if p := must(c.ListBarrierParticipants(ctx, &pb.ListBarrierParticipantsRequest{NamespaceName: ns, BarrierName: "phase"})); p.Generation != 2 || len(p.Participants) != 0 {
		t.Fatalf("participants of the current generation: %v", p)
	}
	// An update that lowers expected_processes to the arrivals trips it.
	must(arrive("s1", 2))
	b := must(c.GetBarrier(ctx, &pb.GetBarrierRequest{NamespaceName: ns, BarrierName: "phase"})).Barrier
	u := must(c.UpdateBarrier(ctx, &pb.UpdateBarrierRequest{NamespaceName: ns, BarrierName: "phase", ExpectedProcesses: 1, ExpectedVersion: b.Version}))
	if !u.Tripped || u.Barrier.Generation != 3 {
		t.Fatalf("update to the arrivals: %v", u)
	}
	if w := must(c.WaitAtBarrier(ctx, &pb.WaitAtBarrierRequest{NamespaceName: ns, BarrierName: "phase", ExpectedGeneration: 2})); w.Outcome != pb.BarrierWaitOutcome_BARRIER_WAIT_OUTCOME_TRIPPED {
		t.Fatalf("wait at a tripped generation: %v", w)
	}
}

func TestBarrierDeletedEndsWaiters(t *testing.T) {
	c, ns := newWaitEnv(t)
	ctx := ctxT(t)
	must(c.CreateBarrier(ctx, &pb.CreateBarrierRequest{NamespaceName: ns, BarrierName: "b", ExpectedProcesses: 2}))
	waiter := asyncWait(func() (*pb.WaitAtBarrierResponse, error) {
		return c.WaitAtBarrier(context.Background(), &pb.WaitAtBarrierRequest{NamespaceName: ns, BarrierName: "b", ExpectedGeneration: 1, TimeoutSeconds: 60})
	})
	must(c.DeleteNamespace(ctx, &pb.DeleteNamespaceRequest{NamespaceName: ns}))
	if w := recvWait(t, waiter); status.Code(w.err) != codes.NotFound {
		t.Fatalf("waiter of a barrier deleted with its namespace: %v %v", w.r, w.err)
	}
}

func TestWaitsBadInput(t *testing.T) {
	c, ns := newWaitEnv(t)
	ctx := ctxT(t)
	must(c.CreateWaitGroup(ctx, &pb.CreateWaitGroupRequest{NamespaceName: ns, WaitGroupName: "w", Counter: 5}))
	must(c.CreateBarrier(ctx, &pb.CreateBarrierRequest{NamespaceName: ns, BarrierName: "b", ExpectedProcesses: 2}))
	many := make([]string, 101)
	for i := range many {
		many[i] = "j" + string(rune('a'+i%26)) + string(rune('a'+i/26))
	}
	for name, err := range map[string]error{
		"counter 0":              second(c.CreateWaitGroup(ctx, &pb.CreateWaitGroupRequest{NamespaceName: ns, WaitGroupName: "x", Counter: 0})),
		"counter over the max":   second(c.CreateWaitGroup(ctx, &pb.CreateWaitGroupRequest{NamespaceName: ns, WaitGroupName: "x", Counter: 1_000_001})),
		"expires_at in the past": second(c.CreateWaitGroup(ctx, &pb.CreateWaitGroupRequest{NamespaceName: ns, WaitGroupName: "x", Counter: 1, ExpiresAt: 1})),
		"101 jobs":               second(c.CompleteJobsFromWaitGroup(ctx, &pb.CompleteJobsFromWaitGroupRequest{NamespaceName: ns, WaitGroupName: "w", Jobs: jobs(many...)})),
		"no jobs":                second(c.CompleteJobsFromWaitGroup(ctx, &pb.CompleteJobsFromWaitGroupRequest{NamespaceName: ns, WaitGroupName: "w"})),
		"bad job_id":             second(c.CompleteJobsFromWaitGroup(ctx, &pb.CompleteJobsFromWaitGroupRequest{NamespaceName: ns, WaitGroupName: "w", Jobs: jobs("a b")})),
		"expected_generation 0":  second(c.ArriveAtBarrier(ctx, &pb.ArriveAtBarrierRequest{NamespaceName: ns, BarrierName: "b", ProcessId: "p"})),
		"expected_processes 0":   second(c.CreateBarrier(ctx, &pb.CreateBarrierRequest{NamespaceName: ns, BarrierName: "x"})),
		"wait timeout 301":       second(c.WaitAtBarrier(ctx, &pb.WaitAtBarrierRequest{NamespaceName: ns, BarrierName: "b", ExpectedGeneration: 1, TimeoutSeconds: 301})),
	} {
		if status.Code(err) != codes.InvalidArgument {
			t.Errorf("%s: %v, want InvalidArgument", name, err)
		}
	}
	if w := must(c.GetWaitGroup(ctx, &pb.GetWaitGroupRequest{NamespaceName: ns, WaitGroupName: "w"})).WaitGroup; w.CompletedJobs != 0 || w.Version != 1 {
		t.Fatalf("bad input changed the group: %v", w)
	}
	_, err := c.GetWaitGroup(ctx, &pb.GetWaitGroupRequest{NamespaceName: ns, WaitGroupName: "x"})
	if apierr.ReasonOf(err) != apierr.WaitGroupNotFound {
		t.Fatalf("bad input created a group: %v", err)
	}
}

func second[T any](_ T, err error) error { return err }
