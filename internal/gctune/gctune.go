// Package gctune caps how far the Go heap may grow past its live part.
//
// Go's collector (GOGC=100) lets the heap grow to twice what the last
// collection found live before it collects again. A node keeps its whole
// state in the heap, so at a million leases (about 0.6 GiB live) that
// headroom is another 0.6 GiB of resident memory, bought for nothing but
// fewer collections. The tuner keeps Go's default while the live heap is
// small (every benchmark of a small state runs exactly as without it), and
// once the live heap passes the headroom it lowers GOGC so that the heap
// may grow by the headroom only: GOGC = 100 * headroom / live, never below
// a floor (at very large heaps a fixed headroom would have the collector
// run all the time).
//
// It reads the live heap once a second (runtime/metrics), not on every
// collection: the state grows by writes, far slower than that, and a
// polling goroutine is simpler to stop than a finalizer re-armed on every
// cycle. GOGC is process-wide: one tuner per process (grackle server).
package gctune

import (
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"time"
)

// DefaultFloor is the lowest GOGC the tuner sets: at 25, a heap of 4 GiB
// live may still grow by 1 GiB between collections.
const DefaultFloor = 25

// Percent is the GOGC that lets a heap of live bytes grow by at most
// headroom: ceiling (Go's 100 by default, or what GOGC said; -1 is off)
// while live is at most headroom, else 100 * headroom / live, but never
// below floor nor above ceiling.
func Percent(live, headroom uint64, floor, ceiling int) int {
	if headroom == 0 || live <= headroom {
		return ceiling
	}
	p := int(float64(headroom) * 100 / float64(live)) // no overflow, whatever the sizes
	p = max(p, floor)
	if ceiling >= 0 {
		p = min(p, ceiling)
	}
	return p
}

// Tuner sets GOGC from the live heap until stopped.
type Tuner struct {
	headroom uint64
	floor    int
	ceiling  int // the GOGC found at start (-1: off): the most it sets, and what Stop restores
	every    time.Duration
	set      func(int) int         // debug.SetGCPercent; tests watch it
	live     func() (uint64, bool) // the live heap (runtime/metrics); tests feed it
	onChange func(live uint64, from, to int)

	stop chan struct{}
	done chan struct{}
	once sync.Once
}

// Start runs a tuner with headroom bytes (0: none: the tuner does
// nothing), polling every second. The GOGC it finds (100, or what the
// environment's GOGC set) is the most it sets and what Stop restores.
// onChange (nil: none) is told every change it makes, for the log.
func Start(headroom uint64, floor int, onChange func(live uint64, from, to int)) *Tuner {
	t := &Tuner{headroom: headroom, floor: floor, every: time.Second, set: debug.SetGCPercent,
		live: liveHeap, onChange: onChange, stop: make(chan struct{}), done: make(chan struct{})}
	if headroom > 0 {
		t.ceiling = currentGOGC() // not touched at all when there is nothing to tune
	}
	t.start()
	return t
}

func (t *Tuner) start() {
	if t.headroom == 0 {
		close(t.done)
		return
	}
	go t.run()
}

// Stop ends the tuner and puts GOGC back to what it was at start.
func (t *Tuner) Stop() {
	t.once.Do(func() {
		if t.headroom == 0 {
			return
		}
		close(t.stop)
		<-t.done
	})
}

// minStep is the smallest change of GOGC the tuner makes (but for reaching
// the ceiling or the floor): the live heap moves a little all the time, and GOGC
// need not follow every percent of it.
const minStep = 5

func (t *Tuner) run() {
	defer close(t.done)
	tick := time.NewTicker(t.every)
	defer tick.Stop()
	cur := t.ceiling
	defer func() {
		if cur != t.ceiling {
			t.set(t.ceiling)
		}
	}()
	for {
		if live, ok := t.live(); ok {
			want := Percent(live, t.headroom, t.floor, t.ceiling)
			if want != cur && (abs(want-cur) >= minStep || want == t.ceiling || want == t.floor) {
				t.set(want)
				if t.onChange != nil {
					t.onChange(live, cur, want)
				}
				cur = want
			}
		}
		select {
		case <-t.stop:
			return
		case <-tick.C:
		}
	}
}

// currentGOGC reads the process's GOGC (-1: off). The runtime has no
// getter that tells off apart (runtime/metrics reports a number), so it
// is set and put back: at start, before anything depends on it.
func currentGOGC() int {
	p := debug.SetGCPercent(100)
	debug.SetGCPercent(p)
	return p
}

// liveHeap is the heap the last collection found live (Go 1.21+).
func liveHeap() (uint64, bool) {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0, false
	}
	return s[0].Value.Uint64(), true
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}
