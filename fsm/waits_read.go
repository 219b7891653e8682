package fsm

import (
	"math"
	"strconv"
	"strings"

	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
)

// Reads of wait groups and barriers; each takes the reader's now.

// settledNow is the latest time at which a read may judge a group expired:
// the reader's now, but no later than the newest command applied. Every
// command applies at a now at least that one (the applier never goes
// back), so what a read shows expired stays expired. A reader's clock may
// be ahead of a command already stamped and on its way (a completion
// stamped just before expires_at and applied just after a read at a later
// now): judged at the reader's now, the read said EXPIRED and the
// completion then made the same group COMPLETED.
func (s *state) settledNow(now int64) int64 { return min(now, s.lastNow) }

func (s *state) waitGroupAt(ns, name string, now int64) (wgRec, *Error) {
	now = s.settledNow(now)
	if _, ok := s.getNS(ns); !ok {
		return wgRec{}, namespaceNotFound(ns)
	}
	w, ok := s.getWG(ns, name)
	if !ok {
		return wgRec{}, waitGroupNotFound(ns, name)
	}
	return w.effective(now), nil
}

// GetWaitGroup returns a wait group as of now (EXPIRED once past
// expires_at).
func (f *FSM) GetWaitGroup(ns, name string, now int64) (*pb.WaitGroup, error) {
	s, done := f.read()
	defer done()
	w, err := s.waitGroupAt(ns, name, now)
	if err != nil {
		return nil, err
	}
	return w.view(), nil
}

// ListWaitGroups lists a namespace's wait groups by name.
func (f *FSM) ListWaitGroups(ns string, limit int32, token string, now int64) (Page[*pb.WaitGroup], error) {
	s, done := f.read()
	defer done()
	if _, ok := s.getNS(ns); !ok {
		return Page[*pb.WaitGroup]{}, namespaceNotFound(ns)
	}
	sc := listScope[wgRec]{kind: "wg", tree: s.waitGroups.tree, start: wgRec{ns: ns},
		inScope: func(w wgRec) bool { return w.ns == ns }, keyOf: func(w wgRec) string { return w.name },
		pivot: func(k string) (wgRec, bool) { return wgRec{ns: ns, name: k}, true }, visible: always[wgRec]}
	p, err := sc.page(limit, token)
	if err != nil {
		return Page[*pb.WaitGroup]{}, err
	}
	out := Page[*pb.WaitGroup]{Next: p.Next, Previous: p.Previous}
	now = s.settledNow(now)
	for _, w := range p.Items {
		out.Items = append(out.Items, w.effective(now).view())
	}
	return out, nil
}

// ListWaitGroupCompletedJobs lists a wait group's completed jobs by job_id.
func (f *FSM) ListWaitGroupCompletedJobs(ns, name string, limit int32, token string, now int64) (Page[*pb.WaitGroupJob], error) {
	s, done := f.read()
	defer done()
	if _, err := s.waitGroupAt(ns, name, now); err != nil {
		return Page[*pb.WaitGroupJob]{}, err
	}
	sc := listScope[jobRec]{kind: "job", tree: s.jobs.tree, start: jobRec{ns: ns, wg: name},
		inScope: func(j jobRec) bool { return j.ns == ns && j.wg == name }, keyOf: func(j jobRec) string { return j.id },
		pivot: func(k string) (jobRec, bool) { return jobRec{ns: ns, wg: name, id: k}, true }, visible: always[jobRec]}
	p, err := sc.page(limit, token)
	if err != nil {
		return Page[*pb.WaitGroupJob]{}, err
	}
	out := Page[*pb.WaitGroupJob]{Next: p.Next, Previous: p.Previous}
	for _, j := range p.Items {
		out.Items = append(out.Items, j.view())
	}
	return out, nil
}

func (s *state) barrierAt(ns, name string) (barRec, *Error) {
	if _, ok := s.getNS(ns); !ok {
		return barRec{}, namespaceNotFound(ns)
	}
	b, ok := s.getBar(ns, name)
	if !ok {
		return barRec{}, barrierNotFound(ns, name)
	}
	return b, nil
}

// GetBarrier returns a barrier.
func (f *FSM) GetBarrier(ns, name string) (*pb.Barrier, error) {
	s, done := f.read()
	defer done()
	b, err := s.barrierAt(ns, name)
	if err != nil {
		return nil, err
	}
	return b.view(), nil
}

