package leader

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"go.uber.org/goleak"

	"github.com/grackle-coord/grackle/apierr"
	"github.com/grackle-coord/grackle/fsm"
	fsmpb "github.com/grackle-coord/grackle/proto/grackle/fsm/v1"
	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
)

// newRaft starts a single-node in-memory raft that leads.
func newRaft(t *testing.T) (*raft.Raft, *fsm.FSM) {
	t.Helper()
	f := fsm.New(fsm.Options{TempDir: t.TempDir()})
	conf := raft.DefaultConfig()
	conf.LocalID = "n1"
	conf.HeartbeatTimeout, conf.ElectionTimeout, conf.LeaderLeaseTimeout = 100*time.Millisecond, 100*time.Millisecond, 50*time.Millisecond
	conf.CommitTimeout = 5 * time.Millisecond
	conf.Logger = hclog.NewNullLogger()
	store, snaps := raft.NewInmemStore(), raft.NewInmemSnapshotStore()
	addr, trans := raft.NewInmemTransport("")
	if err := raft.BootstrapCluster(conf, store, store, snaps, trans, raft.Configuration{Servers: []raft.Server{{ID: conf.LocalID, Address: addr}}}); err != nil {
		t.Fatal(err)
	}
	r, err := raft.NewRaft(conf, f, store, store, snaps, trans)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Shutdown().Error() })
	eventually(t, "raft leads", func() bool { return r.State() == raft.Leader })
	return r, f
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for: %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func readyTerm(t *testing.T, l *Leader) *Term {
	t.Helper()
	var term *Term
	eventually(t, "a term", func() bool { term = l.Term(); return term != nil })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := term.Ready(ctx); err != nil {
		t.Fatal(err)
	}
	return term
}

func mustWrite(t *testing.T, term *Term, cmd *fsmpb.Command) *fsm.Result {
	t.Helper()
	res, err := term.Write(context.Background(), cmd)
	if err != nil {
		t.Fatalf("write %v: %v", cmd, err)
	}
	if res.Err != nil {
		t.Fatalf("write %v: %v", cmd, res.Err)
	}
	return res
}

func seedSem(t *testing.T, term *Term, permits int64, leases int) []string {
	t.Helper()
	mustWrite(t, term, &fsmpb.Command{Op: &fsmpb.Command_CreateNamespace{CreateNamespace: &fsmpb.CreateNamespace{Name: "ns"}}})
	mustWrite(t, term, &fsmpb.Command{Op: &fsmpb.Command_CreateSemaphore{CreateSemaphore: &fsmpb.CreateSemaphore{NamespaceName: "ns", Name: "s", Permits: permits}}})
	var ids []string
	for i := 0; i < leases; i++ {
		res := mustWrite(t, term, &fsmpb.Command{Op: &fsmpb.Command_CreateLease{CreateLease: &fsmpb.CreateLease{NamespaceName: "ns", LeaseId: NewLeaseID(), ProcessId: "p", TtlSeconds: 300}}})
		ids = append(ids, res.Lease.LeaseId)
	}
	return ids
}

type acqOut struct {
	resp *pb.AcquireSemaphoreResponse
	err  error
}

func acquireAsync(term *Term, lease string, timeout time.Duration) chan acqOut {
	ch := make(chan acqOut, 1)
	go func() {
		resp, _, err := term.Acquire(context.Background(), AcquireRequest{Namespace: "ns", Semaphore: "s", LeaseID: lease, Weight: 1, Timeout: timeout})
		ch <- acqOut{resp, err}
	}()
	return ch
}

func waitStates(t *testing.T, term *Term, want ...State) {
	t.Helper()
	eventually(t, "waiter states", func() bool {
		ws := term.Waiters("ns", "s")
		if len(ws) != len(want) {
			return false
		}
		for i, w := range ws {
			if w.State != want[i] {
				return false
			}
		}
		return true
	})
}

// Step-down ends every waiting call (OUTCOME_UNKNOWN) and joins every
// goroutine of the term before the next term starts; Stop joins the rest.
func TestStepDownJoinsEveryTermGoroutine(t *testing.T) {
	r, f := newRaft(t)
	before := goleak.IgnoreCurrent()
	notify := make(chan bool)
	l := New(Config{NodeID: "n1", GRPCAddress: "127.0.0.1:1", LeaseGrace: time.Second}, r, f)
	l.Start(notify)
	term := readyTerm(t, l)
	ids := seedSem(t, term, 1, 3)
	if resp, _, err := term.Acquire(context.Background(), AcquireRequest{Namespace: "ns", Semaphore: "s", LeaseID: ids[0], Weight: 1}); err != nil ||
		resp.Outcome != pb.AcquireOutcome_ACQUIRE_OUTCOME_ACQUIRED {
		t.Fatalf("first acquire: %v %v", resp, err)
	}
	a, b := acquireAsync(term, ids[1], time.Minute), acquireAsync(term, ids[2], time.Minute)
	waitStates(t, term, Waiting, Waiting)

	notify <- false
	notify <- false // returns once the first step-down (and its join) is done
	for _, ch := range []chan acqOut{a, b} {
		o := <-ch
		var le *Error
		if !errors.As(o.err, &le) || le.Reason != apierr.OutcomeUnknown {
			t.Fatalf("a waiter at step-down: %v %v, want OUTCOME_UNKNOWN", o.resp, o.err)
		}
	}
	if l.Term() != nil {
		t.Fatal("a term after step-down")
	}
	running := goleak.IgnoreAnyFunction("github.com/grackle-coord/grackle/leader.(*Leader).Start.func1")
	loop := goleak.IgnoreAnyFunction("github.com/grackle-coord/grackle/leader.(*Leader).Start.func2")
	if err := goleak.Find(before, running, loop); err != nil {
		t.Fatalf("goroutines of the ended term are still running: %v", err)
	}
	if _, err := term.Write(context.Background(), &fsmpb.Command{Op: &fsmpb.Command_CreateNamespace{CreateNamespace: &fsmpb.CreateNamespace{Name: "late"}}}); err == nil {
		t.Fatal("the ended term still proposes")
	}

	// The next term serves again, from a fresh queue.
	notify <- true
	term2 := readyTerm(t, l)
	if term2 == term {
		t.Fatal("the old term came back")
	}
	c := acquireAsync(term2, ids[1], time.Minute)
	waitStates(t, term2, Waiting)
	if _, err := term2.Release(context.Background(), "ns", "s", ids[0]); err != nil {
		t.Fatal(err)
	}
	if o := <-c; o.err != nil || o.resp.Outcome != pb.AcquireOutcome_ACQUIRE_OUTCOME_ACQUIRED {
		t.Fatalf("hand-off in the new term: %v %v", o.resp, o.err)
	}
	l.Stop()
	if err := goleak.Find(before); err != nil {
		t.Fatalf("goroutines left after Stop: %v", err)
	}
}
