package client_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grackle-coord/grackle/client"
	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
	"github.com/grackle-coord/grackle/server/servertest"
)

func createWaitGroup(t *testing.T, cli *client.Client, ns, name string, counter, expiresAt int64) {
	t.Helper()
	if _, err := cli.CreateWaitGroup(ctxT(t), &pb.CreateWaitGroupRequest{NamespaceName: ns, WaitGroupName: name, Counter: counter, ExpiresAt: expiresAt}); err != nil {
		t.Fatal(err)
	}
}

func createBarrier(t *testing.T, cli *client.Client, ns, name string, expected int64) {
	t.Helper()
	if _, err := cli.CreateBarrier(ctxT(t), &pb.CreateBarrierRequest{NamespaceName: ns, BarrierName: name, ExpectedProcesses: expected}); err != nil {
		t.Fatal(err)
	}
}

// A waiter is woken by the batch that completes the group; batches of
// more than 100 jobs are split; a retried batch counts nothing twice, and
// new jobs after completion are refused with ErrWaitGroupNotActive.
func TestWaitGroupCompleteAndWait(t *testing.T) {
	c := servertest.Start(t, 1, nil)
	cli := newClient(t, addrs(c)...)
	lockNS(t, cli, "wg")
	createWaitGroup(t, cli, "wg", "batch", 250, 0)
	w := cli.WaitGroup("wg", "batch")

	type result struct {
		g   *pb.WaitGroup
		o   pb.WaitGroupWaitOutcome
		err error
	}
	woken := make(chan result, 1)
	go func() {
		g, o, err := w.Wait(ctxT(t))
		woken <- result{g, o, err}
	}()

	var ids []string
	for i := range 250 {
		ids = append(ids, fmt.Sprintf("job-%03d", i))
	}
	res, err := w.Complete(ctxT(t), ids[:120]...)
	if err != nil || res.NewlyCompleted != 120 || res.WaitGroup.GetStatus() != pb.WaitGroupStatus_WAIT_GROUP_STATUS_ACTIVE {
		t.Fatalf("first 120: %+v %v", res, err)
	}
	select {
	case r := <-woken:
		t.Fatalf("woken before completion: %+v", r)
	case <-time.After(200 * time.Millisecond):
	}
	res, err = w.Complete(ctxT(t), ids...) // 120 again and 130 new
	if err != nil || res.NewlyCompleted != 130 || res.WaitGroup.GetStatus() != pb.WaitGroupStatus_WAIT_GROUP_STATUS_COMPLETED ||
		res.WaitGroup.GetCompletedJobs() != 250 {
		t.Fatalf("all 250: %+v %v", res, err)
	}
	select {
	case r := <-woken:
		if r.err != nil || r.o != pb.WaitGroupWaitOutcome_WAIT_GROUP_WAIT_OUTCOME_COMPLETED || r.g.GetFinishedAt() == 0 {
			t.Fatalf("wait: %+v", r)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter was not woken by the completing batch")
	}
	// A retry after completion succeeds and counts nothing.
	if res, err := w.Complete(ctxT(t), ids[:10]...); err != nil || res.NewlyCompleted != 0 {
		t.Fatalf("retry: %+v %v", res, err)
	}
	_, err = w.Complete(ctxT(t), "late")
	if !errors.Is(err, client.ErrWaitGroupNotActive) || errors.Is(err, client.ErrWaitGroupExpired) || status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("new job after completion: %v", err)
	}
	// Wait on a finished group returns at once.
	if g, o, err := w.Wait(ctxT(t)); err != nil || o != pb.WaitGroupWaitOutcome_WAIT_GROUP_WAIT_OUTCOME_COMPLETED || g.GetCompletedJobs() != 250 {
		t.Fatalf("wait again: %v %v %v", g, o, err)
	}
}

