package gctune

import (
	"math"
	"runtime"
	"runtime/metrics"
	"sync/atomic"
	"testing"
	"time"
)

const mib = 1 << 20

func TestPercent(t *testing.T) {
	for _, c := range []struct {
		live, headroom       uint64
		floor, ceiling, want int
	}{
		{live: 10 * mib, headroom: 256 * mib, floor: 25, ceiling: 100, want: 100},   // a small heap, GOGC=100 the ceiling
		{live: 10 * mib, headroom: 256 * mib, floor: 25, ceiling: 1000, want: 1000}, // a small heap: up to the ceiling
		{live: 64 * mib, headroom: 256 * mib, floor: 25, ceiling: 1000, want: 400},  // grows by the headroom
		{live: 256 * mib, headroom: 256 * mib, floor: 25, ceiling: 1000, want: 100}, // Go's default at the headroom
		{live: 600 * mib, headroom: 256 * mib, floor: 25, ceiling: 1000, want: 42},  // and below it above
		{live: 0, headroom: 256 * mib, floor: 25, ceiling: 1000, want: 1000},        // before the first collection
		{live: 1, headroom: 1 << 62, floor: 25, ceiling: -1, want: -1},              // off, small: off
		{live: 1, headroom: 1 << 40, floor: 25, ceiling: math.MaxInt32, want: 1e9},  // no overflow
		{live: 256 * mib, headroom: 256 * mib, floor: 25, ceiling: 100, want: 100},  // at the headroom still
		{live: 512 * mib, headroom: 256 * mib, floor: 25, ceiling: 100, want: 50},   // grows by 256 MiB only
		{live: 600 * mib, headroom: 256 * mib, floor: 25, ceiling: 100, want: 42},   // a million leases
		{live: 4096 * mib, headroom: 256 * mib, floor: 25, ceiling: 100, want: 25},  // the floor
		{live: 4096 * mib, headroom: 0, floor: 25, ceiling: 100, want: 100},         // no headroom: untouched
		{live: 0, headroom: 256 * mib, floor: 25, ceiling: 100, want: 100},          // before the first collection
		{live: 10 * mib, headroom: 1024 * mib, floor: 25, ceiling: 200, want: 200},  // GOGC=200 is the ceiling
		{live: 1200 * mib, headroom: 1024 * mib, floor: 25, ceiling: 200, want: 85}, // and the headroom still caps
		{live: 600 * mib, headroom: 256 * mib, floor: 25, ceiling: 30, want: 30},    // never above the ceiling
		{live: 10 * mib, headroom: 256 * mib, floor: 25, ceiling: -1, want: -1},     // GOGC=off stays off when small
		{live: 512 * mib, headroom: 256 * mib, floor: 25, ceiling: -1, want: 50},    // but the headroom caps
		{live: 1 << 62, headroom: 1 << 61, floor: 25, ceiling: 100, want: 50},       // no overflow
	} {
		if got := Percent(c.live, c.headroom, c.floor, c.ceiling); got != c.want {
			t.Errorf("Percent(%d MiB, %d MiB, %d, %d) = %d, want %d", c.live/mib, c.headroom/mib, c.floor, c.ceiling, got, c.want)
		}
	}
}

// fakeTuner is a tuner whose live heap the test feeds, reading by reading,
// and whose GOGC changes it records; nothing touches the process's GOGC.
func fakeTuner(headroom uint64, gogc int) (t *Tuner, feed chan uint64, sets chan int) {
	feed, sets = make(chan uint64), make(chan int, 100)
	t = &Tuner{headroom: headroom, floor: DefaultFloor, ceiling: gogc, restore: gogc, every: time.Nanosecond, longest: time.Nanosecond, stop: make(chan struct{}), done: make(chan struct{})}
	t.set = func(p int) int { old := gogc; gogc = p; sets <- p; return old }
	n := uint64(0)
	t.cycles = func() (uint64, bool) { n++; return n, true } // a collection before every look
	t.live = func() (uint64, bool) {
		select {
		case v := <-feed:
			return v, true
		case <-t.stop:
			return 0, false
		}
	}
	return t, feed, sets
}

// feedAll hands the tuner each live heap of lives, then Stops it, and
// returns every GOGC it set.
func feedAll(tu *Tuner, feed chan uint64, sets chan int, lives ...uint64) []int {
	tu.start()
	for _, live := range lives {
		feed <- live
	}
	feed <- lives[len(lives)-1] // the loop took the last reading above only once this one is taken
	tu.Stop()
	close(sets)
	var got []int
	for p := range sets {
		got = append(got, p)
	}
	return got
}

func sameInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestTunerFollowsTheLiveHeap: GOGC stays 100 while the live heap is
// small, falls as it grows past the headroom (in steps of at least
// minStep), reaches the floor and comes back up; Stop has nothing to
// restore then.
func TestTunerFollowsTheLiveHeap(t *testing.T) {
	tu, feed, sets := fakeTuner(256*mib, 100)
	got := feedAll(tu, feed, sets, 10*mib, 200*mib, 512*mib, 520*mib, 600*mib, 8192*mib, 100*mib)
	// 512 MiB: 50; 520 MiB: 49 (a step of 1, skipped); 600 MiB: 42; 8 GiB:
	// the floor; 100 MiB: back to 100.
	if want := []int{50, 42, DefaultFloor, 100}; !sameInts(got, want) {
		t.Fatalf("GOGC set to %v, want %v", got, want)
	}
}

// TestTunerRestoresOnStop: stopped while it holds GOGC down, the tuner
// puts back what it found.
func TestTunerRestoresOnStop(t *testing.T) {
	tu, feed, sets := fakeTuner(256*mib, 100)
	if got, want := feedAll(tu, feed, sets, 512*mib), []int{50, 100}; !sameInts(got, want) {
		t.Fatalf("GOGC set to %v, want %v", got, want)
	}
}

