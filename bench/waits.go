package bench

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"
)

// The wait-group and barrier workloads.
//
//	waitgroup  64 workers, each with a wait group of its own at a time
//	           (--group-jobs 1000 jobs), completed in batches of --batch
//	           (100) job ids per call, while a waiter (one more call of the
//	           worker, on the same connection) waits for the group; when the
//	           last batch is answered the worker waits for its waiter, then
//	           deletes the group and starts the next. rate = batch calls/s;
//	           jobs_per_s = rate x batch; wake: the last batch's reply -> the
//	           waiter's reply
//	barrier    64 workers meet at one barrier of 64 processes, round after
//	           round (Grackle: ArriveAtBarrier, then WaitAtBarrier unless the
//	           arrival tripped it; etcd: DoubleBarrier.Enter on a key per
//	           round); rate = rounds/s; trip: the last arrival's reply -> the
//	           last of the 64 processes woken

// Barrier is a barrier of parties processes (Backend.NewBarrier); worker
// w plays process w. Methods are called from many goroutines at once.
type Barrier interface {
	// Meet: worker w arrives at round (1, 2, ...) and returns once every
	// party has arrived at it. arrived is when w's arrival was acknowledged
	// (zero when the backend's call does not say); last reports that w's
	// arrival tripped the round, known whether the backend could tell.
	Meet(ctx context.Context, w int, round int64) (arrived time.Time, last, known bool, err error)
	// LastArrival is, after the rounds, the worker whose arrival tripped a
	// round (for backends whose Meet cannot tell).
	LastArrival(ctx context.Context, round int64) (int, error)
	// Close removes the barrier and whatever its processes hold.
	Close(ctx context.Context) error
}

func waitGroupWorkload(ctx context.Context, b Backend, o Options) (Result, error) {
	n := workers(o, 64)
	batch, per := o.Batch, o.GroupJobs
	type waited struct {
		at  time.Time
		err error
	}
	type state struct {
		k, sent int
		name    string
		done    chan waited
	}
	st := make([]state, n)
	var mu sync.Mutex
	groups := 0
	res := measure(ctx, b, o, "waitgroup", n, []string{"complete", "wake", "create", "delete"}, func(ctx context.Context, w int, t *tally) error {
		s := &st[w]
		if s.sent == 0 {
			s.k++
			s.name = fmt.Sprintf("wg-%d-%d", w, s.k)
			t0 := time.Now()
			if err := b.CreateWaitGroup(ctx, w, s.name, int64(per)); err != nil {
				return fmt.Errorf("create: %w", err)
			}
			t.latency(2, t0, time.Now())
			ch := make(chan waited, 1)
			s.done = ch
			go func(name string) {
				err := b.WaitWaitGroup(ctx, w, name)
				ch <- waited{time.Now(), err}
			}(s.name)
		}
		jobs := make([]string, 0, batch)
		for len(jobs) < batch && s.sent < per {
			jobs = append(jobs, fmt.Sprintf("j%07d", s.sent))
			s.sent++
		}
		t0 := time.Now()
		err := b.CompleteJobs(ctx, w, s.name, jobs)
		t1 := time.Now()
		if err != nil {
			s.sent = 0 // the group is left (its waiter ends with the run); a new one next
			return fmt.Errorf("complete: %w", err)
		}
		t.latency(0, t0, t1)
		t.done(t1)
		if s.sent < per {
			return nil
		}
		s.sent = 0
		d := <-s.done
		if d.err != nil {
			return fmt.Errorf("wait: %w", d.err)
		}
		t.latency(1, t1, d.at)
		if t.win.contains(t1) {
			mu.Lock()
			groups++
			mu.Unlock()
		}
		t2 := time.Now()
		if err := b.DeleteWaitGroup(ctx, w, s.name); err != nil {
			return fmt.Errorf("delete: %w", err)
		}
		t.latency(3, t2, time.Now())
		return nil
	})
	secs, _ := res.Metrics.Get("duration_s")
	extra := Metrics{{"batch", float64(batch)}, {"group_jobs", float64(per)}, {"jobs_per_s", res.Rate * float64(batch)}}
	if secs > 0 {
		extra = append(extra, Metric{"groups_per_s", float64(groups) / secs})
	}
	if c, ok := res.Metrics.Get("server_cpu_us_per_op"); ok {
		extra = append(extra, Metric{"server_cpu_us_per_job", c / float64(batch)})
	}
	res.Metrics = append(extra, res.Metrics...)
	return res, nil
}

