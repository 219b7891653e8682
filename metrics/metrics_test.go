package metrics_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
	"github.com/grackle-coord/grackle/server"
	"github.com/grackle-coord/grackle/server/servertest"
)

// scrape is one node's /metrics, parsed.
type scrape map[string]*dto.MetricFamily

func get(t *testing.T, addr string) scrape {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatalf("scrape %s: %v", addr, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("scrape %s: HTTP %d", addr, resp.StatusCode)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse %s: %v", addr, err)
	}
	return fams
}

// value is the value of the series name{labels} (a counter, gauge, or a
// histogram's or summary's sample count); ok is false when absent.
func (s scrape) value(name string, labels ...string) (float64, bool) {
	f := s[name]
	if f == nil {
		return 0, false
	}
next:
	for _, m := range f.Metric {
		for i := 0; i+1 < len(labels); i += 2 {
			found := false
			for _, lp := range m.Label {
				if lp.GetName() == labels[i] && lp.GetValue() == labels[i+1] {
					found = true
				}
			}
			if !found {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount()), true
		case m.Summary != nil:
			return float64(m.Summary.GetSampleCount()), true
		case m.Untyped != nil:
			return m.Untyped.GetValue(), true
		}
	}
	return 0, false
}

func (s scrape) v(t *testing.T, name string, labels ...string) float64 {
	t.Helper()
	v, ok := s.value(name, labels...)
	if !ok {
		t.Fatalf("series %s%v absent", name, labels)
	}
	return v
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// must fails the test (by panicking: only on the test's goroutine) on err.
func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// Every listed series exists on each node of a 3-node cluster and moves
// as the workload says it should: one grant per granted acquire (direct
// and queued), one expiry per lapsed lease, the RPC counters by method and
// code, the state gauges, and Raft's.
func TestSeriesMoveUnderWorkload(t *testing.T) {
	// Exact counts need no election mid-way: timeouts generous for a
	// shared, loaded machine.
	c := servertest.Start(t, 3, func(cfg *server.Config) {
		cfg.HTTPAddr = "127.0.0.1:0"
		cfg.HeartbeatTimeout, cfg.ElectionTimeout, cfg.LeaderLeaseTimeout = 2*time.Second, 2*time.Second, time.Second
	})
	li := c.WaitLeader()
	addr := func(i int) string { return c.Nodes[i].HTTPAddr() }
	before := get(t, addr(li))
	for _, name := range []string{"grackle_grants_total", "grackle_leases_expired_total"} {
		if before.v(t, name) != 0 {
			t.Fatalf("%s before any work: %v", name, before.v(t, name))
		}
	}

	cl := c.Client(li)
	ctx := ctxT(t)
	must(cl.CreateNamespace(ctx, &pb.CreateNamespaceRequest{Name: "m"}))
	must(cl.CreateSemaphore(ctx, &pb.CreateSemaphoreRequest{NamespaceName: "m", SemaphoreName: "s", Permits: 2}))
	a := must(cl.CreateSemaphoreLease(ctx, &pb.CreateSemaphoreLeaseRequest{NamespaceName: "m", ProcessId: "a", TtlSeconds: 60})).Lease.LeaseId
	b := must(cl.CreateSemaphoreLease(ctx, &pb.CreateSemaphoreLeaseRequest{NamespaceName: "m", ProcessId: "b", TtlSeconds: 60})).Lease.LeaseId
	short := must(cl.CreateSemaphoreLease(ctx, &pb.CreateSemaphoreLeaseRequest{NamespaceName: "m", ProcessId: "x", TtlSeconds: 1})).Lease.LeaseId
	acq := func(lease string, w, timeout int64) pb.AcquireOutcome {
		r, err := cl.AcquireSemaphore(ctx, &pb.AcquireSemaphoreRequest{NamespaceName: "m", SemaphoreName: "s",
			LeaseId: lease, Weight: w, TimeoutSeconds: timeout})
		if err != nil {
			t.Errorf("acquire: %v", err)
		}
		return r.GetOutcome()
	}
	if o := acq(a, 2, 0); o != pb.AcquireOutcome_ACQUIRE_OUTCOME_ACQUIRED {
		t.Fatalf("a: %v", o)
	}
	if o := acq(b, 1, 0); o != pb.AcquireOutcome_ACQUIRE_OUTCOME_UNAVAILABLE {
		t.Fatalf("b without waiting: %v", o)
	}
	if o := acq(b, 1, 1); o != pb.AcquireOutcome_ACQUIRE_OUTCOME_TIMED_OUT {
		t.Fatalf("b waiting 1 s: %v", o)
	}
	// b waits in the queue; a's release hands the permits over.
	var wg sync.WaitGroup
	wg.Add(1)
	var queued pb.AcquireOutcome
	go func() { defer wg.Done(); queued = acq(b, 1, 20) }()
	servertest.Eventually(t, "b queued on the leader", 10*time.Second, func() bool {
		v, _ := get(t, addr(li)).value("grackle_leader_queued_waiters")
		return v == 1
	})
	must(cl.ReleaseSemaphore(ctx, &pb.ReleaseSemaphoreRequest{NamespaceName: "m", SemaphoreName: "s", LeaseId: a}))
	wg.Wait()
	if queued != pb.AcquireOutcome_ACQUIRE_OUTCOME_ACQUIRED {
		t.Fatalf("b queued: %v", queued)
	}
	must(cl.RefreshSemaphoreLease(ctx, &pb.RefreshSemaphoreLeaseRequest{NamespaceName: "m", LeaseId: a, TtlSeconds: 60}))
	must(cl.RevokeSemaphoreLease(ctx, &pb.RevokeSemaphoreLeaseRequest{NamespaceName: "m", LeaseId: a}))
	_ = short // expires on its own, about a second (plus the election grace) after creation
	// Locks: a lock lease holding one lock after two grants and a release.
	ll := must(cl.CreateLockLease(ctx, &pb.CreateLockLeaseRequest{NamespaceName: "m", ProcessId: "l", TtlSeconds: 60})).Lease.LeaseId
	must(cl.AcquireLock(ctx, &pb.AcquireLockRequest{NamespaceName: "m", LockName: "x", LeaseId: ll, Exclusive: true}))
	must(cl.AcquireLock(ctx, &pb.AcquireLockRequest{NamespaceName: "m", LockName: "y", LeaseId: ll}))
	must(cl.ReleaseLock(ctx, &pb.ReleaseLockRequest{NamespaceName: "m", LockName: "y", LeaseId: ll}))

	want := map[string]float64{
		"grackle_grants_total":           2,
		"grackle_releases_total":         1,
		"grackle_lock_grants_total":      2,
		"grackle_lock_releases_total":    1,
		"grackle_locks":                  1,
		"grackle_lock_holders":           1,
		"grackle_lock_leases":            1,
		"grackle_leases_created_total":   4,
		"grackle_leases_refreshed_total": 1,
		"grackle_leases_revoked_total":   1,
		"grackle_leases_expired_total":   1,
		"grackle_namespaces":             1,
		"grackle_semaphores":             1,
		"grackle_leases":                 2, // b's and the lock lease
		"grackle_holders":                1,
		"grackle_held_permits":           1,
	}
	// Every node applies the same commands: the same events everywhere.
	for i := range c.Nodes {
		servertest.Eventually(t, fmt.Sprintf("node %d's event counters", i), 20*time.Second, func() bool {
			s := get(t, addr(i))
			for name, w := range want {
				if v, _ := s.value(name); v != w {
					return false
				}
			}
			return true
		})
	}

	s := get(t, addr(li))
	// The leader's own measures: b waited (the 1 s wait that timed out and
	// the one granted by a's release), one hand-off, the expiry's lateness.
	if v := s.v(t, "grackle_leader_queued_waiters"); v != 0 {
		t.Errorf("queued waiters after the grant: %v", v)
	}
	if v := s.v(t, "grackle_leader_queue_wait_seconds"); v != 1 {
		t.Errorf("queue wait observations: %v, want 1 (the granted waiter)", v)
	}
	if v := s.v(t, "grackle_leader_handoff_seconds"); v != 1 {
		t.Errorf("hand-off observations: %v", v)
	}
	if v := s.v(t, "grackle_leader_expiry_lateness_seconds"); v < 1 {
		t.Errorf("expiry lateness observations: %v", v)
	}
	// Every write above was at least one entry proposed by this leader.
	if v := s.v(t, "grackle_leader_entry_commands"); v < 4 {
		t.Errorf("entries observed: %v, want one per write at least", v)
	}
	// Linearizable reads on the leader share leadership confirmations:
	// three sequential reads are three rounds of one reader each.
	rounds := s.v(t, "grackle_leader_read_round_reads")
	for range 3 {
		must(cl.GetSemaphore(ctx, &pb.GetSemaphoreRequest{NamespaceName: "m", SemaphoreName: "s"}))
	}
	if v := get(t, addr(li)).v(t, "grackle_leader_read_round_reads"); v < rounds+3 {
		t.Errorf("read rounds: %v -> %v after three reads on the leader", rounds, v)
	}
	if v := s.v(t, "grackle_acquire_outcomes_total", "outcome", "acquired"); v != 2 {
		t.Errorf("acquired outcomes: %v", v)
	}
	if v := s.v(t, "grackle_acquire_outcomes_total", "outcome", "timed_out"); v != 1 {
		t.Errorf("timed_out outcomes: %v", v)
	}
	if v := s.v(t, "grackle_acquire_outcomes_total", "outcome", "unavailable"); v != 1 {
		t.Errorf("unavailable outcomes: %v", v)
	}
	if v := s.v(t, "grackle_grpc_server_handled_total", "grpc_method", "AcquireSemaphore", "grpc_code", "OK"); v != 4 {
		t.Errorf("AcquireSemaphore OK: %v", v)
	}
	if v := s.v(t, "grackle_grpc_server_handling_seconds", "grpc_method", "AcquireSemaphore"); v != 4 {
		t.Errorf("AcquireSemaphore latency observations: %v", v)
	}
	// Every method exists from the start, at zero (rates need no first call).
	if _, ok := s.value("grackle_grpc_server_handled_total", "grpc_method", "DeleteNamespace"); !ok {
		t.Errorf("DeleteNamespace series not initialized")
	}
	if v := s.v(t, "grackle_build_info"); v != 1 {
		t.Errorf("build_info: %v", v)
	}

	// Raft: one leader, the others followers, indexes and counters moving.
	// (Eventually: on a loaded machine an election may be under way.)
	servertest.Eventually(t, "one leader, known to every node", 20*time.Second, func() bool {
		leaders, known := 0, 0
		for i := range c.Nodes {
			s := get(t, addr(i))
			v, _ := s.value("grackle_raft_state", "state", "leader")
			leaders += int(v)
			k, _ := s.value("grackle_raft_leader_known")
			known += int(k)
		}
		return leaders == 1 && known == 3
	})
	for i := range c.Nodes {
		s := get(t, addr(i))
		if s.v(t, "grackle_raft_term") < 1 || s.v(t, "grackle_raft_commit_index") <= before.v(t, "grackle_raft_commit_index") ||
			s.v(t, "grackle_raft_applied_index") < 1 || s.v(t, "grackle_raft_voters") != 3 {
			t.Errorf("node %d raft gauges: term %v commit %v applied %v voters %v", i, s.v(t, "grackle_raft_term"),
				s.v(t, "grackle_raft_commit_index"), s.v(t, "grackle_raft_applied_index"), s.v(t, "grackle_raft_voters"))
		}
		if s.v(t, "grackle_raft_leader_changes_total") < 1 {
			t.Errorf("node %d saw no leader change", i)
		}
		if s.v(t, "grackle_data_dir_free_bytes") <= 0 {
			t.Errorf("node %d: no free bytes", i)
		}
		// The state quota is on by default (auto), and the state holds
		// what the workload created.
		if s.v(t, "grackle_state_bytes") <= 0 || s.v(t, "grackle_state_quota_bytes") <= 0 {
			t.Errorf("node %d: state %v bytes, quota %v bytes", i, s.v(t, "grackle_state_bytes"), s.v(t, "grackle_state_quota_bytes"))
		}
		// raft's per-RPC timings are blocked (metrics/raft.go): every node
		// sent and received heartbeats and AppendEntries by now.
		for name := range s {
			for _, p := range []string{"grackle_raft_net_", "grackle_raft_rpc_processHeartbeat", "grackle_raft_replication_heartbeat", "grackle_raft_verify_leader"} {
				if strings.HasPrefix(name, p) {
					t.Errorf("node %d exports %s, a blocked per-RPC series", i, name)
				}
			}
		}
		if _, ok := s.value("grackle_raft_rpc_appendEntries"); !ok && s.v(t, "grackle_raft_state", "state", "follower") == 1 {
			t.Errorf("follower %d: no grackle_raft_rpc_appendEntries (only the per-RPC series are blocked)", i)
		}
	}
	li = c.WaitLeader()
	// Bridged from raft's go-metrics telemetry: commit and apply latency,
	// FSM batch size (summaries; counts grow with the workload).
	for _, name := range []string{"grackle_raft_commitTime", "grackle_raft_fsm_applyBatch", "grackle_raft_fsm_applyBatchNum"} {
		if v := s.v(t, name); v <= before.v(t, name) {
			t.Errorf("%s did not move: %v -> %v", name, before.v(t, name), v)
		}
	}

	// A snapshot: raft's snapshot timings and the snapshot's size.
	if err := c.Nodes[li].Node.Raft.Snapshot().Error(); err != nil {
		t.Fatal(err)
	}
	s = get(t, addr(li))
	if v := s.v(t, "grackle_raft_snapshot_persist"); v < 1 {
		t.Errorf("snapshot persist count: %v", v)
	}
	if v := s.v(t, "grackle_fsm_snapshot_size_bytes"); v <= 0 {
		t.Errorf("snapshot size: %v", v)
	}
	if v := s.v(t, "grackle_fsm_snapshot_failures_total"); v != 0 {
		t.Errorf("snapshot failures: %v", v)
	}
}

// A restarted node replays its log into a fresh state machine; its event
// counters start from zero and count only what is applied after it.
func TestRestartDoesNotRecountReplayedEntries(t *testing.T) {
	c := servertest.Start(t, 1, func(cfg *server.Config) { cfg.HTTPAddr = "127.0.0.1:0" })
	c.WaitLeader()
	cl := c.Client(0)
	ctx := ctxT(t)
	must(cl.CreateNamespace(ctx, &pb.CreateNamespaceRequest{Name: "r"}))
	for i := 0; i < 3; i++ {
		must(cl.CreateSemaphoreLease(ctx, &pb.CreateSemaphoreLeaseRequest{NamespaceName: "r", ProcessId: "p", TtlSeconds: 300}))
	}
	if v := get(t, c.Nodes[0].HTTPAddr()).v(t, "grackle_leases_created_total"); v != 3 {
		t.Fatalf("leases created before the restart: %v, want 3", v)
	}
	cfg := c.Cfgs[0]
	c.StopNode(0)
	c.StartNode(cfg)
	c.WaitLeader()
	cl = c.Client(0)
	// The replay has applied once a read sees the leases again.
	servertest.Eventually(t, "the log replayed", 30*time.Second, func() bool {
		ls, err := cl.ListSemaphoreLeases(ctxT(t), &pb.ListSemaphoreLeasesRequest{NamespaceName: "r"})
		return err == nil && len(ls.Leases) == 3
	})
	must(cl.CreateSemaphoreLease(ctx, &pb.CreateSemaphoreLeaseRequest{NamespaceName: "r", ProcessId: "p", TtlSeconds: 300}))
	if v := get(t, c.Nodes[0].HTTPAddr()).v(t, "grackle_leases_created_total"); v != 1 {
		t.Fatalf("leases created after the restart: %v, want 1 (the 3 replayed are not counted again)", v)
	}
}
