package bench

import (
	"context"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"
)

// window is the measured part of a run: an operation counts when it
// completes inside it.
type window struct{ from, to time.Time }

func (w window) contains(t time.Time) bool { return !t.Before(w.from) && t.Before(w.to) }

// tally is what one worker measured. Only its worker writes it.
type tally struct {
	win     window
	ops     int64
	series  []*Hist
	errs    int
	lastErr error
	total   *atomic.Int64 // every completed op, for the progress line
}

// latency records end-start in series i when the op ended in the window.
func (t *tally) latency(i int, start, end time.Time) {
	if t.win.contains(end) {
		t.series[i].Record(end.Sub(start))
	}
}

// done counts one completed operation.
func (t *tally) done(end time.Time) {
	t.total.Add(1)
	if t.win.contains(end) {
		t.ops++
	}
}

// loop runs closed-loop workers for warm-up plus window.
type loop struct {
	name     string
	workers  int
	warmup   time.Duration
	duration time.Duration
	series   []string
	progress io.Writer // nil: no progress line
	// atFrom and atTo run when the window opens and closes (CPU and
	// commit-index samples).
	atFrom, atTo func()
}

// loopResult merges the workers' tallies.
type loopResult struct {
	ops     int64
	series  map[string]Summary
	errs    int
	lastErr error
	elapsed time.Duration // of the window, as it ran
}

// run calls op in a loop on every worker until the window closes. op
// returns nil after a completed operation; an error while the run is
// still on counts as an error (and the worker goes on).
func (l loop) run(ctx context.Context, op func(ctx context.Context, w int, t *tally) error) loopResult {
	start := time.Now()
	win := window{from: start.Add(l.warmup), to: start.Add(l.warmup + l.duration)}
	runCtx, cancel := context.WithDeadline(ctx, win.to)
	defer cancel()
	var total atomic.Int64
	tallies := make([]*tally, l.workers)
	for i := range tallies {
		t := &tally{win: win, total: &total}
		for range l.series {
			t.series = append(t.series, NewHist())
		}
		tallies[i] = t
	}
	edges := make(chan struct{})
	var opened, closed time.Time
	go func() {
		defer close(edges)
		if !sleepUntil(runCtx, win.from) {
			return
		}
		opened = time.Now()
		if l.atFrom != nil {
			l.atFrom()
		}
		<-runCtx.Done()
		closed = time.Now()
		if l.atTo != nil {
			l.atTo()
		}
	}()
	stopProgress := l.showProgress(runCtx, start, win, &total)
	var wg sync.WaitGroup
	for w := 0; w < l.workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			t := tallies[w]
			for runCtx.Err() == nil {
				err := op(runCtx, w, t)
				if err == nil {
					continue
				}
				// A call cut by the window's deadline is the end, not an
				// error (gRPC may see the deadline a moment before ctx).
				if runCtx.Err() != nil || !time.Now().Before(win.to) {
					break
				}
				t.errs++
				t.lastErr = err
				// Do not spin on a persistent failure.
				sleepUntil(runCtx, time.Now().Add(10*time.Millisecond))
			}
		}(w)
	}
	wg.Wait()
	<-edges
	stopProgress()
	res := loopResult{series: map[string]Summary{}, elapsed: closed.Sub(opened)}
	if res.elapsed <= 0 {
		res.elapsed = l.duration
	}
	for i, name := range l.series {
		h := NewHist()
		for _, t := range tallies {
			h.Merge(t.series[i])
		}
		res.series[name] = h.Summary()
	}
	for _, t := range tallies {
		res.ops += t.ops
		res.errs += t.errs
		if t.lastErr != nil {
			res.lastErr = t.lastErr
		}
	}
	return res
}

// sleepUntil waits for t or ctx; it reports whether t was reached.
func sleepUntil(ctx context.Context, t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err() == nil
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// showProgress rewrites one status line every second until stopped.
func (l loop) showProgress(ctx context.Context, start time.Time, win window, total *atomic.Int64) (stop func()) {
	if l.progress == nil {
		return func() {}
	}
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		tk := time.NewTicker(time.Second)
		defer tk.Stop()
		last, lastAt := int64(0), start
		for {
			select {
			case <-done:
				fmt.Fprint(l.progress, "\r\033[K")
				return
			case now := <-tk.C:
				n := total.Load()
				phase := "warm-up"
				if !now.Before(win.from) {
					phase = "window"
				}
				rate := float64(n-last) / now.Sub(lastAt).Seconds()
				fmt.Fprintf(l.progress, "\r\033[K%s: %s %4.1fs/%.0fs  %9.0f ops/s", l.name, phase,
					now.Sub(start).Seconds(), win.to.Sub(start).Seconds(), rate)
				last, lastAt = n, now
			}
		}
	}()
	return func() { close(done); <-finished }
}
