// Package gctune sets how far the Go heap may grow past its live part
// between collections: by a fixed headroom, rather than by as much again
// as is live (Go's GOGC=100).
//
// A node keeps its whole state in the heap. At a million leases (about
// 0.6 GiB live) Go's doubling is another 0.6 GiB of resident memory,
// bought for nothing but fewer collections; so once the live heap passes
// the headroom the tuner lowers GOGC, so that the heap grows by the
// headroom only: GOGC = 100 * headroom / live, never below a floor (at
// very large heaps a fixed headroom would have the collector run all the
// time). At a small state the opposite holds: a few tens of MB live,
// allocated through many times a second under load, had the collector
// start several times a second, and its marking landed inside writes'
// rounds (pairs' p99 10-11 ms against 6-7 with this tuner's ceiling of
// 400, on one 2-core machine under `grackle bench pairs`). So below the
// headroom the tuner raises GOGC by the same rule, up to a ceiling
// (DefaultCeiling: the heap grows by at most four times its live part,
// so a small state stays small).
//
// It looks whether a collection has ended (runtime/metrics' count of
// them) 10 ms after the last one, then less and less often, down to ten
// times a second, and reads the live heap after each collection, which is
// the only time the live heap changes. It must see each collection soon
// under load: a heap growing fast (a snapshot being restored) that kept a
// GOGC raised for a heap many times smaller would grow by four times its
// live part at each collection instead of by the headroom. (A cleanup on
// an object each collection frees was tried as the signal: under load the
// runtime runs cleanups only once the heap is swept, which on busy cores
// is just before the next collection, so it missed most of them.) GOGC is
// process-wide: one tuner per process (grackle server).
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

// DefaultCeiling is the most GOGC the tuner sets when the environment
// sets none: at 400 the heap grows by at most four times its live part
// between collections (a leader with 20 MB live under load: a collection
// every 80 MB allocated, not every 20; resident about 140 MB, not 70).
// 1000 measured barely better (pairs' p99 5.9-6.4 ms against 6.2-6.9),
// for a leader resident at 249 MB against 137.
const DefaultCeiling = 400

// Percent is the GOGC that lets a heap of live bytes grow by headroom:
// 100 * headroom / live, raised to floor if below it, then lowered to
// ceiling if above it (what GOGC said, or DefaultCeiling: a ceiling below
// the floor wins; -1 is off: then only lowered, once live passes
// headroom). Before the first collection (live 0), ceiling.
func Percent(live, headroom uint64, floor, ceiling int) int {
	if headroom == 0 || live == 0 || (ceiling < 0 && live <= headroom) {
		return ceiling
	}
	f := float64(headroom) * 100 / float64(live) // no overflow, whatever the sizes
	p := int(min(f, 1e9))
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
	ceiling  int                   // the most it sets (-1: off, see Percent)
	restore  int                   // the GOGC found at start (-1: off): what Stop puts back
	every    time.Duration         // how soon it looks again after a collection (pollEvery)
	longest  time.Duration         // the longest it waits between looks (pollLongest)
	set      func(int) int         // debug.SetGCPercent; tests watch it
	cycles   func() (uint64, bool) // collections so far (runtime/metrics); tests feed it
	live     func() (uint64, bool) // the live heap (runtime/metrics); tests feed it
	onChange func(live uint64, from, to int)

	stop chan struct{}
	done chan struct{}
	once sync.Once
}

// pollEvery and pollLongest bound how often the tuner looks whether a
// collection ended: 10 ms after one, then twice as long after each look
// that finds none, up to 100 ms. Under load (collections every fraction
// of a second, a heap being restored) it sees each within 10-100 ms; an
// idle node, which collects every two minutes, is woken ten times a
// second. (Looking every 10 ms throughout cost an idle node here 19 ms
// of CPU a second against 5 without the tuner; up to 100 ms, 6.)
const (
	pollEvery   = 10 * time.Millisecond
	pollLongest = 100 * time.Millisecond
)

// Start runs a tuner with headroom bytes (0: none: the tuner does
// nothing), reading the live heap after every collection (10-100 ms
// after it: pollEvery, pollLongest). ceiling is the most GOGC it sets (DefaultCeiling, or the
// environment's GOGC, which the operator chose; -1: off); the GOGC it
// finds is what Stop restores. onChange (nil: none) is told every change
// it makes, for the log.
func Start(headroom uint64, floor, ceiling int, onChange func(live uint64, from, to int)) *Tuner {
	t := &Tuner{headroom: headroom, floor: floor, ceiling: ceiling, every: pollEvery, longest: pollLongest, set: debug.SetGCPercent,
		cycles: gcCycles, live: liveHeap, onChange: onChange, stop: make(chan struct{}), done: make(chan struct{})}
	if headroom > 0 {
		t.restore = CurrentGOGC() // not touched at all when there is nothing to tune
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

// minStep is the smallest change of GOGC the tuner makes, and a tenth of
// the current GOGC when that is more (but for reaching the ceiling or the
// floor): the live heap moves by a few per cent from one collection to
// the next, and GOGC need not follow (nor the log tell) every move.
const minStep = 5

// worthChanging reports whether the tuner moves GOGC from cur to want.
func (t *Tuner) worthChanging(cur, want int) bool {
	return want != cur && (abs(want-cur) >= max(minStep, abs(cur)/10) || want == t.ceiling || want == t.floor)
}

func (t *Tuner) run() {
	defer close(t.done)
	timer := time.NewTimer(t.every)
	defer timer.Stop()
	wait := t.every
	cur := t.restore
	defer func() {
		if cur != t.restore {
			t.set(t.restore)
		}
	}()
	seen := ^uint64(0) // no count yet: the first look reads the live heap
	for {
		// The live heap changes only at a collection: read it once after
		// each (and once at start).
		n, ok := t.cycles()
		wait = min(2*wait, t.longest) // no collection: look less often
		if ok && n != seen {
			seen, wait = n, t.every
			if live, ok := t.live(); ok {
				if want := Percent(live, t.headroom, t.floor, t.ceiling); t.worthChanging(cur, want) {
					t.set(want)
					if t.onChange != nil {
						t.onChange(live, cur, want)
					}
					cur = want
				}
			}
		}
		timer.Reset(wait)
		select {
		case <-t.stop:
			return
		case <-timer.C:
		}
	}
}

// CurrentGOGC reads the process's GOGC (-1: off). The runtime has no
// getter that tells off apart (runtime/metrics reports a number), so it
// is set and put back: at start, before anything depends on it.
func CurrentGOGC() int {
	p := debug.SetGCPercent(100)
	debug.SetGCPercent(p)
	return p
}

// liveHeap is the heap the last collection found live (Go 1.21+).
func liveHeap() (uint64, bool) { return readUint64("/gc/heap/live:bytes") }

// gcCycles is how many collections have ended.
func gcCycles() (uint64, bool) { return readUint64("/gc/cycles/total:gc-cycles") }

func readUint64(name string) (uint64, bool) {
	s := []metrics.Sample{{Name: name}}
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
