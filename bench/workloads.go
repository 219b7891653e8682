package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/pflag"
)

// The workloads. Each worker is a closed loop (it starts its next
// operation when the last one returns), like a client process would.
//
//	pairs    uncontended: every worker has its own lease and semaphore and
//	         loops acquire (weight 1) then release; rate = pairs/s
//	handoff  contended: one semaphore of 1 permit, 8 workers loop acquire,
//	         hold 1 ms, release; rate = acquisitions/s; hand-off latency is
//	         the release's reply -> the next holder's ACQUIRED reply
//	leases   lease churn: create a lease, then revoke it; rate = leases/s
//	reads    linearizable read of a semaphore (its own per worker);
//	         rate = reads/s
//	expiry   holders whose lease expires while another lease waits; the
//	         lateness is the waiter's ACQUIRED time minus expires_at
//	locks    pairs with locks: every worker has its own lock lease and
//	         its own exclusive lock and loops acquire then release;
//	         rate = pairs/s
//	lockhandoff
//	         handoff with locks: one exclusive lock, 8 workers loop
//	         acquire, hold 1 ms, release; figures as handoff's
//	waitgroup, barrier
//	         wait groups completed in batches, and rounds at one barrier
//	         of 64 processes (waits.go)
var Workloads = []string{"pairs", "handoff", "leases", "reads", "expiry", "locks", "lockhandoff", "waitgroup", "barrier"}

// Options configure the workloads; the flags are the same for every
// target (Register).
type Options struct {
	Target  string
	Workers int // 0: 64, or 8 for handoff and lockhandoff
	// Conns is the client connections the workers share, taking them in
	// turn (each target opens them its own way: Grackle per endpoint used,
	// etcd as clients; ZooKeeper's recipes give every worker a session,
	// and so a connection, of its own whatever Conns says). Each result
	// records it as "connections", and the table shows each shape apart.
	Conns      int
	Warmup     time.Duration
	Duration   time.Duration
	Runs       int
	FirstRun   int           // the number of the first run (to interleave targets run by run)
	TTL        time.Duration // lease TTL of the workers
	Permits    int64         // 0: 10, or 1 for handoff
	Hold       time.Duration // handoff, lockhandoff: how long a holder keeps the permit or lock
	Trials     int           // expiry: expiring holders
	ExpiryTTL  time.Duration // expiry: their TTL
	Batch      int           // waitgroup: job ids per completion call (0: 100)
	GroupJobs  int           // waitgroup: jobs per wait group, its counter (0: 1000)
	ServerPIDs []int         // processes whose CPU time is the servers'
	// CPUProfile, when set, is where a CPU profile of the load generator
	// over each measured window goes: CPUProfile-<workload>-<run>.pprof.
	CPUProfile string
	Format     string // "text" (RESULT lines) or "json"
	// Progress receives a status line while a run goes (nil: none).
	Progress io.Writer
	// RunID prefixes the names a run creates (default: the start time).
	RunID string

	run int // the run being measured (RunOne)
}

// maxConns bounds --conns: a load generator's connections cost it memory
// and file descriptors (10,000 is beyond one process's default limit).
const maxConns = 10000

