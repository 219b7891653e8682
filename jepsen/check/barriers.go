package check

import (
	"fmt"
	"sort"
	"time"

	"github.com/grackle-coord/grackle/apierr"
	"github.com/grackle-coord/grackle/jepsen/history"
)

// The barrier checker (docs/API.md, Barriers; rules in DESIGN.md, Wait
// groups and barriers). Per barrier, from its ops (barrier_*), with
// "arrivals at g" the arrivals with expected_generation g, any outcome but
// a certain failure (one whose outcome is unknown may have counted):
//
//   - barrier-early-trip: generation g is never observed tripped (a view
//     or a refusal naming a later generation, an arrival's all_arrived, a
//     participants read of the current generation listing a later one)
//     before `expected_processes` distinct processes had sent an arrival
//     at g (invoked before that answer). barrier-trip-short: a
//     participants read of g, sent after g was observed tripped, lists
//     fewer than `expected_processes`.
//   - barrier-early-release: no WaitAtBarrier for g answers TRIPPED before
//     `expected_processes` distinct arrivals at g were sent.
//   - barrier-lost-arrival: an acknowledged arrival at g is listed by every
//     participants read of g sent after the acknowledgement, and counted
//     by every view of generation g sent after it.
//   - barrier-regressed: generations observed only increase along real
//     time: a read sent after another was answered never shows a lower
//     current generation.
//   - barrier-phantom: no read lists a participant, or counts an arrival,
//     that no arrival sent before its answer could have made; no more than
//     `expected_processes` at one generation.
//   - barrier-inconsistent: answers agree with themselves (an arrival's
//     all_arrived iff its generation tripped, a TRIPPED wait shows a later
//     generation, a current generation never holds expected_processes
//     arrivals, each participant of the generation listed, once).

type barrierGen struct {
	sent   *firstTimes // process -> earliest invoke of an arrival at this generation that may have counted
	acked  *firstTimes // process -> earliest acknowledgement of an arrival at this generation
	tripAt time.Duration
	tripBy *history.Op
}

// bCur is an observation of the current generation.
type bCur struct {
	op  *history.Op
	gen int64
}

func barrierKey(o *history.Op) string { return semKey(o.Namespace, o.Barrier) }

// Barriers checks the barrier rules on a history.
func Barriers(h *history.History) Result { return barriers(h, 0) }

func barriers(h *history.History, maxAnoms int) Result {
	t0 := time.Now()
	r := Result{Name: NameBarriers, Stats: map[string]int64{}}
	ops := h.Sorted()
	bs := map[string][]*history.Op{}
	var order []string
	for i := range ops {
		o := &ops[i]
		if !isBarrierKind(o.Kind) {
			continue
		}
		k := barrierKey(o)
		if bs[k] == nil {
			order = append(order, k)
		}
		bs[k] = append(bs[k], o)
	}
	if len(bs) == 0 {
		r.Valid = Valid
		r.Notes = append(r.Notes, "no barrier operations in this history")
		r.Elapsed = time.Since(t0)
		return r
	}
	an := newAnomalies(maxAnoms)
	for _, k := range order {
		checkBarrier(k, bs[k], an, r.Stats)
	}
	r.Stats["barriers"] = int64(len(bs))
	an.fill(&r)
	r.Elapsed = time.Since(t0)
	return r
}

