package check

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/grackle-coord/grackle/jepsen/history"
)

// The lock checkers (docs/API.md, Locks; rules in DESIGN.md, Locks):
//
//   - LockSafety: no two conflicting holds are certainly held at once
//     (different leases, at least one exclusive, names equal or one an
//     ancestor of the other), by the conservative clock of holds.go; no
//     read shows conflicting holders; no one grant entry (one token) gives
//     conflicting holds.
//   - LockFencing: per lock, a grant invoked after another completed has
//     a larger token; the same across locks and semaphores.
//   - LockLost: reads agree with acknowledged grants, releases and revokes.
//   - LockFIFO: no grant overtakes a conflicting request that was known
//     to wait before it was sent (conflict-FIFO).
//
// The lock workload is checked with the semaphore machinery of holds.go:
// its ops are translated into semaphore ops (lock -> semaphore of the same
// name, exclusive -> weight 2, shared -> weight 1), so "certainly held"
// means exactly what it means for semaphores. A shared request of an
// exclusive holder (a downgrade) lowers the weight as a smaller re-acquire
// does; an upgrade raises it only from its ACQUIRED answer; an upgrade that
// ends without the grant leaves the shared hold, as a semaphore increase
// that is not granted leaves the hold.

// Checker names of the lock checkers.
const (
	NameLockSafety  = "lock-safety"
	NameLockFencing = "lock-fencing"
	NameLockLost    = "lock-lost"
	NameLockFIFO    = "lock-fifo"
)

// Weights of the translation.
const (
	wShared    = 1
	wExclusive = 2
)

var lockToSem = map[string]string{
	history.LockCreateLease: history.CreateLease,
	history.LockRefresh:     history.Refresh,
	history.LockRevoke:      history.Revoke,
	history.LockAcquire:     history.Acquire,
	history.LockRelease:     history.Release,
}

var semToLock = map[string]string{}

func init() {
	for l, s := range lockToSem {
		semToLock[s] = l
	}
}

// lockIx is the lock workload of a history: the holds.go index over its
// translated ops, and the lock reads.
type lockIx struct {
	*index
	reads   []*history.Op // get_lock, list_locks (any outcome), by invoke
	waiters []*history.Op // lock_waiters (any outcome), by invoke
	grants  []*history.Op // translated ACQUIRED answers, by invoke
	n       int           // lock ops seen
}

func newLockIx(h *history.History) *lockIx {
	sh := &history.History{Seed: h.Seed, Nodes: h.Nodes, Duration: h.Duration, Meta: h.Meta, HealedAt: h.HealedAt}
	lx := &lockIx{}
	var reads []history.Op
	for _, o := range h.Ops {
		if k, ok := lockToSem[o.Kind]; ok {
			lx.n++
			t := o
			t.Kind = k
			t.Semaphore = ""
			t.Weight = 0
			if o.Kind == history.LockAcquire || o.Kind == history.LockRelease {
				t.Semaphore = o.Lock
			}
			if o.Kind == history.LockAcquire {
				t.Weight = wShared
				if o.Exclusive {
					t.Weight = wExclusive
				}
			}
			sh.Ops = append(sh.Ops, t)
			continue
		}
		switch o.Kind {
		case history.GetLock, history.ListLocks, history.LockWaiters:
			lx.n++
			reads = append(reads, o)
		}
	}
	lx.index = newIndex(sh)
	sort.SliceStable(reads, func(i, j int) bool { return reads[i].Invoke < reads[j].Invoke })
	for i := range reads {
		if reads[i].Kind == history.LockWaiters {
			lx.waiters = append(lx.waiters, &reads[i])
		} else {
			lx.reads = append(lx.reads, &reads[i])
		}
	}
	for i := range lx.ops {
		if granted(&lx.ops[i]) {
			lx.grants = append(lx.grants, &lx.ops[i])
		}
	}
	return lx
}

// orig is a translated op as the history recorded it.
func orig(o history.Op) history.Op {
	if k, ok := semToLock[o.Kind]; ok && (o.Lock != "" || o.Kind != history.Acquire && o.Kind != history.Release) {
		o.Kind = k
		o.Semaphore = ""
		o.Weight = 0
	}
	return o
}

// lockOps collects ops for an anomaly, as recorded.
func lockOps(ops ...*history.Op) []history.Op {
	out := collect(ops...)
	for i := range out {
		out[i] = orig(out[i])
	}
	return out
}

// related: equal names, or one an ancestor of the other ("a" covers "a/b",
// not "ab").
func related(a, b string) bool {
	return a == b || strings.HasPrefix(b, a+"/") || strings.HasPrefix(a, b+"/")
}

// conflicting: the conflict relation of AcquireLock rule 1.
func conflicting(ns1, name1, lease1 string, excl1 bool, ns2, name2, lease2 string, excl2 bool) bool {
	return lease1 != lease2 && ns1 == ns2 && (excl1 || excl2) && related(name1, name2)
}

func modeOf(w int64) string {
	if w >= wExclusive {
		return "exclusive"
	}
	return "shared"
}

