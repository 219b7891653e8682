package bench_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/grackle-coord/grackle/bench"
)

// fakeWaits is an in-memory Backend with wait groups and barriers only:
// it tests the workloads' counting and the barrier's round-keeping apart
// from any server. With unknownLast, Meet does not say which arrival
// tripped a round (as etcd's DoubleBarrier does not) and LastArrival
// answers it afterwards.
type fakeWaits struct {
	unknownLast bool
	latency     time.Duration // of every call
	commits     atomic.Uint64
	mu          sync.Mutex
	groups      map[string]*fakeGroup
}

type fakeGroup struct {
	counter int
	jobs    map[string]bool
	done    chan struct{}
}

var errWaitsOnly = errors.New("fake backend: wait groups and barriers only")

func (f *fakeWaits) Setup(context.Context, string) error {
	f.groups = map[string]*fakeGroup{}
	return nil
}
func (f *fakeWaits) Cleanup(context.Context) error                        { return nil }
func (f *fakeWaits) CreateSemaphore(context.Context, string, int64) error { return errWaitsOnly }
func (f *fakeWaits) NewSession(context.Context, int, time.Duration, bool) (bench.Session, error) {
	return nil, errWaitsOnly
}
func (f *fakeWaits) Read(context.Context, int, string) error { return errWaitsOnly }
func (f *fakeWaits) CommitIndex(context.Context) (uint64, error) {
	return f.commits.Load(), nil
}
func (f *fakeWaits) NewLockSession(context.Context, int, time.Duration) (bench.LockSession, error) {
	return nil, errWaitsOnly
}

func (f *fakeWaits) call() {
	f.commits.Add(1)
	time.Sleep(f.latency)
}

func (f *fakeWaits) CreateWaitGroup(_ context.Context, _ int, name string, counter int64) error {
	f.call()
	f.mu.Lock()
	defer f.mu.Unlock()
	f.groups[name] = &fakeGroup{counter: int(counter), jobs: map[string]bool{}, done: make(chan struct{})}
	return nil
}

func (f *fakeWaits) group(name string) (*fakeGroup, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	g := f.groups[name]
	if g == nil {
		return nil, errors.New("no such group " + name)
	}
	return g, nil
}

func (f *fakeWaits) CompleteJobs(_ context.Context, _ int, name string, jobs []string) error {
	f.call()
	g, err := f.group(name)
	if err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	before := len(g.jobs)
	for _, j := range jobs {
		g.jobs[j] = true
	}
	if before < g.counter && len(g.jobs) >= g.counter {
		close(g.done)
	}
	return nil
}

func (f *fakeWaits) WaitWaitGroup(ctx context.Context, _ int, name string) error {
	g, err := f.group(name)
	if err != nil {
		return err
	}
	select {
	case <-g.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (f *fakeWaits) DeleteWaitGroup(_ context.Context, _ int, name string) error {
	f.call()
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.groups, name)
	return nil
}

type fakeBarrier struct {
	f       *fakeWaits
	parties int
	mu      sync.Mutex
	rounds  map[int64]*fakeRound
}

type fakeRound struct {
	arrived []int
	done    chan struct{}
}

func (f *fakeWaits) NewBarrier(_ context.Context, _ string, parties int) (bench.Barrier, error) {
	return &fakeBarrier{f: f, parties: parties, rounds: map[int64]*fakeRound{}}, nil
}

func (b *fakeBarrier) Meet(ctx context.Context, w int, round int64) (time.Time, bool, bool, error) {
	b.f.call()
	b.mu.Lock()
	r := b.rounds[round]
	if r == nil {
		r = &fakeRound{done: make(chan struct{})}
		b.rounds[round] = r
	}
	r.arrived = append(r.arrived, w)
	last := len(r.arrived) == b.parties
	if last {
		close(r.done)
	}
	b.mu.Unlock()
	arrived := time.Now()
	if b.f.unknownLast {
		arrived = time.Time{}
	}
	select {
	case <-r.done:
	case <-ctx.Done():
		return arrived, false, false, ctx.Err()
	}
	return arrived, last, !b.f.unknownLast, nil
}

func (b *fakeBarrier) LastArrival(_ context.Context, round int64) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	r := b.rounds[round]
	if r == nil || len(r.arrived) != b.parties {
		return 0, errors.New("round not tripped")
	}
	return r.arrived[b.parties-1], nil
}

