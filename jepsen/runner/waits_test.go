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

// runWaitWorkload runs the wait-group and barrier workloads (each call to
// a random node) against an in-process 3-node cluster for d (or, with
// until, until it holds for the history so far, checked every second),
// then the final reads, and returns the history. No faults: this checks
// the workloads and the checkers against the real server, without root.
func runWaitWorkload(t *testing.T, completers, barriers int, d time.Duration, until func(*history.History) bool) *history.History {
	c := servertest.Start(t, 3, nil)
	li := c.WaitLeader()
	ctx := context.Background()
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := c.Client(li).CreateNamespace(cctx, &pb.CreateNamespaceRequest{Name: ns}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Client(li).GetWaitGroup(cctx, &pb.GetWaitGroupRequest{NamespaceName: ns, WaitGroupName: "probe"}); status.Code(err) == codes.Unimplemented {
		t.Skip("the server does not serve wait groups yet")
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
	if err := w.setupBarriers(ctx, rand.New(rand.NewSource(1)), barriers); err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithTimeout(ctx, d)
	defer stop()
	var wg sync.WaitGroup
	w.startWaits(runCtx, &wg, 1, completers)
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
	h := &history.History{Seed: 1, Nodes: 3, Duration: d, Permits: map[string]int64{}, Meta: map[string]string{}}
	h.HealedAt = w.rec.since()
	w.finalWaits(ctx, rand.New(rand.NewSource(99)), time.Now().Add(30*time.Second))
	h.ServedAgainAt = h.HealedAt
	h.Ops = w.rec.ops
	h.WaitGroups, h.Barriers = len(w.waits.groups), len(w.waits.barriers)
	sort.SliceStable(h.Ops, func(i, j int) bool { return h.Ops[i].Invoke < h.Ops[j].Invoke })
	return h
}

func waitResults(h *history.History) map[string]check.Result {
	return map[string]check.Result{
		check.NameWaitGroups: check.WaitGroups(h),
		check.NameBarriers:   check.Barriers(h),
		check.NameAccess:     check.Access(h),
	}
}

// The wait workloads against a correct server: the checkers find
// nothing, and the run exercises them (groups completed and expired,
// generations tripped, waiters released, participants read).
func TestWaitWorkloadAgainstServer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-node cluster")
	}
	if os.Getenv("GRACKLE_FAULT") != "" {
		t.Skip("GRACKLE_FAULT is set: see TestWaitWorkloadCatchesFault")
	}
	h := runWaitWorkload(t, 4, 2, 8*time.Second, nil)
	counts := map[string]int{}
	for _, o := range h.Ops {
		counts[o.Kind+":"+o.Outcome+o.WaitOutcome]++
	}
	t.Logf("%d ops, %d wait groups, %d barriers: %v", len(h.Ops), h.WaitGroups, h.Barriers, counts)
	shown := 0
	for _, o := range h.Ops {
		if o.Outcome == history.Info || o.Outcome == history.Fail && o.Code != "FailedPrecondition" && o.Code != "InvalidArgument" {
			if shown++; shown <= 30 {
				t.Logf("  %s", check.FormatOp(o))
			}
		}
	}
	rs := waitResults(h)
	for _, name := range []string{check.NameWaitGroups, check.NameBarriers, check.NameAccess} {
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
		{check.NameWaitGroups, "groups_completed"},
		{check.NameWaitGroups, "groups_expired"},
		{check.NameWaitGroups, "completed_observations"},
		{check.NameBarriers, "generations_tripped"},
		{check.NameBarriers, "waits_tripped"},
		{check.NameBarriers, "participant_reads"},
	} {
		if rs[s.checker].Stats[s.stat] == 0 {
			t.Errorf("%s: %s is 0: the workload exercises too little", s.checker, s.stat)
		}
	}
	for _, k := range []string{"wg_complete:ok", "wg_complete:fail", "wg_wait:okCOMPLETED", "wg_jobs:ok", "barrier_arrive:ok", "barrier_wait:okTRIPPED", "barrier_participants:ok"} {
		if counts[k] == 0 {
			t.Errorf("no %s in the history", k)
		}
	}
}