func modeName(excl bool) string {
	if excl {
		return "exclusive"
	}
	return "shared"
}

func lockKey(ns, name string) string { return semKey(ns, name) }

// skipNoLocks ends a lock checker on a history without lock operations:
// it holds trivially there (as Access does in a plain run), so the
// verdict is ok, with a note, rather than skipped.
func skipNoLocks(r *Result, lx *lockIx) bool {
	if lx.n > 0 {
		return false
	}
	r.Valid = Valid
	r.Notes = append(r.Notes, "no lock operations in this history")
	return true
}

// ---- LockSafety ----

// LockSafety checks that no two conflicting holds were certainly held at
// once, that no read listed conflicting holders, and that no token was
// given to two conflicting grants.
func LockSafety(h *history.History) Result { return lockSafety(h, newLockIx(h), 0) }

func lockSafety(h *history.History, lx *lockIx, maxAnoms int) Result {
	t0 := time.Now()
	r := Result{Name: NameLockSafety, Stats: map[string]int64{}}
	if skipNoLocks(&r, lx) {
		return r
	}
	an := newAnomalies(maxAnoms)

	// Certain holds over time.
	type hold struct {
		ns, name, lease string
		sp              span
	}
	var holds []hold
	held := map[*history.Op]bool{}
	for _, key := range lx.sems {
		nsn := lx.semNS[key]
		r.Stats["locks"]++
		for _, lease := range lx.leasesOn(key) {
			for _, sp := range lx.holdSpans(key, lease) {
				if !held[sp.grant] {
					held[sp.grant] = true
					r.Stats["grants_certainly_held"]++
				}
				holds = append(holds, hold{nsn[0], nsn[1], lease, sp})
			}
		}
	}
	r.Stats["grants"] = int64(len(lx.grants))
	type event struct {
		t   time.Duration
		add bool
		i   int
	}
	evs := make([]event, 0, 2*len(holds))
	for i, x := range holds {
		evs = append(evs, event{x.sp.s, true, i}, event{x.sp.e, false, i})
	}
	// Half-open spans: at equal times ends go first.
	sort.SliceStable(evs, func(i, j int) bool {
		if evs[i].t != evs[j].t {
			return evs[i].t < evs[j].t
		}
		return !evs[i].add && evs[j].add
	})
	active := map[int]bool{}
	reported := map[[2]*history.Op]bool{}
	for _, e := range evs {
		if !e.add {
			delete(active, e.i)
			continue
		}
		x := holds[e.i]
		for j := range active {
			y := holds[j]
			if !conflicting(x.ns, x.name, x.lease, x.sp.w >= wExclusive, y.ns, y.name, y.lease, y.sp.w >= wExclusive) {
				continue
			}
			k := [2]*history.Op{y.sp.grant, x.sp.grant}
			if reported[k] {
				continue
			}
			reported[k] = true
			from, to := max(x.sp.s, y.sp.s), min(x.sp.e, y.sp.e)
			desc := func(z hold) string {
				return fmt.Sprintf("lease %s %s on %s certainly from %s to %s (grant #%d, token %d; lease alive by #%d sent at %s ttl %ds)",
					z.lease, modeOf(z.sp.w), lockKey(z.ns, z.name), secs(z.sp.s), secs(z.sp.e), z.sp.grant.ID, z.sp.grant.Token,
					z.sp.basis.ID, secs(z.sp.basis.Invoke), z.sp.basis.TTL)
			}
			an.add("lock-conflict", fmt.Sprintf("conflicting holds at once from %s to %s: %s; %s", secs(from), secs(to), desc(y), desc(x)),
				lockOps(y.sp.grant, y.sp.basis, x.sp.grant, x.sp.basis))
		}
		active[e.i] = true
	}

	// Reads that show conflicting holders.
	for _, rd := range lx.reads {
		if rd.Outcome != history.OK {
			continue
		}
		type hv struct {
			name string
			h    history.LockHolder
		}
		var all []hv
		for _, l := range rd.Locks {
			for _, x := range l.Holders {
				all = append(all, hv{l.Name, x})
			}
			r.Stats["holders_read"] += int64(len(l.Holders))
		}
	pairs:
		for i := range all {
			for j := i + 1; j < len(all); j++ {
				a, b := all[i], all[j]
				if conflicting(rd.Namespace, a.name, a.h.Lease, a.h.Exclusive, rd.Namespace, b.name, b.h.Lease, b.h.Exclusive) {
					an.add("lock-conflict-read", fmt.Sprintf("read #%d shows lease %s %s on %s (token %d) and lease %s %s on %s (token %d) at once",
						rd.ID, a.h.Lease, modeName(a.h.Exclusive), a.name, a.h.Token, b.h.Lease, modeName(b.h.Exclusive), b.name, b.h.Token),
						[]history.Op{*rd})
					break pairs
				}
			}
		}
	}

	// One token (one granting entry) given to conflicting grants: both
	// holds exist after that entry.
	byTok := map[uint64][]*history.Op{}
	for _, g := range lx.grants {
		if g.Token != 0 {
			byTok[g.Token] = append(byTok[g.Token], g)
		}
	}
	toks := make([]uint64, 0, len(byTok))
	for t := range byTok {
		toks = append(toks, t)
	}
	sort.Slice(toks, func(i, j int) bool { return toks[i] < toks[j] })
	for _, t := range toks {
		gs := byTok[t]
		for i := range gs {
			for j := i + 1; j < len(gs); j++ {
				a, b := gs[i], gs[j]
				if conflicting(a.Namespace, a.Lock, a.Lease, a.Exclusive, b.Namespace, b.Lock, b.Lease, b.Exclusive) {
					an.add("lock-conflict-token", fmt.Sprintf("token %d granted lease %s %s on %s (#%d) and lease %s %s on %s (#%d): one entry gave conflicting holds",
						t, a.Lease, modeName(a.Exclusive), a.Lock, a.ID, b.Lease, modeName(b.Exclusive), b.Lock, b.ID), lockOps(a, b))
				}
			}
		}
	}
	an.fill(&r)
	r.Elapsed = time.Since(t0)
	return r
}