// ListBarriers lists a namespace's barriers by name.
func (f *FSM) ListBarriers(ns string, limit int32, token string) (Page[*pb.Barrier], error) {
	s, done := f.read()
	defer done()
	if _, ok := s.getNS(ns); !ok {
		return Page[*pb.Barrier]{}, namespaceNotFound(ns)
	}
	sc := listScope[barRec]{kind: "bar", tree: s.barriers.tree, start: barRec{ns: ns},
		inScope: func(b barRec) bool { return b.ns == ns }, keyOf: func(b barRec) string { return b.name },
		pivot: func(k string) (barRec, bool) { return barRec{ns: ns, name: k}, true }, visible: always[barRec]}
	p, err := sc.page(limit, token)
	if err != nil {
		return Page[*pb.Barrier]{}, err
	}
	out := Page[*pb.Barrier]{Next: p.Next, Previous: p.Previous}
	for _, b := range p.Items {
		out.Items = append(out.Items, b.view())
	}
	return out, nil
}

// ListBarrierParticipants lists the arrivals of one generation (0: the
// current one) in arrival order, and says which generation it listed.
// Only the current and the previous generation are kept.
func (f *FSM) ListBarrierParticipants(ns, name string, gen int64, limit int32, token string) (Page[*pb.BarrierParticipant], int64, error) {
	s, done := f.read()
	defer done()
	if gen < 0 {
		return Page[*pb.BarrierParticipant]{}, 0, outOfRange("generation", 0, noMax, "must be 0 (the current one) or >= 1, got %d", gen)
	}
	b, err := s.barrierAt(ns, name)
	if err != nil {
		return Page[*pb.BarrierParticipant]{}, 0, err
	}
	if gen == 0 {
		gen = b.generation
	}
	if gen > b.generation {
		return Page[*pb.BarrierParticipant]{}, 0, GenerationMismatch(b.generation,
			"generation: barrier %q is at generation %d, generation %d has not begun", name, b.generation, gen)
	}
	if gen < b.generation-1 {
		return Page[*pb.BarrierParticipant]{}, 0, GenerationMismatch(b.generation,
			"generation: barrier %q is at generation %d; the participants of generation %d are no longer kept (only the current and the previous generation are)",
			name, b.generation, gen)
	}
	sc := listScope[arrivalRec]{kind: "arr", tree: s.arrivals.tree, start: arrivalRec{ns: ns, bar: name, gen: gen},
		inScope: func(r arrivalRec) bool { return r.ns == ns && r.bar == name && r.gen == gen },
		keyOf:   func(r arrivalRec) string { return strconv.FormatInt(r.seq, 10) },
		pivot: func(k string) (arrivalRec, bool) {
			if k == "" {
				return arrivalRec{ns: ns, bar: name, gen: gen}, true
			}
			seq, err := strconv.ParseInt(strings.TrimSuffix(k, "\x00"), 10, 64)
			if strings.HasSuffix(k, "\x00") && seq < math.MaxInt64 {
				seq++ // "<seq>\x00" is the position just after seq (see page)
			}
			return arrivalRec{ns: ns, bar: name, gen: gen, seq: seq}, err == nil && seq >= 0
		},
		visible: always[arrivalRec]}
	p, perr := sc.page(limit, token)
	if perr != nil {
		return Page[*pb.BarrierParticipant]{}, 0, perr
	}
	out := Page[*pb.BarrierParticipant]{Next: p.Next, Previous: p.Previous}
	for _, r := range p.Items {
		out.Items = append(out.Items, r.view())
	}
	return out, gen, nil
}

// WaitState is what a leader-side waiter needs to decide: whether the
// thing it waits for has happened.
type WaitState struct {
	Err error // why it cannot be waited for (NotFound, a bad generation)
	// Wait groups: the group as of now; Done once COMPLETED or EXPIRED.
	WaitGroup *pb.WaitGroup
	// Barriers: the barrier; Done once its generation passed the one
	// waited for.
	Barrier *pb.Barrier
	Done    bool
}

// WaitGroupWait reads a wait group for a waiter at now.
func (f *FSM) WaitGroupWait(ns, name string, now int64) WaitState {
	s, done := f.read()
	defer done()
	w, err := s.waitGroupAt(ns, name, now)
	if err != nil {
		return WaitState{Err: err}
	}
	return WaitState{WaitGroup: w.view(), Done: w.status != pb.WaitGroupStatus_WAIT_GROUP_STATUS_ACTIVE}
}

// BarrierWait reads a barrier for a waiter of generation gen: done once
// the barrier is past it; a generation that has not begun is an error.
func (f *FSM) BarrierWait(ns, name string, gen int64) WaitState {
	s, done := f.read()
	defer done()
	b, err := s.barrierAt(ns, name)
	if err != nil {
		return WaitState{Err: err}
	}
	if gen > b.generation {
		return WaitState{Err: GenerationMismatch(b.generation,
			"expected_generation: barrier %q is at generation %d, generation %d has not begun", name, b.generation, gen)}
	}
	return WaitState{Barrier: b.view(), Done: b.generation > gen}
}
