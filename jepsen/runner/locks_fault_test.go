//go:build faultinject

package runner

import (
	"os"
	"testing"
	"time"

	"github.com/grackle-coord/grackle/jepsen/check"
	"github.com/grackle-coord/grackle/jepsen/history"
)

// The build-time fault lock-conflict-grant (a shared request granted
// beside another lease's exclusive hold of the same lock) is caught by
// lock-safety, without root or faults:
//
//	GRACKLE_FAULT=lock-conflict-grant go test -tags faultinject -run TestLockWorkloadCatchesFault ./jepsen/runner/
func TestLockWorkloadCatchesFault(t *testing.T) {
	if os.Getenv("GRACKLE_FAULT") != "lock-conflict-grant" {
		t.Skip("needs GRACKLE_FAULT=lock-conflict-grant")
	}
	// How soon a shared request meets another lease's exclusive hold of
	// the same lock depends on timing: run until lock-safety sees it, for
	// at most a minute.
	caught := func(h *history.History) bool { return check.LockSafety(h).Valid == check.Invalid }
	h := runLockWorkload(t, 6, time.Minute, caught)
	r := lockResults(h)[check.NameLockSafety]
	if r.Valid != check.Invalid {
		t.Fatalf("lock-safety: %s, want anomaly; stats %v", r.Valid, r.Stats)
	}
	for i, a := range r.Anomalies {
		if i < 3 {
			t.Logf("%s: %s", a.Kind, a.Description)
		}
	}
	t.Logf("lock-safety stats: %v", r.Stats)
}
