package check

import (
	"testing"

	"github.com/grackle-coord/grackle/apierr"
	"github.com/grackle-coord/grackle/jepsen/history"
)

func bv(gen, arrived, expected int64) *history.BarrierView {
	return &history.BarrierView{Generation: gen, Arrived: arrived, Expected: expected}
}

func (b *hb) bCreate(p int, name string, expected int64, inv, comp float64) int {
	return b.add(history.Op{Process: p, Kind: history.BarrierCreate, Barrier: name, Expected: expected, B: bv(1, 0, expected)}, inv, comp)
}

// bArrive: outcome "" (ok, with the view and all_arrived), Info or Fail.
func (b *hb) bArrive(p int, name, proc string, gen int64, inv, comp float64, outcome string, v *history.BarrierView, all bool) int {
	o := history.Op{Process: p, Kind: history.BarrierArrive, Barrier: name, BarrierProcess: proc, Generation: gen, Outcome: outcome}
	if outcome == "" {
		o.B, o.AllArrived = v, all
	}
	return b.add(o, inv, comp)
}

// bMismatch: an arrival refused GENERATION_MISMATCH naming current.
func (b *hb) bMismatch(p int, name, proc string, gen int64, inv, comp float64, current int64) int {
	return b.add(history.Op{Process: p, Kind: history.BarrierArrive, Barrier: name, BarrierProcess: proc, Generation: gen, Outcome: history.Fail,
		Code: "FailedPrecondition", Reason: apierr.GenerationMismatch, CurrentGeneration: current}, inv, comp)
}

func (b *hb) bWait(p int, name string, gen int64, inv, comp float64, outcome string, v *history.BarrierView) int {
	return b.add(history.Op{Process: p, Kind: history.BarrierWait, Barrier: name, Generation: gen, Timeout: 1, WaitOutcome: outcome, B: v}, inv, comp)
}

func (b *hb) bGet(p int, name string, inv, comp float64, v *history.BarrierView) int {
	return b.add(history.Op{Process: p, Kind: history.BarrierGet, Barrier: name, B: v}, inv, comp)
}

// bList: a participants read asking for gen (0: current) that listed
// generation listed.
func (b *hb) bList(p int, name string, gen, listed int64, inv, comp float64, procs ...string) int {
	o := history.Op{Process: p, Kind: history.BarrierParticipants, Barrier: name, Generation: gen, ListedGeneration: listed}
	for _, x := range procs {
		o.Participants = append(o.Participants, history.Participant{Process: x, Generation: listed})
	}
	return b.add(o, inv, comp)
}

func barrierOK(t *testing.T, h *history.History) {
	t.Helper()
	if r := Barriers(h); r.Valid != Valid {
		t.Errorf("%s: %s, want ok\n%s", r.Name, r.Valid, dump(r))
	}
}

// A legal history: an arrival of unknown outcome that counted, retried
// after the trip; a waiter released by the trip; a late process refused
// with the current generation; participants of both kept generations.
func TestBarrierLegal(t *testing.T) {
	b := newHB(nil)
	b.bCreate(1, "b", 2, 0, 5)
	b.bArrive(1, "b", "p1", 1, 10, 20, "", bv(1, 1, 2), false)
	b.bWait(1, "b", 1, 21, 60, history.WaitTripped, bv(2, 0, 2))
	b.bArrive(2, "b", "p2", 1, 30, 0, history.Info, nil, false)
	b.bGet(3, "b", 25, 35, bv(1, 1, 2))                                                                          // before p2 applied
	b.bArrive(12, "b", "p2", 1, 61, 70, "", bv(2, 0, 2), true)                                                   // the retry: counted already, tripped
	b.bList(3, "b", 1, 1, 71, 75, "p1", "p2")                                                                    // the previous generation, kept
	b.bList(3, "b", 0, 2, 76, 80)                                                                                // the current one
	b.bMismatch(4, "b", "p3", 1, 81, 85, 2)                                                                      // p3 never counted at 1
	b.bArrive(4, "b", "p3", 2, 86, 90, "", bv(2, 1, 2), false)                                                   // gen 2
	b.bArrive(1, "b", "p1", 2, 91, 95, "", bv(3, 0, 2), true)                                                    // trips 2
	b.bWait(12, "b", 2, 88, 96, history.WaitTripped, bv(3, 0, 2))                                                // released by it
	b.bWait(12, "b", 1, 97, 98, history.WaitTripped, bv(3, 0, 2))                                                // an old generation: at once
	b.bWait(12, "b", 3, 99, 1200, history.WaitTimedOut, bv(3, 0, 2))                                             // nobody comes
	b.add(history.Op{Process: 12, Kind: history.BarrierWait, Barrier: "b", Generation: 4, Outcome: history.Fail, // not begun
		Code: "FailedPrecondition", Reason: apierr.GenerationMismatch, CurrentGeneration: 3}, 1201, 1205)
	barrierOK(t, b.h)
	b.h.ServedAgainAt = ms(1)
	allOK(t, b.h)
}