// Register adds the workload flags to fs.
func (o *Options) Register(fs *pflag.FlagSet) {
	fs.StringVar(&o.Target, "label", o.Target, "target label written into each result")
	fs.IntVar(&o.Workers, "workers", 0, "concurrent workers (0: 64; 8 for handoff and lockhandoff)")
	fs.IntVar(&o.Conns, "conns", 1, "client connections the workers take in turn (Grackle: per endpoint used; etcd: clients; ZooKeeper: a session per worker always)")
	fs.DurationVar(&o.Warmup, "warmup", 2*time.Second, "unmeasured load before the window")
	fs.DurationVar(&o.Duration, "duration", 10*time.Second, "measured window")
	fs.IntVar(&o.Runs, "runs", 1, "runs of each workload")
	fs.IntVar(&o.FirstRun, "first-run", 1, "number of the first run in the results")
	fs.DurationVar(&o.TTL, "ttl", 60*time.Second, "lease TTL of the workers (refreshed at TTL/3)")
	fs.Int64Var(&o.Permits, "permits", 0, "permits per semaphore (0: 10; 1 for handoff)")
	fs.DurationVar(&o.Hold, "hold", time.Millisecond, "handoff, lockhandoff: how long a holder keeps the permit or lock")
	fs.IntVar(&o.Trials, "trials", 40, "expiry: holders whose lease expires (concurrent, staggered)")
	fs.DurationVar(&o.ExpiryTTL, "expiry-ttl", 2*time.Second, "expiry: TTL of the expiring leases")
	fs.IntVar(&o.Batch, "batch", 100, "waitgroup: job ids per completion call (1-100)")
	fs.IntVar(&o.GroupJobs, "group-jobs", 1000, "waitgroup: jobs per wait group (its counter)")
	fs.IntSliceVar(&o.ServerPIDs, "server-pids", nil,
		"PIDs of the server processes on this machine: their CPU time (/proc/PID/stat utime+stime) over the window gives server_cores and server_cpu_us_per_op")
	fs.StringVar(&o.CPUProfile, "cpuprofile", "",
		"write a CPU profile of this load generator over each window to PREFIX-<workload>-<run>.pprof")
}

// Validate checks the options and fills defaults.
func (o *Options) Validate() error {
	switch {
	case o.Workers < 0:
		return fmt.Errorf("workers: must be 0 or more, got %d", o.Workers)
	case o.Conns < 0 || o.Conns > maxConns:
		return fmt.Errorf("conns: must be 1 to %d, got %d", maxConns, o.Conns)
	case o.Duration <= 0:
		return fmt.Errorf("duration: must be positive, got %s", o.Duration)
	case o.Warmup < 0:
		return fmt.Errorf("warmup: must not be negative, got %s", o.Warmup)
	case o.Runs < 1:
		return fmt.Errorf("runs: must be at least 1, got %d", o.Runs)
	case o.FirstRun < 0:
		return fmt.Errorf("first-run: must not be negative, got %d", o.FirstRun)
	case o.TTL < time.Second:
		return fmt.Errorf("ttl: must be at least 1s, got %s", o.TTL)
	case o.Permits < 0:
		return fmt.Errorf("permits: must be 0 or more, got %d", o.Permits)
	case o.Hold < 0:
		return fmt.Errorf("hold: must not be negative, got %s", o.Hold)
	case o.Trials < 1:
		return fmt.Errorf("trials: must be at least 1, got %d", o.Trials)
	case o.ExpiryTTL < time.Second:
		return fmt.Errorf("expiry-ttl: must be at least 1s, got %s", o.ExpiryTTL)
	case o.Batch < 0 || o.Batch > 100:
		return fmt.Errorf("batch: must be 1 to 100 (Grackle's jobs per call), got %d", o.Batch)
	case o.GroupJobs < 0:
		return fmt.Errorf("group-jobs: must be at least 1, got %d", o.GroupJobs)
	}
	if o.Batch == 0 {
		o.Batch = 100
	}
	if o.Conns == 0 {
		o.Conns = 1
	}
	if o.GroupJobs == 0 {
		o.GroupJobs = 1000
	}
	for _, p := range o.ServerPIDs {
		if _, err := cpuSeconds(p); err != nil {
			return fmt.Errorf("server-pids: %d: %v", p, err)
		}
	}
	if o.Target == "" {
		o.Target = "grackle"
	}
	if o.RunID == "" {
		o.RunID = strconv.FormatInt(time.Now().UnixNano(), 36)
	}
	return nil
}

// ParseWorkloads turns "pairs,reads" or "all" into workload names.
func ParseWorkloads(s string) ([]string, error) {
	if s == "all" {
		return Workloads, nil
	}
	var out []string
	for _, w := range strings.Split(s, ",") {
		w = strings.TrimSpace(w)
		ok := false
		for _, k := range Workloads {
			ok = ok || k == w
		}
		if !ok {
			return nil, fmt.Errorf("workload: unknown %q (want %s or all)", w, strings.Join(Workloads, ", "))
		}
		out = append(out, w)
	}
	return out, nil
}

