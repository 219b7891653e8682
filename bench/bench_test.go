package bench_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/grackle-coord/grackle/bench"
	"github.com/grackle-coord/grackle/internal/mux"
	"github.com/grackle-coord/grackle/server/servertest"
)

// Every workload runs end to end against an in-process node, its results
// survive the JSON round trip and make a table. Timing figures come from
// `grackle bench`, not from this test: it checks counts only.
func TestEveryWorkloadRuns(t *testing.T) {
	c := servertest.Start(t, 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// As `grackle bench` runs it: the workers' calls over the connection's
	// multiplexed stream.
	m := mux.NewConn(c.Conn(0))
	defer m.Close()
	b := bench.NewGrackle([]grpc.ClientConnInterface{m}, c.Conn(0))
	o := bench.Options{Target: "grackle-test", Workers: 4, Warmup: 100 * time.Millisecond, Duration: 400 * time.Millisecond,
		Runs: 1, TTL: time.Minute, Hold: time.Millisecond, Trials: 3, ExpiryTTL: time.Second, Format: "json"}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := bench.RunAll(ctx, b, o, bench.Workloads, &out); err != nil {
		t.Fatal(err)
	}
	rs, err := bench.ReadResults(&out)
	if err != nil {
		t.Fatal(err)
	}
	if m.StreamCalls() == 0 {
		t.Errorf("no call went over the multiplexed stream")
	}
	if len(rs) != len(bench.Workloads) {
		t.Fatalf("%d results, want %d:\n%s", len(rs), len(bench.Workloads), out.String())
	}
	for _, r := range rs {
		t.Log(r.Line())
		if r.Errors != 0 || r.Ops == 0 {
			t.Errorf("%s: ops %d errors %d (last: %s)", r.Workload, r.Ops, r.Errors, r.LastError)
		}
		switch r.Workload {
		case "pairs", "locks":
			if r.Latency["acquire"].N == 0 || r.Latency["release"].N == 0 {
				t.Errorf("%s: no latencies: %+v", r.Workload, r.Latency)
			}
			// Two commands per pair, fewer entries when the leader packs them.
			if c, ok := r.Metrics.Get("commits_per_op"); !ok || c <= 0 || c > 2.2 {
				t.Errorf("%s: commits per pair %v (%v), want above 0 and at most 2", r.Workload, c, ok)
			}
		case "handoff", "lockhandoff":
			// One permit (one exclusive lock), four workers in FIFO order:
			// every grant but the run's first follows a release of another
			// worker.
			h := r.Latency["handoff"]
			if h.N < r.Ops-1 {
				t.Errorf("%s: %d of %d grants paired with a release", r.Workload, h.N, r.Ops)
			}
			if f, _ := r.Metrics.Get("self_handoff_frac"); f != 0 {
				t.Errorf("%s: self hand-off share %v, want 0 (FIFO)", r.Workload, f)
			}
		case "expiry":
			if r.Latency["lateness"].N != 3 {
				t.Errorf("expiry: %+v", r.Latency["lateness"])
			}
		case "waitgroup":
			// A waiter per group, woken by the completing batch.
			if g, _ := r.Metrics.Get("groups_per_s"); g <= 0 || r.Latency["wake"].N == 0 {
				t.Errorf("waitgroup: groups/s %v, wake-ups %d", g, r.Latency["wake"].N)
			}
		case "barrier":
			// Four workers: one trip per round, three waiters per round.
			if r.Latency["trip"].N != r.Ops || r.Latency["wait"].N < 3*r.Ops {
				t.Errorf("barrier: %d rounds, %d trips, %d waits", r.Ops, r.Latency["trip"].N, r.Latency["wait"].N)
			}
		}
	}
	var tbl bytes.Buffer
	if err := bench.Table(&tbl, rs, ""); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + tbl.String())
	for _, want := range []string{"acquire+release pairs/s", "acquisitions/s", "leases/s", "reads/s", "lateness",
		"| locks | acquire+release pairs/s", "| lockhandoff | hand-off p99 ms", "| waitgroup | jobs/s", "| barrier | trip p99 ms"} {
		if !strings.Contains(tbl.String(), want) {
			t.Errorf("table lacks %q", want)
		}
	}
}