func TestBarrierEarlyTrip(t *testing.T) {
	// Trips at the second arrival of three.
	b := newHB(nil)
	b.bCreate(1, "b", 3, 0, 5)
	b.bArrive(1, "b", "p1", 1, 10, 20, "", bv(1, 1, 3), false)
	trip := b.bArrive(2, "b", "p2", 1, 21, 30, "", bv(2, 0, 3), true)
	b.bMismatch(3, "b", "p3", 1, 40, 45, 2)
	r := Barriers(b.h)
	a := expect(t, r, Invalid, "barrier-early-trip")
	if !hasOps(a, trip) {
		t.Errorf("anomaly ops: %v", a.Ops)
	}

	// A read of a later generation is evidence too, for every earlier one.
	b = newHB(nil)
	b.bCreate(1, "b", 2, 0, 5)
	b.bArrive(1, "b", "p1", 1, 10, 0, history.Info, nil, false)
	b.bArrive(2, "b", "p2", 1, 12, 0, history.Info, nil, false)
	b.bArrive(1, "b", "p1", 2, 30, 0, history.Info, nil, false)
	b.bGet(3, "b", 40, 45, bv(3, 0, 2)) // generation 2 tripped with one arrival
	expect(t, Barriers(b.h), Invalid, "barrier-early-trip")

	// An arrival that failed for certain does not count.
	b = newHB(nil)
	b.bCreate(1, "b", 2, 0, 5)
	b.bArrive(1, "b", "p1", 1, 10, 20, history.Fail, nil, false)
	b.bArrive(2, "b", "p2", 1, 12, 30, "", bv(2, 0, 2), true)
	expect(t, Barriers(b.h), Invalid, "barrier-early-trip")

	// The same with p1's outcome unknown: legal.
	b = newHB(nil)
	b.bCreate(1, "b", 2, 0, 5)
	b.bArrive(1, "b", "p1", 1, 10, 0, history.Info, nil, false)
	b.bArrive(2, "b", "p2", 1, 12, 30, "", bv(2, 0, 2), true)
	barrierOK(t, b.h)

	// One process arriving twice is one arrival.
	b = newHB(nil)
	b.bCreate(1, "b", 2, 0, 5)
	b.bArrive(1, "b", "p1", 1, 10, 0, history.Info, nil, false)
	b.bArrive(2, "b", "p1", 1, 12, 30, "", bv(2, 0, 2), true)
	expect(t, Barriers(b.h), Invalid, "barrier-early-trip")
}

func TestBarrierEarlyRelease(t *testing.T) {
	b := newHB(nil)
	b.bCreate(1, "b", 3, 0, 5)
	b.bArrive(1, "b", "p1", 1, 10, 20, "", bv(1, 1, 3), false)
	b.bArrive(2, "b", "p2", 1, 12, 22, "", bv(1, 2, 3), false)
	w := b.bWait(1, "b", 1, 21, 40, history.WaitTripped, bv(2, 0, 3))
	b.bArrive(3, "b", "p3", 1, 50, 55, "", bv(2, 0, 3), true)
	r := Barriers(b.h)
	a := expect(t, r, Invalid, "barrier-early-release")
	if !hasOps(a, w) {
		t.Errorf("anomaly ops: %v", a.Ops)
	}
}

func TestBarrierLost(t *testing.T) {
	b := newHB(nil)
	b.bCreate(1, "b", 3, 0, 5)
	b.bArrive(1, "b", "p1", 1, 10, 20, "", bv(1, 1, 3), false)
	b.bArrive(2, "b", "p2", 1, 12, 22, "", bv(1, 2, 3), false)
	get := b.bGet(3, "b", 30, 35, bv(1, 1, 3))
	list := b.bList(3, "b", 1, 1, 40, 45, "p1")
	r := Barriers(b.h)
	a := expect(t, r, Invalid, "barrier-lost-arrival")
	if !hasOps(a, get) {
		t.Errorf("first anomaly: %v", a.Ops)
	}
	found := false
	for _, a := range r.Anomalies {
		if a.Kind == "barrier-lost-arrival" && hasOps(&a, list) {
			found = true
		}
	}
	if !found {
		t.Errorf("the participants read that misses p2 is not flagged\n%s", dump(r))
	}

	// A read concurrent with the acknowledgement may miss it.
	b = newHB(nil)
	b.bCreate(1, "b", 3, 0, 5)
	b.bArrive(1, "b", "p1", 1, 10, 20, "", bv(1, 1, 3), false)
	b.bGet(3, "b", 15, 35, bv(1, 0, 3))
	b.bList(3, "b", 0, 1, 15, 36)
	barrierOK(t, b.h)
}