// RunAll runs each workload Runs times (run 1 of every workload, then run
// 2, ...) and writes every result to out as it completes.
func RunAll(ctx context.Context, b Backend, o Options, workloads []string, out io.Writer) error {
	first := max(o.FirstRun, 1)
	for run := first; run < first+o.Runs; run++ {
		for _, w := range workloads {
			res, err := RunOne(ctx, b, o, w, run)
			if err != nil {
				return fmt.Errorf("%s run %d: %w", w, run, err)
			}
			if err := res.Write(out, o.Format); err != nil {
				return err
			}
		}
	}
	return nil
}

// RunOne runs one workload once.
func RunOne(ctx context.Context, b Backend, o Options, workload string, run int) (Result, error) {
	runID := fmt.Sprintf("%s-%s-%d", o.RunID, workload, run)
	if err := b.Setup(ctx, runID); err != nil {
		return Result{}, fmt.Errorf("setup: %w", err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		_ = b.Cleanup(cctx)
	}()
	var res Result
	var err error
	o.run = run
	switch workload {
	case "pairs":
		res, err = pairs(ctx, b, o)
	case "handoff":
		res, err = handoff(ctx, b, o)
	case "leases":
		res, err = leases(ctx, b, o)
	case "reads":
		res, err = reads(ctx, b, o)
	case "expiry":
		res, err = expiry(ctx, b, o)
	case "locks":
		res, err = locks(ctx, b, o)
	case "lockhandoff":
		res, err = lockHandoff(ctx, b, o)
	case "waitgroup":
		res, err = waitGroupWorkload(ctx, b, o)
	case "barrier":
		res, err = barrierWorkload(ctx, b, o)
	default:
		return Result{}, fmt.Errorf("unknown workload %q", workload)
	}
	res.Target, res.Workload, res.Run = o.Target, workload, run
	res.add("connections", float64(o.Conns))
	return res, err
}

func workers(o Options, def int) int {
	if o.Workers > 0 {
		return o.Workers
	}
	return def
}

func permits(o Options, def int64) int64 {
	if o.Permits > 0 {
		return o.Permits
	}
	return def
}

// measure runs op in a loop and adds the figures every workload has:
// throughput, commits per op and CPU.
func measure(ctx context.Context, b Backend, o Options, name string, n int, series []string,
	op func(ctx context.Context, w int, t *tally) error) Result {
	var cpu0, cpu1 cpuSample
	var c0, c1 uint64
	var cErr error
	var prof *profile
	l := loop{name: name, workers: n, warmup: o.Warmup, duration: o.Duration, series: series, progress: o.Progress,
		atFrom: func() {
			if o.CPUProfile != "" {
				prof = startProfile(fmt.Sprintf("%s-%s-%d.pprof", o.CPUProfile, name, o.run))
			}
			cpu0 = sampleCPU(o.ServerPIDs)
			c0, cErr = b.CommitIndex(ctx)
		},
		atTo: func() {
			cpu1 = sampleCPU(o.ServerPIDs)
			prof.stop()
			var err error
			if c1, err = b.CommitIndex(context.WithoutCancel(ctx)); err != nil {
				cErr = err
			}
		}}
	lr := l.run(ctx, op)
	secs := lr.elapsed.Seconds()
	res := Result{Ops: lr.ops, Rate: float64(lr.ops) / secs, Errors: lr.errs}
	if lr.lastErr != nil {
		res.LastError = lr.lastErr.Error()
	}
	res.add("workers", float64(n))
	res.add("duration_s", secs)
	if cErr == nil && c1 >= c0 && lr.ops > 0 {
		res.add("commits_per_op", float64(c1-c0)/float64(lr.ops))
	}
	if len(o.ServerPIDs) > 0 && cpu0.err == nil && cpu1.err == nil {
		d := cpu1.server - cpu0.server
		res.add("server_cores", d/secs)
		if lr.ops > 0 {
			res.add("server_cpu_us_per_op", d/float64(lr.ops)*1e6)
		}
	}
	res.add("loadgen_cores", (cpu1.self-cpu0.self)/secs)
	if lr.ops > 0 {
		res.add("loadgen_cpu_us_per_op", (cpu1.self-cpu0.self)/float64(lr.ops)*1e6)
	}
	if prof != nil && prof.err != nil {
		res.LastError = "cpuprofile: " + prof.err.Error()
	}
	for _, s := range series {
		res.addLatency(s, lr.series[s])
	}
	return res
}

// sessions opens one session per worker, in parallel.
func sessions(ctx context.Context, b Backend, n int, ttl time.Duration) ([]Session, func(), error) {
	return openAll(ctx, n, func(w int) (Session, error) { return b.NewSession(ctx, w, ttl, true) })
}

// lockSessions opens one lock session per worker, in parallel.
func lockSessions(ctx context.Context, b Backend, n int, ttl time.Duration) ([]LockSession, func(), error) {
	return openAll(ctx, n, func(w int) (LockSession, error) { return b.NewLockSession(ctx, w, ttl) })
}

// openAll opens n sessions in parallel; closeAll revokes every one that
// opened (on a failure too, so a failed setup leaks no lease).
func openAll[S interface{ Close(context.Context) error }](ctx context.Context, n int, open func(w int) (S, error)) ([]S, func(), error) {
	ss := make([]S, n)
	ok := make([]bool, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for w := 0; w < n; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			ss[w], errs[w] = open(w)
			ok[w] = errs[w] == nil
		}(w)
	}
	wg.Wait()
	closeAll := func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		var wg sync.WaitGroup
		for w, s := range ss {
			if ok[w] {
				wg.Add(1)
				go func(s S) { defer wg.Done(); _ = s.Close(cctx) }(s)
			}
		}
		wg.Wait()
	}
	if err := errors.Join(errs...); err != nil {
		closeAll()
		return nil, nil, err
	}
	return ss, closeAll, nil
}

