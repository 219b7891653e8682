package check

import (
	"fmt"
	"time"

	"github.com/grackle-coord/grackle/jepsen/history"
)

// LockFIFO checks conflict-FIFO (AcquireLock rule 2: a request is granted
// only when it conflicts with no holder and with no earlier request still
// waiting). It flags "lock-fifo-overtake": grants A and B (both answered
// ACQUIRED) where
//
//  1. A was known to wait before B was sent: an answered ListLockWaiters
//     read W of A's lock listed A's lease in A's mode, A is the only
//     acquire of that lease on that lock whose interval meets W's (so the
//     waiter listed is A; any other, even a failed or superseded one,
//     makes W no evidence), and B was invoked after W's answer;
//  2. A and B conflict (different leases, at least one exclusive, names
//     equal or one an ancestor of the other);
//  3. B was granted before A: B's token is smaller than A's (the token is
//     the Raft index of the granting entry);
//  4. B is not a request the contract grants at once or at the head of the
//     queue: B's lease may not hold any lock related to B's or A's name
//     when B is decided. "May hold": an acquire G of that lock by B's
//     lease, other than B, answered ACQUIRED or indeterminate and sent
//     before B's answer, unless an acknowledged release of that lock by
//     the lease, or revoke of the lease, was sent after G completed and
//     answered before B was sent. This leaves out re-acquires and
//     downgrades (granted at once), upgrades (which wait at the head of
//     the queue) and any grant a holder might get for what it already
//     covers, whatever the lease's expiry (which the client cannot time).
//
// Why it is sound: W's listing puts A in the queue of the node that
// answered it, before W's answer, so before B was sent. A waiter never
// moves to another leader's queue (a leader change ends it Unavailable;
// a forwarded call is never re-sent once carried), so A was granted by
// the leader that queued it, in that leader's term. B's granting entry
// lies before A's in the log, so in that same term (an entry of a later
// term lies after A's, one of an earlier term cannot commit once A's
// leader was elected), decided by that leader after B arrived, hence
// while A waited in its queue (A's grant comes later). By rule 2 and
// condition 4, B had to wait. Reading A's queue from a deposed leader
// changes nothing: a deposed leader cannot grant A afterwards.
func LockFIFO(h *history.History) Result { return lockFIFO(h, newLockIx(h), 0) }

func lockFIFO(h *history.History, lx *lockIx, maxAnoms int) Result {
	t0 := time.Now()
	r := Result{Name: NameLockFIFO, Stats: map[string]int64{}}
	if skipNoLocks(&r, lx) {
		return r
	}
	an := newAnomalies(maxAnoms)

	// A (a translated acquire) -> the waiters read that first showed it
	// waiting.
	known := map[*history.Op]*history.Op{}
	for _, w := range lx.waiters {
		if w.Outcome != history.OK {
			continue
		}
		r.Stats["waiters_reads"]++
		key := lockKey(w.Namespace, w.Lock)
		for _, wt := range w.Waiters {
			r.Stats["waiters_seen"]++
			l := lx.leases[wt.Lease]
			if l == nil || l.bySem[key] == nil {
				r.Stats["waiters_unexplained"]++
				continue
			}
			var a *history.Op
			n := 0
			for _, x := range l.bySem[key].acquires {
				if x.Invoke < end(w) && end(x) > w.Invoke {
					a, n = x, n+1
				}
			}
			want := int64(wShared)
			if wt.Exclusive {
				want = wExclusive
			}
			if n != 1 || a.Weight != want {
				r.Stats["waiters_ambiguous"]++
				continue
			}
			if !granted(a) {
				continue
			}
			if k, ok := known[a]; !ok || end(w) < end(k) {
				known[a] = w
			}
		}
	}
	r.Stats["waiting_then_granted"] = int64(len(known))

	for _, a := range lx.grants {
		w, ok := known[a]
		if !ok || a.Token == 0 {
			continue
		}
		for _, b := range lx.grants {
			if b.Invoke <= end(w) || b.Token == 0 || b.Token >= a.Token ||
				!conflicting(a.Namespace, a.Lock, a.Lease, a.Exclusive, b.Namespace, b.Lock, b.Lease, b.Exclusive) {
				continue
			}
			r.Stats["overtakes_considered"]++
			if g := lx.mayHold(b, a); g != nil {
				r.Stats["overtakes_exempt"]++
				continue
			}
			an.add("lock-fifo-overtake", fmt.Sprintf("lease %s's %s request #%d on %s was seen waiting by read #%d (answered at %s); lease %s's conflicting %s request #%d on %s, sent after that at %s, was granted token %d before it (token %d)",
				a.Lease, modeName(a.Exclusive), a.ID, opSem(a), w.ID, secs(end(w)), b.Lease, modeName(b.Exclusive), b.ID, opSem(b), secs(b.Invoke), b.Token, a.Token),
				lockOps(a, w, b))
		}
	}
	an.fill(&r)
	r.Elapsed = time.Since(t0)
	return r
}

// mayHold returns an acquire by b's lease of a lock related to b's or a's
// name that may still have held when b was decided (condition 4 of
// LockFIFO), or nil.
func (lx *lockIx) mayHold(b, a *history.Op) *history.Op {
	l := lx.leases[b.Lease]
	if l == nil {
		return nil
	}
	for _, key := range lx.sems {
		nsn := lx.semNS[key]
		if nsn[0] != b.Namespace || !related(nsn[1], b.Lock) && !related(nsn[1], a.Lock) {
			continue
		}
		s := l.bySem[key]
		if s == nil {
			continue
		}
		for _, g := range s.acquires {
			if g == b || g.Invoke >= end(b) || !(granted(g) || g.Outcome == history.Info) {
				continue
			}
			ended := false
			for _, m := range append(append([]*history.Op(nil), s.releases...), l.revokes...) {
				if m.Outcome == history.OK && precedes(g, m) && end(m) < b.Invoke {
					ended = true
					break
				}
			}
			if !ended {
				return g
			}
		}
	}
	return nil
}