// ---- LockFencing ----

// LockFencing checks the locks' fencing tokens: per lock, a grant invoked
// after another grant completed carries a larger token (lock-token-order);
// the same between grants on different locks, or a lock and a semaphore
// (lock-token-order-global: the token is the Raft index of the granting
// entry, cluster-wide); every grant has a token (lock-missing-token).
func LockFencing(h *history.History) Result { return lockFencing(h, newLockIx(h), 0) }

func lockFencing(h *history.History, lx *lockIx, maxAnoms int) Result {
	t0 := time.Now()
	r := Result{Name: NameLockFencing, Stats: map[string]int64{}}
	if skipNoLocks(&r, lx) {
		return r
	}
	an := newAnomalies(maxAnoms)
	byLock := map[string][]*history.Op{}
	isLock := map[*history.Op]bool{}
	var all []*history.Op
	for _, g := range lx.grants {
		r.Stats["grants"]++
		if g.Token == 0 {
			an.add("lock-missing-token", fmt.Sprintf("ACQUIRED answer #%d on lock %s has no fencing token", g.ID, opSem(g)), lockOps(g))
			continue
		}
		byLock[opSem(g)] = append(byLock[opSem(g)], g)
		isLock[g] = true
		all = append(all, g)
	}
	for _, key := range lx.sems {
		orderedTokens(byLock[key], func(a, b *history.Op) {
			an.add("lock-token-order", fmt.Sprintf("on lock %s, grant #%d (lease %s, %s) got token %d, but grant #%d (lease %s, %s) had completed at %s, before it was sent at %s, with token %d",
				key, b.ID, b.Lease, modeName(b.Exclusive), b.Token, a.ID, a.Lease, modeName(a.Exclusive), secs(a.Complete), secs(b.Invoke), a.Token), lockOps(a, b))
		})
	}
	// Across objects, with the semaphores' grants.
	ops := h.Sorted()
	for i := range ops {
		if granted(&ops[i]) && ops[i].Token != 0 {
			all = append(all, &ops[i])
		}
	}
	name := func(o *history.Op) string {
		if isLock[o] {
			return "lock " + opSem(o)
		}
		return "semaphore " + opSem(o)
	}
	orderedTokens(all, func(a, b *history.Op) {
		if (!isLock[a] && !isLock[b]) || (isLock[a] == isLock[b] && opSem(a) == opSem(b)) {
			return // the semaphore checker's, or the per-lock pass's
		}
		an.add("lock-token-order-global", fmt.Sprintf("grant #%d on %s (lease %s) got token %d, but grant #%d on %s (lease %s) had completed at %s, before it was sent at %s, with token %d",
			b.ID, name(b), b.Lease, b.Token, a.ID, name(a), a.Lease, secs(a.Complete), secs(b.Invoke), a.Token), lockOps(a, b))
	})
	an.fill(&r)
	r.Elapsed = time.Since(t0)
	return r
}

// orderedTokens calls bad(a, b) for every grant b whose token is not above
// the largest token a of the grants completed before b was invoked.
func orderedTokens(grants []*history.Op, bad func(a, b *history.Op)) {
	byEnd := append([]*history.Op(nil), grants...)
	sort.SliceStable(byEnd, func(i, j int) bool { return end(byEnd[i]) < end(byEnd[j]) })
	byInv := append([]*history.Op(nil), grants...)
	sort.SliceStable(byInv, func(i, j int) bool { return byInv[i].Invoke < byInv[j].Invoke })
	var best *history.Op
	k := 0
	for _, b := range byInv {
		for ; k < len(byEnd) && end(byEnd[k]) < b.Invoke; k++ {
			if best == nil || byEnd[k].Token > best.Token {
				best = byEnd[k]
			}
		}
		if best != nil && b.Token <= best.Token {
			bad(best, b)
		}
	}
}