func semaphores(ctx context.Context, b Backend, prefix string, n int, permits int64) ([]string, error) {
	names := make([]string, n)
	for w := range names {
		names[w] = fmt.Sprintf("%s%d", prefix, w)
		if err := b.CreateSemaphore(ctx, names[w], permits); err != nil {
			return nil, err
		}
	}
	return names, nil
}

func pairs(ctx context.Context, b Backend, o Options) (Result, error) {
	n := workers(o, 64)
	sems, err := semaphores(ctx, b, "pairs-", n, permits(o, 10))
	if err != nil {
		return Result{}, err
	}
	ss, closeAll, err := sessions(ctx, b, n, o.TTL)
	if err != nil {
		return Result{}, err
	}
	defer closeAll()
	res := measure(ctx, b, o, "pairs", n, []string{"acquire", "release"}, func(ctx context.Context, w int, t *tally) error {
		t0 := time.Now()
		if _, err := ss[w].Acquire(ctx, sems[w], 1, 0); err != nil {
			return fmt.Errorf("acquire: %w", err)
		}
		t1 := time.Now()
		if _, err := ss[w].Release(ctx, sems[w]); err != nil {
			return fmt.Errorf("release: %w", err)
		}
		t2 := time.Now()
		t.latency(0, t0, t1)
		t.latency(1, t1, t2)
		t.done(t2)
		return nil
	})
	return res, nil
}

