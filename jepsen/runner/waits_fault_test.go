//go:build faultinject

package runner

import (
	"os"
	"testing"
	"time"

	"github.com/grackle-coord/grackle/jepsen/check"
	"github.com/grackle-coord/grackle/jepsen/history"
)

// The build-time faults of the wait workloads are caught by the rule
// each breaks, without root or faults:
//
//	GRACKLE_FAULT=wg-early-complete go test -tags faultinject -run TestWaitWorkloadCatchesFault ./jepsen/runner/
//	GRACKLE_FAULT=barrier-early-trip go test -tags faultinject -run TestWaitWorkloadCatchesFault ./jepsen/runner/
//
// wg-early-complete: a group completes one job before its counter
// (wg-early-complete: COMPLETED observed before counter distinct jobs
// were sent); barrier-early-trip: a barrier trips one arrival early
// (barrier-early-trip, and its waiters are released: barrier-early-release).
func TestWaitWorkloadCatchesFault(t *testing.T) {
	fault := os.Getenv("GRACKLE_FAULT")
	var checker string
	var kinds []string
	switch fault {
	case "wg-early-complete":
		checker, kinds = check.NameWaitGroups, []string{"wg-early-complete"}
	case "barrier-early-trip":
		checker, kinds = check.NameBarriers, []string{"barrier-early-trip", "barrier-early-release"}
	default:
		t.Skip("needs GRACKLE_FAULT=wg-early-complete or barrier-early-trip")
	}
	has := func(r check.Result, kind string) bool { return r.Stats["anomaly:"+kind] > 0 }
	caught := func(h *history.History) bool {
		r := waitResults(h)[checker]
		for _, k := range kinds {
			if !has(r, k) {
				return false
			}
		}
		return true
	}
	h := runWaitWorkload(t, 4, 2, time.Minute, caught)
	r := waitResults(h)[checker]
	for _, k := range kinds {
		if !has(r, k) {
			t.Errorf("%s: no %s anomaly; stats %v", checker, k, r.Stats)
		}
	}
	for i, a := range r.Anomalies {
		if i < 3 {
			t.Logf("%s: %s", a.Kind, a.Description)
		}
	}
	t.Logf("%s stats: %v", checker, r.Stats)
}