func checkBarrier(key string, ops []*history.Op, an *anomalies, stats map[string]int64) {
	var expected int64
	for _, o := range ops {
		if o.Kind == history.BarrierCreate && o.Outcome != history.Fail {
			expected = o.Expected
			if o.B != nil {
				expected = o.B.Expected
			}
			break
		}
	}
	if expected == 0 {
		for _, o := range ops {
			if o.Outcome == history.OK && o.B != nil {
				expected = o.B.Expected
				break
			}
		}
	}
	if expected <= 0 {
		stats["barriers_without_expected"]++
		return
	}

	gens := map[int64]*barrierGen{}
	gen := func(g int64) *barrierGen {
		x := gens[g]
		if x == nil {
			x = &barrierGen{sent: newFirstTimes(), acked: newFirstTimes(), tripAt: inf}
			gens[g] = x
		}
		return x
	}
	// Evidence that every generation below G had tripped by an answer.
	type evidence struct {
		op *history.Op
		G  int64
	}
	var ev []evidence
	var cur []bCur
	for _, o := range ops {
		switch o.Kind {
		case history.BarrierArrive:
			stats["arrivals"]++
			if o.Outcome != history.Fail {
				gen(o.Generation).sent.note(o.BarrierProcess, o.Invoke, o)
			}
			if o.Outcome == history.OK {
				stats["arrivals_acked"]++
				gen(o.Generation).acked.note(o.BarrierProcess, o.Complete, o)
				if o.AllArrived {
					ev = append(ev, evidence{o, o.Generation + 1})
				}
			}
		case history.BarrierWait:
			if o.Outcome == history.OK && o.WaitOutcome == history.WaitTripped {
				stats["waits_tripped"]++
				ev = append(ev, evidence{o, o.Generation + 1})
			}
		case history.BarrierParticipants:
			if o.Outcome == history.OK && o.Generation == 0 && o.ListedGeneration > 0 {
				cur = append(cur, bCur{o, o.ListedGeneration})
				ev = append(ev, evidence{o, o.ListedGeneration})
			}
		}
		if o.Outcome == history.OK && o.B != nil {
			cur = append(cur, bCur{o, o.B.Generation})
			ev = append(ev, evidence{o, o.B.Generation})
		}
		if o.Outcome == history.Fail && o.Reason == apierr.GenerationMismatch && o.CurrentGeneration > 0 {
			cur = append(cur, bCur{o, o.CurrentGeneration})
			ev = append(ev, evidence{o, o.CurrentGeneration})
		}
	}
	for _, x := range gens {
		x.sent.seal()
		x.acked.seal()
	}

	// When each generation was first seen tripped.
	sort.SliceStable(ev, func(i, j int) bool { return ev[i].op.Complete < ev[j].op.Complete })
	top := int64(1)
	for _, e := range ev {
		for ; top < e.G; top++ {
			x := gen(top)
			x.tripAt, x.tripBy = e.op.Complete, e.op
		}
	}
	stats["generations_tripped"] += top - 1
	gs := make([]int64, 0, len(gens))
	for g := range gens {
		gs = append(gs, g)
	}
	sort.Slice(gs, func(i, j int) bool { return gs[i] < gs[j] })
	for _, g := range gs {
		x := gens[g]
		if x.tripBy == nil {
			continue
		}
		if n := x.sent.upTo(x.tripAt); n < expected {
			xs := append(x.sent.opsUpTo(x.tripAt, 20), x.tripBy)
			an.add("barrier-early-trip", fmt.Sprintf("barrier %s (expected_processes %d): generation %d observed tripped by %s #%d answered at %s, when only %d distinct processes had sent an arrival at it",
				key, expected, g, x.tripBy.Kind, x.tripBy.ID, secs(x.tripAt), n), collect(xs...))
		}
	}

	// Generations only increase along real time.
	sort.SliceStable(cur, func(i, j int) bool { return cur[i].op.Complete < cur[j].op.Complete })
	prefMax := make([]int, len(cur)+1) // index of the highest generation among the first i answers
	prefMax[0] = -1
	for i := range cur {
		prefMax[i+1] = prefMax[i]
		if prefMax[i] < 0 || cur[i].gen > cur[prefMax[i]].gen {
			prefMax[i+1] = i
		}
	}
	for _, c := range cur {
		n := sort.Search(len(cur), func(i int) bool { return cur[i].op.Complete >= c.op.Invoke })
		if m := prefMax[n]; m >= 0 && cur[m].gen > c.gen {
			p := cur[m]
			an.add("barrier-regressed", fmt.Sprintf("barrier %s: %s #%d sent at %s shows generation %d, after %s #%d had shown %d (answered %s)",
				key, c.op.Kind, c.op.ID, secs(c.op.Invoke), c.gen, p.op.Kind, p.op.ID, p.gen, secs(p.op.Complete)), collect(p.op, c.op))
		}
	}

	for _, o := range ops {
		if o.Outcome != history.OK {
			continue
		}
		at, inv := o.Complete, o.Invoke
		// Waiters released before the trip.
		if o.Kind == history.BarrierWait && o.WaitOutcome == history.WaitTripped {
			x := gen(o.Generation)
			if n := x.sent.upTo(at); n < expected {
				xs := append(x.sent.opsUpTo(at, 20), o)
				an.add("barrier-early-release", fmt.Sprintf("barrier %s (expected_processes %d): wait #%d for generation %d answered TRIPPED at %s, when only %d distinct processes had sent an arrival at it",
					key, expected, o.ID, o.Generation, secs(at), n), collect(xs...))
			}
			if o.B != nil && o.B.Generation <= o.Generation {
				an.add("barrier-inconsistent", fmt.Sprintf("barrier %s: wait #%d for generation %d answered TRIPPED showing generation %d", key, o.ID, o.Generation, o.B.Generation), collect(o))
			}
		}
		if o.Kind == history.BarrierArrive && o.B != nil {
			if o.AllArrived && o.B.Generation <= o.Generation || o.B.Generation < o.Generation {
				an.add("barrier-inconsistent", fmt.Sprintf("barrier %s: arrival #%d at generation %d answered all_arrived=%v showing generation %d",
					key, o.ID, o.Generation, o.AllArrived, o.B.Generation), collect(o))
			}
		}
		// A view: its arrivals counted, none invented, fewer than expected.
		if v := o.B; v != nil {
			x := gen(v.Generation)
			if acked := x.acked.before(inv); v.Arrived < acked {
				xs := append(x.acked.opsUpTo(inv-1, 20), o)
				an.add("barrier-lost-arrival", fmt.Sprintf("barrier %s: %s #%d sent at %s shows %d arrivals at generation %d, but %d distinct arrivals at it had been acknowledged before it was sent",
					key, o.Kind, o.ID, secs(inv), v.Arrived, v.Generation, acked), collect(xs...))
			}
			if sent := x.sent.upTo(at); v.Arrived > sent {
				xs := append(x.sent.opsUpTo(at, 20), o)
				an.add("barrier-phantom", fmt.Sprintf("barrier %s: %s #%d answered at %s shows %d arrivals at generation %d, but only %d distinct processes had sent an arrival at it",
					key, o.Kind, o.ID, secs(at), v.Arrived, v.Generation, sent), collect(xs...))
			}
			if v.Arrived >= expected {
				an.add("barrier-inconsistent", fmt.Sprintf("barrier %s: %s #%d shows %d arrivals at the current generation %d, expected_processes %d (it should have tripped)",
					key, o.Kind, o.ID, v.Arrived, v.Generation, expected), collect(o))
			}
		}
		if o.Kind != history.BarrierParticipants || o.ListedGeneration <= 0 {
			continue
		}
		// A participants read of generation g.
		stats["participant_reads"]++
		g := o.ListedGeneration
		x := gen(g)
		listed := map[string]bool{}
		for _, p := range o.Participants {
			switch {
			case listed[p.Process]:
				an.add("barrier-inconsistent", fmt.Sprintf("barrier %s: participants read #%d of generation %d lists %q twice", key, o.ID, g, p.Process), collect(o))
			case p.Generation != g:
				an.add("barrier-inconsistent", fmt.Sprintf("barrier %s: participants read #%d of generation %d lists %q of generation %d", key, o.ID, g, p.Process, p.Generation), collect(o))
			}
			listed[p.Process] = true
			if t, ok := x.sent.at[p.Process]; !ok || t > at {
				an.add("barrier-phantom", fmt.Sprintf("barrier %s: participants read #%d answered at %s lists %q at generation %d, which sent no arrival at it before that answer",
					key, o.ID, secs(at), p.Process, g), collect(o))
			}
		}
		if int64(len(listed)) > expected {
			an.add("barrier-phantom", fmt.Sprintf("barrier %s: participants read #%d lists %d participants of generation %d, expected_processes %d", key, o.ID, len(listed), g, expected), collect(o))
		}
		if o.Truncated {
			continue
		}
		for p, t := range x.acked.at {
			if t < inv && !listed[p] {
				an.add("barrier-lost-arrival", fmt.Sprintf("barrier %s: the arrival of %q at generation %d was acknowledged (op #%d, answered %s) before participants read #%d was sent (%s), which does not list it",
					key, p, g, x.acked.by[p].ID, secs(t), o.ID, secs(inv)), collect(x.acked.by[p], o))
			}
		}
		if x.tripBy != nil && x.tripAt < inv && int64(len(listed)) < expected {
			an.add("barrier-trip-short", fmt.Sprintf("barrier %s (expected_processes %d): generation %d was observed tripped (%s #%d, answered %s) before participants read #%d was sent, which lists only %d participants of it",
				key, expected, g, x.tripBy.Kind, x.tripBy.ID, secs(x.tripAt), o.ID, len(listed)), collect(x.tripBy, o))
		}
	}
}
