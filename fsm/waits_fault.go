package fsm

import "github.com/grackle-coord/grackle/internal/fault"

// The build-time faults of the wait-group and barrier state machine
// (internal/fault; -tags faultinject builds only, false and compiled away
// otherwise), each breaking one rule the fault-injection suite checks
// (jepsen/check/waitgroups.go, barriers.go). Both keep the state
// consistent with itself, so that snapshots still restore:
//
//	wg-early-complete   a batch that brings a group to counter-1 jobs
//	                    completes it (the counter drops by one with it)
//	barrier-early-trip  a barrier trips at expected_processes-1 arrivals
var (
	faultWGEarlyComplete  = fault.On("wg-early-complete")
	faultBarrierEarlyTrip = fault.On("barrier-early-trip")
)