// A group whose expires_at passes ends its waiters with EXPIRED
// (ErrWaitGroupExpired) and refuses new jobs; a wait cut short by the
// context's deadline is ErrWaitTimeout.
func TestWaitGroupExpiresAndTimesOut(t *testing.T) {
	c := servertest.Start(t, 1, nil)
	cli := newClient(t, addrs(c)...)
	lockNS(t, cli, "wg")
	createWaitGroup(t, cli, "wg", "never", 2, 0)
	short, cancel := context.WithTimeout(ctxT(t), 1500*time.Millisecond)
	defer cancel()
	start := time.Now()
	g, o, err := cli.WaitGroup("wg", "never").Wait(short)
	var we *client.WaitError
	if !errors.Is(err, client.ErrWaitTimeout) || !errors.Is(err, context.DeadlineExceeded) || !errors.As(err, &we) ||
		o != pb.WaitGroupWaitOutcome_WAIT_GROUP_WAIT_OUTCOME_TIMED_OUT || we.Name != "never" {
		t.Fatalf("timed out: %v %v %v", g, o, err)
	}
	if d := time.Since(start); d < time.Second || d > 5*time.Second {
		t.Fatalf("timed out after %v, want about 1.5s", d)
	}

	createWaitGroup(t, cli, "wg", "soon", 2, time.Now().Add(1500*time.Millisecond).UnixNano())
	w := cli.WaitGroup("wg", "soon")
	if _, err := w.Complete(ctxT(t), "a"); err != nil {
		t.Fatal(err)
	}
	g, o, err = w.Wait(ctxT(t))
	if !errors.Is(err, client.ErrWaitGroupExpired) || o != pb.WaitGroupWaitOutcome_WAIT_GROUP_WAIT_OUTCOME_EXPIRED ||
		g.GetStatus() != pb.WaitGroupStatus_WAIT_GROUP_STATUS_EXPIRED || g.GetCompletedJobs() != 1 {
		t.Fatalf("expired: %v %v %v", g, o, err)
	}
	_, err = w.Complete(ctxT(t), "b")
	if !errors.Is(err, client.ErrWaitGroupNotActive) || !errors.Is(err, client.ErrWaitGroupExpired) {
		t.Fatalf("new job after expiry: %v", err)
	}
	// Deleted while waited for: NotFound.
	createWaitGroup(t, cli, "wg", "doomed", 1, 0)
	done := make(chan error, 1)
	go func() { _, _, err := cli.WaitGroup("wg", "doomed").Wait(ctxT(t)); done <- err }()
	time.Sleep(300 * time.Millisecond)
	if _, err := cli.DeleteWaitGroup(ctxT(t), &pb.DeleteWaitGroupRequest{NamespaceName: "wg", WaitGroupName: "doomed"}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if status.Code(err) != codes.NotFound {
			t.Fatalf("deleted while waited for: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter of a deleted group did not end")
	}
}

// Three processes meet at a barrier twice: each ArriveAndWait returns the
// generation it passed, the last arrival returns at once, and a retried
// arrival after the trip counts nothing.
func TestBarrierArriveAndWait(t *testing.T) {
	c := servertest.Start(t, 1, nil)
	cli := newClient(t, addrs(c)...)
	lockNS(t, cli, "br")
	createBarrier(t, cli, "br", "phase", 3)
	b := cli.Barrier("br", "phase")
	for round := int64(1); round <= 2; round++ {
		var wg sync.WaitGroup
		gens := make([]int64, 3)
		errs := make([]error, 3)
		for i := range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				gens[i], errs[i] = b.ArriveAndWait(ctxT(t), fmt.Sprintf("shard-%d", i))
			}()
		}
		wg.Wait()
		for i := range 3 {
			if errs[i] != nil || gens[i] != round {
				t.Fatalf("round %d: shard-%d passed %d, %v", round, i, gens[i], errs[i])
			}
		}
	}
	st, err := b.Get(ctxT(t))
	if err != nil || st.GetGeneration() != 3 || st.GetArrivedProcesses() != 0 {
		t.Fatalf("after two rounds: %v %v", st, err)
	}
	// A retried arrival of generation 2 (the previous one): all arrived,
	// nothing counted at 3.
	a, err := b.Arrive(ctxT(t), "shard-0", 2)
	if err != nil || !a.AllArrived || a.Generation != 2 || a.State.GetArrivedProcesses() != 0 {
		t.Fatalf("retry of generation 2: %+v %v", a, err)
	}
	// A generation neither current nor previous (or not counted there).
	_, err = b.Arrive(ctxT(t), "shard-9", 1)
	var ge *client.GenerationError
	if !errors.Is(err, client.ErrGenerationMismatch) || !errors.As(err, &ge) || ge.Current != 3 {
		t.Fatalf("arrival at 1: %v", err)
	}
	// Wait: a tripped generation at once, one not begun is a mismatch, the
	// current one until the deadline.
	if st, err := b.Wait(ctxT(t), 2); err != nil || st.GetGeneration() != 3 {
		t.Fatalf("wait for 2: %v %v", st, err)
	}
	if _, err := b.Wait(ctxT(t), 4); !errors.Is(err, client.ErrGenerationMismatch) {
		t.Fatalf("wait for 4: %v", err)
	}
	short, cancel := context.WithTimeout(ctxT(t), 1200*time.Millisecond)
	defer cancel()
	if _, err := b.Arrive(ctxT(t), "shard-0", 0); err != nil {
		t.Fatal(err)
	}
	gen, err := b.ArriveAndWait(short, "shard-0") // counted already: not again
	if !errors.Is(err, client.ErrWaitTimeout) || gen != 3 {
		t.Fatalf("arrive-and-wait alone: %d %v", gen, err)
	}
	if st, _ := b.Get(ctxT(t)); st.GetArrivedProcesses() != 1 {
		t.Fatalf("arrivals %d, want 1 (shard-0 once)", st.GetArrivedProcesses())
	}
}