// locks is pairs with exclusive locks: each worker's lock is its own, so
// no acquire ever waits, and timeout 0 (not waiting) is what pairs uses.
func locks(ctx context.Context, b Backend, o Options) (Result, error) {
	n := workers(o, 64)
	names := make([]string, n)
	for w := range names {
		names[w] = fmt.Sprintf("locks-%d", w)
	}
	ls, closeAll, err := lockSessions(ctx, b, n, o.TTL)
	if err != nil {
		return Result{}, err
	}
	defer closeAll()
	res := measure(ctx, b, o, "locks", n, []string{"acquire", "release"}, func(ctx context.Context, w int, t *tally) error {
		t0 := time.Now()
		if _, err := ls[w].Lock(ctx, names[w], 0); err != nil {
			return fmt.Errorf("acquire: %w", err)
		}
		t1 := time.Now()
		if err := ls[w].Unlock(ctx, names[w]); err != nil {
			return fmt.Errorf("release: %w", err)
		}
		t2 := time.Now()
		t.latency(0, t0, t1)
		t.latency(1, t1, t2)
		t.done(t2)
		return nil
	})
	return res, nil
}

func leases(ctx context.Context, b Backend, o Options) (Result, error) {
	n := workers(o, 64)
	return measure(ctx, b, o, "leases", n, []string{"create", "revoke"}, func(ctx context.Context, w int, t *tally) error {
		t0 := time.Now()
		s, err := b.NewSession(ctx, w, o.TTL, false)
		if err != nil {
			return fmt.Errorf("create: %w", err)
		}
		t1 := time.Now()
		if err := s.Close(ctx); err != nil {
			return fmt.Errorf("revoke: %w", err)
		}
		t2 := time.Now()
		t.latency(0, t0, t1)
		t.latency(1, t1, t2)
		t.done(t2)
		return nil
	}), nil
}

func reads(ctx context.Context, b Backend, o Options) (Result, error) {
	n := workers(o, 64)
	sems, err := semaphores(ctx, b, "reads-", n, permits(o, 10))
	if err != nil {
		return Result{}, err
	}
	return measure(ctx, b, o, "reads", n, []string{"read"}, func(ctx context.Context, w int, t *tally) error {
		t0 := time.Now()
		if err := b.Read(ctx, w, sems[w]); err != nil {
			return err
		}
		t1 := time.Now()
		t.latency(0, t0, t1)
		t.done(t1)
		return nil
	}), nil
}

// holdEvent is one hold of the handoff or lockhandoff workload: when it
// was granted, when its release was acknowledged, and the grant's position.
type holdEvent struct {
	based        uint64
	worker       int
	acqAt, relAt time.Time
	in           bool // granted inside the window
}

func handoff(ctx context.Context, b Backend, o Options) (Result, error) {
	n := workers(o, 8)
	const sem = "handoff"
	if err := b.CreateSemaphore(ctx, sem, permits(o, 1)); err != nil {
		return Result{}, err
	}
	ss, closeAll, err := sessions(ctx, b, n, o.TTL)
	if err != nil {
		return Result{}, err
	}
	defer closeAll()
	return contended(ctx, b, o, "handoff", n, contender{
		acquire: func(ctx context.Context, w int) (Grant, error) { return ss[w].Acquire(ctx, sem, 1, time.Minute) },
		release: func(ctx context.Context, w int) error { _, err := ss[w].Release(ctx, sem); return err },
		touch:   ss[0].Touch,
	}, Metric{"permits", float64(permits(o, 1))})
}

// lockHandoff is handoff with one exclusive lock instead of one permit.
func lockHandoff(ctx context.Context, b Backend, o Options) (Result, error) {
	n := workers(o, 8)
	const lock = "lockhandoff"
	ls, closeAll, err := lockSessions(ctx, b, n, o.TTL)
	if err != nil {
		return Result{}, err
	}
	defer closeAll()
	return contended(ctx, b, o, "lockhandoff", n, contender{
		acquire: func(ctx context.Context, w int) (Grant, error) { return ls[w].Lock(ctx, lock, time.Minute) },
		release: func(ctx context.Context, w int) error { return ls[w].Unlock(ctx, lock) },
		touch:   ls[0].Touch,
	})
}

