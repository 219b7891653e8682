package bench

import (
	"time"

	"golang.org/x/sys/unix"
)

// sleepPrecise sleeps d in nanosleep: this thread blocks in the kernel,
// whose timers are not rounded to milliseconds (the runtime hands the
// processor to another thread meanwhile).
func sleepPrecise(d time.Duration) {
	ts := unix.NsecToTimespec(d.Nanoseconds())
	for {
		var rem unix.Timespec
		if err := unix.Nanosleep(&ts, &rem); err != unix.EINTR {
			return
		}
		ts = rem
	}
}
