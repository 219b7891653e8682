package bench

import (
	"testing"
	"time"
)

// A hold never ends early (the hand-off limit assumes it lasts the whole
// Hold), however it sleeps.
func TestHoldForLastsAtLeastItsDuration(t *testing.T) {
	for _, d := range []time.Duration{0, 50 * time.Microsecond, holdSpin, time.Millisecond, 3 * time.Millisecond} {
		t0 := time.Now()
		holdFor(d)
		if got := time.Since(t0); got < d {
			t.Errorf("holdFor(%s) returned after %s", d, got)
		}
	}
}