// contender is what the hand-off loop does with the one thing its workers
// contend for (a permit of a 1-permit semaphore, or an exclusive lock).
type contender struct {
	acquire func(ctx context.Context, w int) (Grant, error) // waits for it
	release func(ctx context.Context, w int) error
	touch   func(ctx context.Context) error // one commit alone (any worker's lease)
}

// contended runs the hand-off loop of handoff and lockhandoff: n workers
// acquire, hold o.Hold, release; extra metrics go first in the result.
func contended(ctx context.Context, b Backend, o Options, name string, n int, c contender, extra ...Metric) (Result, error) {
	// The limit of one permit handed from holder to holder: each holder
	// keeps it Hold, and the next can only be told once the release is
	// committed, so 1 / (Hold + one commit). One commit is measured
	// unloaded, by 200 serial writes just before the window and 200 just
	// after it: on these virtual machines the p50 of one such series
	// varied from 0.65 to 0.94 ms between otherwise identical runs, and
	// bracketing the window measures what the run itself saw.
	commitBefore, commitAfter := NewHist(), NewHist()
	commits := func(h *Hist) error {
		for i := 0; i < 200; i++ {
			t0 := time.Now()
			if err := c.touch(ctx); err != nil {
				return fmt.Errorf("touch: %w", err)
			}
			h.Record(time.Since(t0))
		}
		return nil
	}
	if err := commits(commitBefore); err != nil {
		return Result{}, err
	}

	holds := make([][]holdEvent, n)
	res := measure(ctx, b, o, name, n, []string{"wait", "release", "hold"}, func(ctx context.Context, w int, t *tally) error {
		t0 := time.Now()
		g, err := c.acquire(ctx, w)
		if err != nil {
			return fmt.Errorf("acquire: %w", err)
		}
		t1 := time.Now()
		t.latency(0, t0, t1)
		t.done(t1)
		holdFor(o.Hold)
		t2 := time.Now()
		t.latency(2, t1, t2)
		// The release must complete even when the window closes meanwhile,
		// or the last holder's permit (or lock) would stay taken.
		err = c.release(context.WithoutCancel(ctx), w)
		t3 := time.Now()
		ev := holdEvent{based: g.Based, worker: w, acqAt: t1, in: t.win.contains(t1)}
		if err == nil {
			ev.relAt = t3
			t.latency(1, t2, t3)
		}
		holds[w] = append(holds[w], ev)
		if err != nil {
			return fmt.Errorf("release: %w", err)
		}
		return nil
	})

	// With one permit (or one exclusive lock), each grant was made possible
	// by the release of the grant just before it; grants sort by their
	// position (fencing tokens increase with every grant, etcd revisions
	// too). Pairing by position, not by matching a grant's position with a
	// release's commit index, holds also when one Raft entry carries
	// several commands (and so fencing tokens run ahead of the Raft index).
	var all []holdEvent
	perWorkerMin, perWorkerMax := -1, 0
	for _, hs := range holds {
		in := 0
		for _, h := range hs {
			if h.in {
				in++
			}
		}
		if perWorkerMin < 0 || in < perWorkerMin {
			perWorkerMin = in
		}
		perWorkerMax = max(perWorkerMax, in)
		all = append(all, hs...)
	}
	sort.Slice(all, func(i, j int) bool { return all[i].based < all[j].based })
	handoffs, other := NewHist(), NewHist()
	self, paired := 0, 0
	for i := 1; i < len(all); i++ {
		prev, cur := all[i-1], all[i]
		if !cur.in || prev.relAt.IsZero() {
			continue
		}
		paired++
		d := cur.acqAt.Sub(prev.relAt)
		handoffs.Record(d)
		if prev.worker == cur.worker {
			self++
		} else {
			other.Record(d)
		}
	}
	if err := commits(commitAfter); err != nil {
		return Result{}, err
	}
	commit := NewHist()
	commit.Merge(commitBefore)
	commit.Merge(commitAfter)
	commitSum := commit.Summary()
	limit := 0.0
	if c := time.Duration(commitSum.P50*1e6) + o.Hold; c > 0 {
		limit = float64(time.Second) / float64(c)
	}
	res.Metrics = append(res.Metrics, extra...)
	res.add("hold_ms", float64(o.Hold)/1e6)
	res.add("commit_p50_ms", commitSum.P50)
	res.add("commit_p99_ms", commitSum.P99)
	res.add("commit_before_p50_ms", commitBefore.Summary().P50)
	res.add("commit_after_p50_ms", commitAfter.Summary().P50)
	res.add("limit_per_s", limit)
	if limit > 0 {
		res.add("of_limit", res.Rate/limit)
	}
	if paired > 0 {
		res.add("self_handoff_frac", float64(self)/float64(paired))
	}
	res.add("per_worker_min", float64(max(perWorkerMin, 0)))
	res.add("per_worker_max", float64(perWorkerMax))
	res.addLatency("handoff", handoffs.Summary())
	res.addLatency("handoff_other", other.Summary())
	return res, nil
}

