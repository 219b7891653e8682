package gctune

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"
)

const mib = 1 << 20

func TestPercent(t *testing.T) {
	for _, c := range []struct {
		live, headroom       uint64
		floor, ceiling, want int
	}{
		{live: 10 * mib, headroom: 256 * mib, floor: 25, ceiling: 100, want: 100},   // a small heap: Go's default
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
	t = &Tuner{headroom: headroom, floor: DefaultFloor, ceiling: gogc, every: time.Nanosecond, stop: make(chan struct{}), done: make(chan struct{})}
	t.set = func(p int) int { old := gogc; gogc = p; sets <- p; return old }
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

// TestTunerSetsTheRuntimesGOGC: the real tuner, on this process's heap:
// with a headroom of 1 MiB and more than that live, the runtime's GOGC
// (read back through runtime/metrics) comes down, and Stop restores it.
func TestTunerSetsTheRuntimesGOGC(t *testing.T) {
	keep := make([][]byte, 64) // 64 MiB live
	for i := range keep {
		keep[i] = make([]byte, mib)
	}
	runtime.GC()
	before := gogc(t)
	changed := make(chan int, 10)
	tu := &Tuner{headroom: mib, floor: DefaultFloor, ceiling: currentGOGC(), every: 10 * time.Millisecond, set: debug.SetGCPercent,
		live: liveHeap, onChange: func(_ uint64, _, to int) { changed <- to }, stop: make(chan struct{}), done: make(chan struct{})}
	tu.start()
	t.Cleanup(tu.Stop) // a failure below must not leave GOGC at the floor for the other tests
	select {
	case to := <-changed:
		if to != DefaultFloor {
			t.Errorf("GOGC set to %d with 64 MiB live and 1 MiB of headroom, want the floor %d", to, DefaultFloor)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the tuner changed nothing in 30 s")
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