func TestBarrierRegressed(t *testing.T) {
	b := newHB(nil)
	b.bCreate(1, "b", 1, 0, 5)
	b.bArrive(1, "b", "p1", 1, 10, 20, "", bv(2, 0, 1), true)
	b.bArrive(1, "b", "p1", 2, 21, 30, "", bv(3, 0, 1), true)
	b.bGet(3, "b", 40, 45, bv(3, 0, 1))
	g := b.bGet(3, "b", 50, 55, bv(2, 0, 1))
	a := expect(t, Barriers(b.h), Invalid, "barrier-regressed")
	if !hasOps(a, g) {
		t.Errorf("anomaly ops: %v", a.Ops)
	}

	// A refusal's current generation is an observation too.
	b = newHB(nil)
	b.bCreate(1, "b", 1, 0, 5)
	b.bArrive(1, "b", "p1", 1, 10, 20, "", bv(2, 0, 1), true)
	b.bMismatch(2, "b", "p2", 5, 30, 35, 1)
	expect(t, Barriers(b.h), Invalid, "barrier-regressed")

	// Overlapping reads may see either order.
	b = newHB(nil)
	b.bCreate(1, "b", 1, 0, 5)
	b.bArrive(1, "b", "p1", 1, 10, 0, history.Info, nil, false)
	b.bGet(3, "b", 12, 30, bv(2, 0, 1))
	b.bGet(4, "b", 11, 31, bv(1, 0, 1))
	barrierOK(t, b.h)
}

func TestBarrierTripShort(t *testing.T) {
	b := newHB(nil)
	b.bCreate(1, "b", 2, 0, 5)
	b.bArrive(1, "b", "p1", 1, 10, 20, "", bv(1, 1, 2), false)
	b.bArrive(2, "b", "p2", 1, 12, 0, history.Info, nil, false)
	b.bWait(1, "b", 1, 21, 40, history.WaitTripped, bv(2, 0, 2))
	b.bList(3, "b", 1, 1, 50, 55, "p1")
	expect(t, Barriers(b.h), Invalid, "barrier-trip-short")
}

func TestBarrierPhantom(t *testing.T) {
	b := newHB(nil)
	b.bCreate(1, "b", 3, 0, 5)
	b.bArrive(1, "b", "p1", 1, 10, 20, "", bv(1, 1, 3), false)
	b.bList(3, "b", 0, 1, 30, 35, "p1", "p9")
	expect(t, Barriers(b.h), Invalid, "barrier-phantom")

	b = newHB(nil)
	b.bCreate(1, "b", 3, 0, 5)
	b.bArrive(1, "b", "p1", 1, 10, 20, "", bv(1, 2, 3), false) // counted twice
	expect(t, Barriers(b.h), Invalid, "barrier-phantom")
}

func TestBarrierInconsistent(t *testing.T) {
	b := newHB(nil)
	b.bCreate(1, "b", 2, 0, 5)
	b.bArrive(1, "b", "p1", 1, 10, 20, "", bv(1, 1, 2), true)
	expect(t, Barriers(b.h), Invalid, "barrier-inconsistent")

	b = newHB(nil)
	b.bCreate(1, "b", 2, 0, 5)
	b.bArrive(1, "b", "p1", 1, 10, 0, history.Info, nil, false)
	b.bArrive(2, "b", "p2", 1, 10, 0, history.Info, nil, false)
	b.bWait(1, "b", 1, 21, 40, history.WaitTripped, bv(1, 0, 2))
	expect(t, Barriers(b.h), Invalid, "barrier-inconsistent")

	b = newHB(nil)
	b.bCreate(1, "b", 2, 0, 5)
	b.bArrive(1, "b", "p1", 1, 10, 0, history.Info, nil, false)
	b.bArrive(2, "b", "p2", 1, 10, 0, history.Info, nil, false)
	b.bGet(3, "b", 30, 35, bv(1, 2, 2))
	expect(t, Barriers(b.h), Invalid, "barrier-inconsistent")

	b = newHB(nil)
	b.bCreate(1, "b", 3, 0, 5)
	b.bArrive(1, "b", "p1", 1, 10, 20, "", bv(1, 1, 3), false)
	b.bList(3, "b", 0, 1, 30, 35, "p1", "p1")
	expect(t, Barriers(b.h), Invalid, "barrier-inconsistent")
}