// TestTunerKeepsTheEnvironmentsGOGC: with GOGC=200 found at start (and a
// headroom given explicitly), 200 is the most it sets and where it
// returns, never Go's 100.
func TestTunerKeepsTheEnvironmentsGOGC(t *testing.T) {
	tu, feed, sets := fakeTuner(1024*mib, 200)
	got := feedAll(tu, feed, sets, 10*mib, 1200*mib, 10*mib)
	if want := []int{85, 200}; !sameInts(got, want) {
		t.Fatalf("GOGC set to %v, want %v", got, want)
	}
}

// TestTunerRaisesGOGCForASmallHeap: with a ceiling above the GOGC it
// found (the server's DefaultCeiling when the environment sets none), a
// small live heap may grow by the headroom, up to the ceiling; GOGC comes
// down as the heap grows, and Stop restores the GOGC found at start.
func TestTunerRaisesGOGCForASmallHeap(t *testing.T) {
	tu, feed, sets := fakeTuner(256*mib, 100)
	tu.ceiling = DefaultCeiling
	got := feedAll(tu, feed, sets, 10*mib, 64*mib, 200*mib, 512*mib)
	// 10 MiB: the ceiling (400); 64 MiB: 400 again (no change); 200 MiB:
	// 128; 512 MiB: 50; Stop: 100.
	if want := []int{DefaultCeiling, 128, 50, 100}; !sameInts(got, want) {
		t.Fatalf("GOGC set to %v, want %v", got, want)
	}
}

// TestTunerReadsOncePerCollection: the tuner reads the live heap once at
// start and then once after each collection, however often it looks, and
// not in between. (Collections and the live heap are made up: 1 MiB live
// at first, 1 GiB after, so that the later readings lower GOGC.)
func TestTunerReadsOncePerCollection(t *testing.T) {
	var collections, looks, reads atomic.Int64
	changed := make(chan int, 10)
	tu := &Tuner{headroom: 256 * mib, floor: DefaultFloor, ceiling: 100, restore: 100, every: time.Microsecond, longest: 10 * time.Microsecond,
		set: func(int) int { return 0 }, onChange: func(_ uint64, _, to int) { changed <- to },
		stop: make(chan struct{}), done: make(chan struct{})}
	tu.cycles = func() (uint64, bool) { looks.Add(1); return uint64(collections.Load()), true }
	tu.live = func() (uint64, bool) {
		if reads.Add(1) == 1 {
			return mib, true
		}
		return 1024 * mib, true
	}
	tu.start()
	defer tu.Stop()
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("30 s without %s (looks %d, reads %d)", what, looks.Load(), reads.Load())
			}
			time.Sleep(time.Millisecond)
		}
	}
	waitFor("100 looks", func() bool { return looks.Load() >= 100 })
	if n := reads.Load(); n != 1 {
		t.Fatalf("%d readings with no collection after start, want 1", n)
	}
	for i := int64(1); i <= 3; i++ {
		collections.Add(1)
		waitFor("a reading after the collection", func() bool { return reads.Load() == 1+i })
		l := looks.Load()
		waitFor("100 more looks", func() bool { return looks.Load() >= l+100 })
		if n := reads.Load(); n != 1+i {
			t.Fatalf("after %d collections: %d readings, want %d", i, n, 1+i)
		}
	}
	if to := <-changed; to != 25 { // 100 * 256 MiB / 1 GiB
		t.Fatalf("GOGC set to %d, want 25", to)
	}
}

// TestNoHeadroomTouchesNothing: headroom 0 (--gc-headroom off) starts no
// goroutine and never sets GOGC.
func TestNoHeadroomTouchesNothing(t *testing.T) {
	tu, _, sets := fakeTuner(0, 100)
	tu.start()
	tu.Stop()
	if len(sets) != 0 {
		t.Fatalf("GOGC was set %d times with no headroom", len(sets))
	}
}

// TestStartFollowsTheRuntime: Start's tuner, on this process's heap: with
// a headroom of 16 MiB and little live, GOGC stays (the ceiling, Go's 100
// here); once 64 MiB is live, a collection later the runtime's GOGC (read
// back through runtime/metrics) comes down to the floor, and Stop
// restores it.
func TestStartFollowsTheRuntime(t *testing.T) {
	runtime.GC()
	before := gogc(t)
	changed := make(chan int, 10)
	tu := Start(16*mib, DefaultFloor, CurrentGOGC(), func(_ uint64, _, to int) { changed <- to })
	t.Cleanup(tu.Stop)         // a failure below must not leave GOGC at the floor for the other tests
	keep := make([][]byte, 64) // 64 MiB live
	for i := range keep {
		keep[i] = make([]byte, mib)
	}
	deadline := time.After(30 * time.Second)
wait:
	for {
		runtime.GC()
		select {
		case to := <-changed:
			if to == DefaultFloor {
				break wait
			}
		case <-deadline:
			t.Fatal("the tuner changed nothing in 30 s")
		case <-time.After(50 * time.Millisecond):
		}
	}
	if got := gogc(t); got != DefaultFloor {
		t.Errorf("the runtime's GOGC is %d, want %d", got, DefaultFloor)
	}
	tu.Stop()
	if got := gogc(t); got != before {
		t.Errorf("after Stop the runtime's GOGC is %d, want %d as before", got, before)
	}
	runtime.KeepAlive(keep)
}

func gogc(t *testing.T) int {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		t.Fatal("no /gc/gogc:percent in runtime/metrics")
	}
	return int(s[0].Value.Uint64())
}
