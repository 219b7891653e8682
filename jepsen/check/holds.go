package check

import (
	"sort"
	"time"

	"github.com/grackle-coord/grackle/jepsen/history"
)

// This file is the conservative clock of docs/FAULTS.md, Safety with time, shared by
// Safety, Fencing and LostWrites.
//
// A lease is certainly alive from the completion of a successful
// create_lease/refresh r (the latest one whose answer arrived) until
// r.Invoke + TTL: the leader applied r at or after it was sent, so it set
// expires_at >= r.Invoke + TTL. Any other create/refresh of the lease that
// is not known to precede r (still open, or answered after r was sent, or
// sent after r) may have been applied after r with a shorter TTL, so the
// expiry is the minimum of Invoke + TTL over those too. Failed ones changed
// nothing and are ignored.
//
// A hold of lease L on semaphore S is certainly held from the completion
// of an ACQUIRED answer g until the earliest of: the invoke of any release
// of L on S or revoke of L (any outcome) that is not known to precede g,
// and the lease's conservative expiry. A later ACQUIRED answer of L on S
// replaces the weight from its completion; an acquire of L on S that is
// ACQUIRED or indeterminate and not known to precede the current grant may
// have set another weight, so the certain weight is the minimum of those.

// span is an interval [s, e) of run time.
type span struct {
	s, e  time.Duration
	w     int64       // certainly-held weight (hold spans)
	grant *history.Op // the ACQUIRED answer the hold rests on (hold spans)
	basis *history.Op // the create/refresh that made the lease alive
}

type leaseSem struct {
	acquires []*history.Op
	releases []*history.Op
}

type leaseOps struct {
	renew   []*history.Op // create_lease (with its id) and refresh
	revokes []*history.Op
	bySem   map[string]*leaseSem
}

// index is the history grouped by lease and semaphore, with the
// conservative alive and hold spans computed lazily.
type index struct {
	h      *history.History
	ops    []history.Op // sorted by invoke
	leases map[string]*leaseOps
	alive  map[string][]span
	holds  map[string]map[string][]span // sem -> lease -> spans
	sems   []string                     // every semaphore key seen, sorted
	semNS  map[string][2]string         // key -> namespace, name
	on     map[string][]string          // sem -> leases that acquired it (cache)
}

func newIndex(h *history.History) *index {
	ix := &index{h: h, ops: h.Sorted(), leases: map[string]*leaseOps{}, alive: map[string][]span{},
		holds: map[string]map[string][]span{}, semNS: map[string][2]string{}, on: map[string][]string{}}
	lo := func(id string) *leaseOps {
		l := ix.leases[id]
		if l == nil {
			l = &leaseOps{bySem: map[string]*leaseSem{}}
			ix.leases[id] = l
		}
		return l
	}
	ls := func(l *leaseOps, sem string) *leaseSem {
		s := l.bySem[sem]
		if s == nil {
			s = &leaseSem{}
			l.bySem[sem] = s
		}
		return s
	}
	for i := range ix.ops {
		o := &ix.ops[i]
		if o.Semaphore != "" {
			k := opSem(o)
			if _, ok := ix.semNS[k]; !ok {
				ix.semNS[k] = [2]string{o.Namespace, o.Semaphore}
				ix.sems = append(ix.sems, k)
			}
		}
		if o.Lease == "" {
			continue
		}
		switch o.Kind {
		case history.CreateLease, history.Refresh:
			lo(o.Lease).renew = append(lo(o.Lease).renew, o)
		case history.Revoke:
			lo(o.Lease).revokes = append(lo(o.Lease).revokes, o)
		case history.Acquire:
			s := ls(lo(o.Lease), opSem(o))
			s.acquires = append(s.acquires, o)
		case history.Release:
			s := ls(lo(o.Lease), opSem(o))
			s.releases = append(s.releases, o)
		}
	}
	sort.Strings(ix.sems)
	return ix
}

// aliveSpans returns when the lease was certainly alive.
func (ix *index) aliveSpans(lease string) []span {
	if sp, ok := ix.alive[lease]; ok {
		return sp
	}
	var sp []span
	if l := ix.leases[lease]; l != nil {
		sp = aliveSpans(l.renew)
	}
	ix.alive[lease] = sp
	return sp
}

func aliveSpans(renew []*history.Op) []span {
	var oks, cands []*history.Op
	for _, r := range renew {
		switch r.Outcome {
		case history.OK:
			oks = append(oks, r)
			cands = append(cands, r)
		case history.Info:
			cands = append(cands, r)
		}
	}
	sort.SliceStable(oks, func(i, j int) bool {
		if oks[i].Complete != oks[j].Complete {
			return oks[i].Complete < oks[j].Complete
		}
		return oks[i].Invoke < oks[j].Invoke
	})
	// cands are sorted by invoke already (the index sorts ops).
	var out []span
	for i, r := range oks {
		c := end(r)
		next := inf
		if i+1 < len(oks) {
			next = end(oks[i+1])
		}
		exp := r.Invoke + ttlOf(r)
		for _, m := range cands {
			if m == r || m.Invoke > c || precedes(m, r) {
				continue
			}
			exp = min(exp, m.Invoke+ttlOf(m))
		}
		for _, m := range cands {
			if m.Invoke <= c || m.Invoke >= next {
				continue
			}
			if exp <= m.Invoke {
				break
			}
			exp = min(exp, m.Invoke+ttlOf(m))
		}
		e := min(exp, next)
		if e > c {
			out = appendSpan(out, span{s: c, e: e, basis: r})
		}
	}
	return out
}

