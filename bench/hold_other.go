//go:build !linux

package bench

import (
	"time"
)

// sleepPrecise is time.Sleep where nanosleep is not used.
func sleepPrecise(d time.Duration) { time.Sleep(d) }