func expiry(ctx context.Context, b Backend, o Options) (Result, error) {
	var mu sync.Mutex
	late := NewHist()
	errs := 0
	var lastErr error
	var wg sync.WaitGroup
	for i := 0; i < o.Trials; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			// Stagger the trials so that expiries do not all land at once.
			if !sleepUntil(ctx, time.Now().Add(time.Duration(i)*37*time.Millisecond)) {
				return
			}
			d, err := expiryTrial(ctx, b, o, i)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs++
				lastErr = err
				return
			}
			late.Record(d)
		}(i)
	}
	wg.Wait()
	res := Result{Errors: errs}
	if lastErr != nil {
		res.LastError = lastErr.Error()
	}
	s := late.Summary()
	res.Ops = s.N
	res.add("trials", float64(o.Trials))
	res.add("ttl_s", o.ExpiryTTL.Seconds())
	res.addLatency("lateness", s)
	return res, nil
}

// expiryTrial: a holder whose lease is not refreshed, and a waiter; it
// returns the waiter's ACQUIRED time minus the holder's expiry.
func expiryTrial(ctx context.Context, b Backend, o Options, i int) (time.Duration, error) {
	sem := fmt.Sprintf("expiry-%d", i)
	if err := b.CreateSemaphore(ctx, sem, 1); err != nil {
		return 0, err
	}
	short, err := b.NewSession(ctx, i, o.ExpiryTTL, false)
	if err != nil {
		return 0, err
	}
	defer short.Close(context.WithoutCancel(ctx))
	long, err := b.NewSession(ctx, i, o.ExpiryTTL+time.Minute, true)
	if err != nil {
		return 0, err
	}
	defer long.Close(context.WithoutCancel(ctx))
	g, err := short.Acquire(ctx, sem, 1, 0)
	if err != nil {
		return 0, fmt.Errorf("holder: %w", err)
	}
	if _, err := long.Acquire(ctx, sem, 1, o.ExpiryTTL+30*time.Second); err != nil {
		return 0, fmt.Errorf("waiter: %w", err)
	}
	return time.Since(g.Expires), nil
}

// ParseCommand parses the command line of a peer's load generator
// (etcdbench, zkbench): fs holds o's flags (Register) and an -o/--output
// flag whose value format points to ("table" or "json"), and the one
// argument is the workloads. It sets o's format and, when stderr is a
// terminal, its progress line, and checks o.
func ParseCommand(fs *pflag.FlagSet, args []string, o *Options, format *string) ([]string, error) {
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() != 1 {
		return nil, fmt.Errorf("want one argument: a comma-separated list of %v, or all", Workloads)
	}
	ws, err := ParseWorkloads(fs.Arg(0))
	if err != nil {
		return nil, err
	}
	switch *format {
	case "table":
		o.Format = "text"
	case "json":
		o.Format = "json"
	default:
		return nil, fmt.Errorf("output: table or json, got %q", *format)
	}
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if st, err := os.Stderr.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
		o.Progress = os.Stderr
	}
	return ws, nil
}