// appendSpan appends, merging with the previous span when they touch and
// carry the same weight and grant.
func appendSpan(out []span, s span) []span {
	if n := len(out); n > 0 && out[n-1].e == s.s && out[n-1].w == s.w && out[n-1].grant == s.grant && out[n-1].basis == s.basis {
		out[n-1].e = s.e
		return out
	}
	return append(out, s)
}

// holdSpans returns when lease certainly held sem, and with what weight.
func (ix *index) holdSpans(sem, lease string) []span {
	m := ix.holds[sem]
	if m == nil {
		m = map[string][]span{}
		ix.holds[sem] = m
	}
	if sp, ok := m[lease]; ok {
		return sp
	}
	var sp []span
	if l := ix.leases[lease]; l != nil {
		if s := l.bySem[sem]; s != nil {
			sp = intersect(weightSpans(s, l.revokes), ix.aliveSpans(lease))
		}
	}
	m[lease] = sp
	return sp
}

// weightSpans is the certainly-held weight of one lease on one semaphore,
// ignoring expiry.
func weightSpans(s *leaseSem, revokes []*history.Op) []span {
	var grants, muts []*history.Op
	for _, a := range s.acquires {
		switch {
		case granted(a):
			grants = append(grants, a)
			muts = append(muts, a)
		case a.Outcome == history.Info:
			muts = append(muts, a)
		}
	}
	if len(grants) == 0 {
		return nil
	}
	muts = append(muts, s.releases...)
	muts = append(muts, revokes...)
	sort.SliceStable(muts, func(i, j int) bool { return muts[i].Invoke < muts[j].Invoke })
	sort.SliceStable(grants, func(i, j int) bool {
		if grants[i].Complete != grants[j].Complete {
			return grants[i].Complete < grants[j].Complete
		}
		return grants[i].Invoke < grants[j].Invoke
	})
	wOf := func(m *history.Op) int64 {
		if m.Kind == history.Acquire {
			return m.Weight
		}
		return 0
	}
	var out []span
	for j, g := range grants {
		c := end(g)
		next := inf
		if j+1 < len(grants) {
			next = end(grants[j+1])
		}
		w := g.Weight
		for _, m := range muts {
			if m == g || m.Invoke > c || precedes(m, g) {
				continue
			}
			w = min(w, wOf(m))
		}
		cur := c
		for _, m := range muts {
			if m.Invoke <= c || m.Invoke >= next {
				continue
			}
			if mw := wOf(m); mw < w {
				if w > 0 && m.Invoke > cur {
					out = appendSpan(out, span{s: cur, e: m.Invoke, w: w, grant: g})
				}
				cur, w = m.Invoke, mw
			}
		}
		if w > 0 && next > cur {
			out = appendSpan(out, span{s: cur, e: next, w: w, grant: g})
		}
	}
	return out
}

// intersect clips weight spans to alive spans.
func intersect(ws, alive []span) []span {
	var out []span
	i, j := 0, 0
	for i < len(ws) && j < len(alive) {
		s := max(ws[i].s, alive[j].s)
		e := min(ws[i].e, alive[j].e)
		if s < e {
			out = append(out, span{s: s, e: e, w: ws[i].w, grant: ws[i].grant, basis: alive[j].basis})
		}
		if ws[i].e < alive[j].e {
			i++
		} else {
			j++
		}
	}
	return out
}

// holdAt returns the certain hold of lease on sem at time t, if any.
func (ix *index) holdAt(sem, lease string, t time.Duration) (span, bool) {
	return spanAt(ix.holdSpans(sem, lease), t)
}

// spanAt finds the span containing t.
func spanAt(sp []span, t time.Duration) (span, bool) {
	i := sort.Search(len(sp), func(i int) bool { return sp[i].e > t })
	if i < len(sp) && sp[i].s <= t {
		return sp[i], true
	}
	return span{}, false
}

// leasesOn lists the leases that ever acquired sem, sorted.
func (ix *index) leasesOn(sem string) []string {
	if out, ok := ix.on[sem]; ok {
		return out
	}
	out := []string{}
	for id, l := range ix.leases {
		if s := l.bySem[sem]; s != nil && len(s.acquires) > 0 {
			out = append(out, id)
		}
	}
	sort.Strings(out)
	ix.on[sem] = out
	return out
}