// barrierWorkload: n workers meet round after round at one barrier of n
// processes. It has its own loop, not measure's: a round needs every
// worker, so none may stop before the others; when the window closes,
// the round that the furthest worker began is the last, and every worker
// plays every round up to it.
func barrierWorkload(ctx context.Context, b Backend, o Options) (Result, error) {
	n := workers(o, 64)
	bar, err := b.NewBarrier(ctx, "barrier", n)
	if err != nil {
		return Result{}, err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		_ = bar.Close(cctx)
	}()
	type meet struct {
		w                  int
		t0, arrived, woken time.Time
		last, known        bool
	}
	var mu sync.Mutex
	rounds := map[int64][]meet{}
	var stopAt, started int64
	var firstErr error
	errs := 0

	start := time.Now()
	win := window{from: start.Add(o.Warmup), to: start.Add(o.Warmup + o.Duration)}
	// Rounds end by themselves; a backend whose meeting cannot be cancelled
	// (etcd's DoubleBarrier.Enter) would hang on a round that lost a
	// worker: the guard ends the workload then.
	gctx, cancel := context.WithDeadline(ctx, win.to.Add(time.Minute))
	defer cancel()
	edges := watchWindow(gctx, b, o, win)
	var wg sync.WaitGroup
	for w := 0; w < n; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for r := int64(1); ; r++ {
				mu.Lock()
				if stopAt == 0 && (!time.Now().Before(win.to) || gctx.Err() != nil) {
					stopAt = max(started, 1)
				}
				if stopAt != 0 && r > stopAt {
					mu.Unlock()
					return
				}
				started = max(started, r)
				mu.Unlock()
				t0 := time.Now()
				arrived, last, known, err := bar.Meet(gctx, w, r)
				woken := time.Now()
				mu.Lock()
				if err != nil {
					errs++
					if firstErr == nil {
						firstErr = fmt.Errorf("round %d, worker %d: %w", r, w, err)
					}
					mu.Unlock()
					cancel() // the round cannot trip without this worker
					return
				}
				rounds[r] = append(rounds[r], meet{w, t0, arrived, woken, last, known})
				mu.Unlock()
			}
		}(w)
	}
	wg.Wait()
	ws := edges()

	res := Result{Errors: errs}
	if firstErr != nil {
		res.LastError = firstErr.Error()
	}
	arrive, wait, trip, spread := NewHist(), NewHist(), NewHist(), NewHist()
	var rs []int64
	for r := range rounds {
		rs = append(rs, r)
	}
	sort.Slice(rs, func(i, j int) bool { return rs[i] < rs[j] })
	for _, r := range rs {
		ms := rounds[r]
		if len(ms) != n {
			continue // cut by an error
		}
		li := -1
		for i, m := range ms {
			if m.known && m.last {
				li = i
			}
		}
		if li < 0 && !ms[0].known {
			w, err := bar.LastArrival(context.WithoutCancel(ctx), r)
			if err != nil {
				res.Errors++
				res.LastError = fmt.Sprintf("round %d: last arrival: %v", r, err)
				continue
			}
			for i, m := range ms {
				if m.w == w {
					li = i
				}
			}
		}
		if li < 0 {
			continue
		}
		lastAt := ms[li].arrived
		if lastAt.IsZero() {
			lastAt = ms[li].woken
		}
		if !ws.win.contains(lastAt) {
			continue
		}
		res.Ops++
		first, lastWoken := ms[0].woken, ms[0].woken
		for _, m := range ms {
			if !m.arrived.IsZero() {
				arrive.Record(m.arrived.Sub(m.t0))
				if !m.last {
					wait.Record(m.woken.Sub(m.arrived))
				}
			}
			if m.woken.Before(first) {
				first = m.woken
			}
			if m.woken.After(lastWoken) {
				lastWoken = m.woken
			}
		}
		trip.Record(lastWoken.Sub(lastAt))
		spread.Record(lastWoken.Sub(first))
	}
	secs := ws.elapsed.Seconds()
	if secs > 0 {
		res.Rate = float64(res.Ops) / secs
	}
	res.add("workers", float64(n))
	res.add("duration_s", secs)
	ws.addMetrics(&res, o, secs)
	res.addLatency("trip", trip.Summary())
	res.addLatency("wake_spread", spread.Summary())
	res.addLatency("arrive", arrive.Summary())
	res.addLatency("wait", wait.Summary())
	return res, nil
}

// windowSamples are the CPU and commit-index samples at a window's edges.
type windowSamples struct {
	win            window
	elapsed        time.Duration
	cpu0, cpu1     cpuSample
	c0, c1         uint64
	cErr           error
	opened, closed bool
}

// watchWindow samples the servers' CPU and the commit index when the
// window opens and when it closes; the returned function waits for the
// second sample (or for ctx) and returns them.
func watchWindow(ctx context.Context, b Backend, o Options, win window) func() windowSamples {
	ws := windowSamples{win: win}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if !sleepUntil(ctx, win.from) {
			return
		}
		t0 := time.Now()
		ws.cpu0 = sampleCPU(o.ServerPIDs)
		ws.c0, ws.cErr = b.CommitIndex(ctx)
		ws.opened = true
		if !sleepUntil(ctx, win.to) {
			return
		}
		ws.cpu1 = sampleCPU(o.ServerPIDs)
		var err error
		if ws.c1, err = b.CommitIndex(context.WithoutCancel(ctx)); err != nil {
			ws.cErr = err
		}
		ws.closed = true
		ws.elapsed = time.Since(t0)
	}()
	return func() windowSamples {
		<-done
		if ws.elapsed <= 0 {
			ws.elapsed = win.to.Sub(win.from)
		}
		return ws
	}
}

// addMetrics adds what measure adds for every workload: commits per op,
// server and load-generator CPU.
func (ws windowSamples) addMetrics(res *Result, o Options, secs float64) {
	if !ws.opened || !ws.closed || secs <= 0 {
		return
	}
	if ws.cErr == nil && ws.c1 >= ws.c0 && res.Ops > 0 {
		res.add("commits_per_op", float64(ws.c1-ws.c0)/float64(res.Ops))
	}
	if len(o.ServerPIDs) > 0 && ws.cpu0.err == nil && ws.cpu1.err == nil {
		d := ws.cpu1.server - ws.cpu0.server
		res.add("server_cores", d/secs)
		if res.Ops > 0 {
			res.add("server_cpu_us_per_op", d/float64(res.Ops)*1e6)
		}
	}
	res.add("loadgen_cores", (ws.cpu1.self-ws.cpu0.self)/secs)
}