func (b *fakeBarrier) Close(context.Context) error { return nil }

func runWaits(t *testing.T, f *fakeWaits, label string) []bench.Result {
	t.Helper()
	o := bench.Options{Target: label, Workers: 16, Warmup: 100 * time.Millisecond, Duration: 500 * time.Millisecond,
		Runs: 1, TTL: time.Minute, Trials: 1, ExpiryTTL: time.Second, Batch: 10, GroupJobs: 50, Format: "json"}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out bytes.Buffer
	if err := bench.RunAll(ctx, f, o, []string{"waitgroup", "barrier"}, &out); err != nil {
		t.Fatal(err)
	}
	rs, err := bench.ReadResults(&out)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 2 {
		t.Fatalf("%d results, want 2:\n%s", len(rs), out.String())
	}
	for _, r := range rs {
		t.Log(r.Line())
		if r.Errors != 0 || r.Ops == 0 {
			t.Errorf("%s: ops %d errors %d (last: %s)", r.Workload, r.Ops, r.Errors, r.LastError)
		}
	}
	return rs
}

// The waitgroup workload counts calls, jobs, groups and wake-ups; the
// barrier workload counts rounds, one trip per round, whether Meet tells
// the last arrival or LastArrival does, and ends without a stuck round.
func TestWaitWorkloadsOnFake(t *testing.T) {
	known := runWaits(t, &fakeWaits{latency: 200 * time.Microsecond}, "known")
	unknown := runWaits(t, &fakeWaits{latency: 200 * time.Microsecond, unknownLast: true}, "unknown")
	for _, rs := range [][]bench.Result{known, unknown} {
		wg, b := rs[0], rs[1]
		if wg.Workload != "waitgroup" || b.Workload != "barrier" {
			t.Fatalf("workloads %s, %s", wg.Workload, b.Workload)
		}
		jobs, _ := wg.Metrics.Get("jobs_per_s")
		if jobs != wg.Rate*10 {
			t.Errorf("waitgroup: jobs/s %v, rate %v, batch 10", jobs, wg.Rate)
		}
		// 5 calls per group of 50 jobs in batches of 10.
		if g, _ := wg.Metrics.Get("groups_per_s"); g < wg.Rate/5*0.7 || g > wg.Rate/5*1.3 {
			t.Errorf("waitgroup: groups/s %v, calls/s %v", g, wg.Rate)
		}
		if wg.Latency["wake"].N == 0 || wg.Latency["complete"].N == 0 {
			t.Errorf("waitgroup: latencies %+v", wg.Latency)
		}
		if n := b.Latency["trip"].N; n != b.Ops {
			t.Errorf("barrier %s: %d trips for %d rounds", b.Target, n, b.Ops)
		}
		if w, _ := b.Metrics.Get("workers"); w != 16 {
			t.Errorf("barrier: workers %v", w)
		}
	}
	if known[1].Latency["arrive"].N == 0 || unknown[1].Latency["arrive"].N != 0 {
		t.Errorf("barrier: arrival latencies %d (known), %d (unknown)", known[1].Latency["arrive"].N, unknown[1].Latency["arrive"].N)
	}
	var tbl bytes.Buffer
	if err := bench.Table(&tbl, append(known, unknown...), "unknown"); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + tbl.String())
	for _, want := range []string{"| waitgroup | jobs/s |", "| waitgroup | wake p99 ms |", "| barrier | rounds/s |", "| barrier | trip p99 ms"} {
		if !strings.Contains(tbl.String(), want) {
			t.Errorf("table lacks %q", want)
		}
	}
}
