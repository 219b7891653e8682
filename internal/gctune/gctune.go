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
// headroom: Go's default of 100 while live is at most headroom, else
// 100 * headroom / live, but never below floor.
func Percent(live, headroom uint64, floor int) int {
	if headroom == 0 || live <= headroom {
		return 100
	}
	p := int(headroom * 100 / live)
	return max(p, floor)
}

// Tuner sets GOGC from the live heap until stopped.
type Tuner struct {
	headroom uint64
	floor    int
	every    time.Duration
	set      func(int) int         // debug.SetGCPercent; tests watch it
	live     func() (uint64, bool) // the live heap (runtime/metrics); tests feed it
	onChange func(live uint64, from, to int)

	stop chan struct{}
	done chan struct{}
	once sync.Once
}

// Start runs a tuner with headroom bytes (0: none: the tuner does
// nothing), polling every second. onChange (nil: none) is told every
// change it makes, for the log.
func Start(headroom uint64, floor int, onChange func(live uint64, from, to int)) *Tuner {
	t := &Tuner{headroom: headroom, floor: floor, every: time.Second, set: debug.SetGCPercent, live: liveHeap,
		onChange: onChange, stop: make(chan struct{}), done: make(chan struct{})}
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

// Stop ends the tuner and puts GOGC back to what it was, if it changed it.
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
// 100 or the floor): the live heap moves a little all the time, and GOGC
// need not follow every percent of it.
const minStep = 5

func (t *Tuner) run() {
	defer close(t.done)
	tick := time.NewTicker(t.every)
	defer tick.Stop()
	cur, orig := 100, -1
	defer func() {
		if orig >= 0 {
			t.set(orig)
		}
	}()
	for {
		if live, ok := t.live(); ok {
			want := Percent(live, t.headroom, t.floor)
			if want != cur && (abs(want-cur) >= minStep || want == 100 || want == t.floor) {
				if was := t.set(want); orig < 0 {
					orig = was
				}
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
