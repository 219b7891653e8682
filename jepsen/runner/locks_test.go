package runner

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"sort"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grackle-coord/grackle/jepsen/check"
	"github.com/grackle-coord/grackle/jepsen/history"
	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
	"github.com/grackle-coord/grackle/server/servertest"
)

// runLockWorkload runs the lock workload (lockers and the observer, each
// call to a random node) against an in-process 3-node cluster for d (or,
// with until, until it holds for the history so far, checked every
// second), then the final reads, and returns the history. No faults: this
// checks the workload and the checkers against the real server, without
// root.
func runLockWorkload(t *testing.T, lockers int, d time.Duration, until func(*history.History) bool) *history.History {
	c := servertest.Start(t, 3, nil)
	li := c.WaitLeader()
	ctx := context.Background()
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := c.Client(li).CreateNamespace(cctx, &pb.CreateNamespaceRequest{Name: ns}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Client(li).CreateLockLease(cctx, &pb.CreateLockLeaseRequest{NamespaceName: ns, ProcessId: "probe", TtlSeconds: 1}); status.Code(err) == codes.Unimplemented {
		t.Skip("the server does not serve locks yet")
	} else if err != nil {
		t.Fatal(err)
	}
	clients := make([]pb.GrackleServiceClient, len(c.Nodes))
	for i := range c.Nodes {
		clients[i] = c.Client(i) // made here: Client is not safe for concurrent use
	}
	w := &world{rec: &recorder{t0: time.Now()}, reg: map[string]uint64{}}
	var mu sync.Mutex
	w.pick = func(rng *rand.Rand) (pb.GrackleServiceClient, string) {
		mu.Lock()
		i := rng.Intn(len(clients))
		mu.Unlock()
		return clients[i], fmt.Sprintf("node%d", i+1)
	}
	runCtx, stop := context.WithTimeout(ctx, d)
	defer stop()
	var wg sync.WaitGroup
	for p := 0; p < lockers; p++ {
		wg.Add(1)
		go func(p int) { defer wg.Done(); w.locker(runCtx, 600+p, int64(600+p)*7919) }(p)
	}
	wg.Add(1)
	go func() { defer wg.Done(); w.lockObserver(runCtx, 850, 850*7919) }()
	if until != nil {
		go func() {
			for runCtx.Err() == nil {
				select {
				case <-runCtx.Done():
				case <-time.After(time.Second):
				}
				w.rec.mu.Lock()
				ops := append([]history.Op(nil), w.rec.ops...)
				w.rec.mu.Unlock()
				if until(&history.History{Nodes: 3, Permits: map[string]int64{}, Meta: map[string]string{}, Ops: ops}) {
					stop()
				}
			}
		}()
	}
	wg.Wait()
	h := &history.History{Seed: 1, Nodes: 3, Duration: d, Permits: map[string]int64{}, LockNames: lockNames, Meta: map[string]string{}}
	h.HealedAt = w.rec.since()
	w.finalLocks(ctx, rand.New(rand.NewSource(99)), time.Now().Add(30*time.Second))
	h.ServedAgainAt = h.HealedAt
	h.Ops = w.rec.ops
	sort.SliceStable(h.Ops, func(i, j int) bool { return h.Ops[i].Invoke < h.Ops[j].Invoke })
	return h
}

func lockResults(h *history.History) map[string]check.Result {
	out := map[string]check.Result{}
	for _, r := range check.All(h, check.Options{}) {
		out[r.Name] = r
	}
	return out
}

// The lock workload against a correct server: the lock checkers find
// nothing, and the run exercises them (grants certainly held, reads of
// them, waiters seen and then granted).
func TestLockWorkloadAgainstServer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-node cluster")
	}
	if os.Getenv("GRACKLE_FAULT") != "" {
		t.Skip("GRACKLE_FAULT is set: see TestLockWorkloadCatchesFault")
	}
	h := runLockWorkload(t, 6, 6*time.Second, nil)
	counts := map[string]int{}
	for _, o := range h.Ops {
		counts[o.Kind+":"+o.Outcome+o.AcquireOutcome]++
	}
	t.Logf("%d ops: %v", len(h.Ops), counts)
	for _, o := range h.Ops {
		if o.Outcome != history.OK {
			t.Logf("  %s", check.FormatOp(o))
		}
	}
	rs := lockResults(h)
	for _, name := range []string{check.NameLockSafety, check.NameLockFencing, check.NameLockLost, check.NameLockFIFO, check.NameAccess} {
		r := rs[name]
		t.Logf("%s: %s %v", name, r.Valid, r.Stats)
		if r.Valid != check.Valid {
			for _, a := range r.Anomalies {
				t.Errorf("%s: %s: %s", name, a.Kind, a.Description)
				for _, o := range a.Ops {
					t.Logf("    %s", check.FormatOp(o))
				}
			}
		}
	}
	for _, s := range []struct{ checker, stat string }{
		{check.NameLockSafety, "grants_certainly_held"},
		{check.NameLockLost, "certain_holds_checked"},
		{check.NameLockLost, "reads_after_heal"},
	} {
		if rs[s.checker].Stats[s.stat] == 0 {
			t.Errorf("%s: %s is 0: the workload exercises too little", s.checker, s.stat)
		}
	}
	for _, k := range []string{"lock_acquire:okACQUIRED", "lock_acquire:okUNAVAILABLE", "lock_release:ok", "lock_waiters:ok"} {
		if counts[k] == 0 {
			t.Errorf("no %s in the history", k)
		}
	}
}
