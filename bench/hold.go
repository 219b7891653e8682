package bench

import (
	"runtime"
	"time"
)

// holdSpin is the part of a hold spent yielding in a loop instead of
// asleep: more than a sleep's overshoot on an idle machine (50-100 µs).
const holdSpin = 150 * time.Microsecond

// holdFor returns d after it was called, to within a few microseconds.
//
// time.Sleep is not precise enough for a 1 ms hold: when every thread of
// the process is idle, the Go runtime waits for its next timer in
// epoll_wait, whose timeout counts in whole milliseconds, so a 1 ms sleep
// took 1.08 ms alone and 1.25 ms inside the load generator. The hand-off
// workload would then measure the load generator's timer (a quarter of its
// cycle), not the coordinator, and the same for both backends. So the hold
// sleeps in the kernel (sleepPrecise: nanosleep on Linux) until holdSpin
// before the end, then yields until the end.
func holdFor(d time.Duration) {
	end := time.Now().Add(d)
	if d > holdSpin {
		sleepPrecise(d - holdSpin)
	}
	for time.Now().Before(end) {
		runtime.Gosched()
	}
}
