package check

import (
	"strings"
	"testing"

	"github.com/grackle-coord/grackle/jepsen/history"
)

// Builders of hand-written lock histories (times in milliseconds, as hb).

func (b *hb) llease(p int, lease string, inv, comp float64, ttl int64) int {
	return b.add(history.Op{Process: p, Kind: history.LockCreateLease, Lease: lease, TTL: ttl}, inv, comp)
}

func (b *hb) lrefresh(p int, lease string, inv, comp float64, ttl int64, outcome string) int {
	return b.add(history.Op{Process: p, Kind: history.LockRefresh, Lease: lease, TTL: ttl, Outcome: outcome}, inv, comp)
}

// lacq records a lock acquire; res is ACQUIRED/UNAVAILABLE/TIMED_OUT, or
// history.Info / history.Fail.
func (b *hb) lacq(p int, lock, lease string, excl bool, inv, comp float64, res string, token uint64) int {
	o := history.Op{Process: p, Kind: history.LockAcquire, Lock: lock, Lease: lease, Exclusive: excl}
	switch res {
	case history.Info, history.Fail:
		o.Outcome = res
	default:
		o.AcquireOutcome = res
		if res == history.Acquired {
			o.Token = token
		} else {
			o.Contention = "PEER"
		}
	}
	return b.add(o, inv, comp)
}

func (b *hb) lrel(p int, lock, lease string, inv, comp float64, outcome string) int {
	return b.add(history.Op{Process: p, Kind: history.LockRelease, Lock: lock, Lease: lease, Outcome: outcome, Released: outcome == ""}, inv, comp)
}

func (b *hb) lrevoke(p int, lease string, inv, comp float64, outcome string) int {
	return b.add(history.Op{Process: p, Kind: history.LockRevoke, Lease: lease, Outcome: outcome}, inv, comp)
}

func (b *hb) getLock(p int, lock string, inv, comp float64, hs ...history.LockHolder) int {
	return b.add(history.Op{Process: p, Kind: history.GetLock, Lock: lock, Locks: []history.LockView{{Name: lock, Holders: hs}}}, inv, comp)
}

func (b *hb) listLocks(p int, prefix string, inv, comp float64, truncated bool, ls ...history.LockView) int {
	return b.add(history.Op{Process: p, Kind: history.ListLocks, Lock: prefix, Locks: ls, Truncated: truncated}, inv, comp)
}

func (b *hb) lwaiters(p int, lock string, inv, comp float64, ws ...history.LockWaiter) int {
	return b.add(history.Op{Process: p, Kind: history.LockWaiters, Lock: lock, Waiters: ws}, inv, comp)
}

func lh(lease string, excl bool, token uint64) history.LockHolder {
	return history.LockHolder{Lease: lease, Exclusive: excl, Token: token}
}

func lv(name string, hs ...history.LockHolder) history.LockView {
	return history.LockView{Name: name, Holders: hs}
}

func lw(lease string, excl bool) history.LockWaiter {
	return history.LockWaiter{Lease: lease, Exclusive: excl, Position: 1}
}

const (
	excl   = true
	shared = false
)

// lockOK asserts that every lock checker passes.
func lockOK(t *testing.T, h *history.History) {
	t.Helper()
	for _, r := range []Result{LockSafety(h), LockFencing(h), LockLost(h), LockFIFO(h)} {
		if r.Valid != Valid {
			t.Errorf("%s: %s, want ok\n%s", r.Name, r.Valid, dump(r))
		}
	}
}

// ---- lock-safety ----

func TestLockConflictSameLock(t *testing.T) {
	b := newHB(nil)
	b.llease(1, "A", 0, 1, 300)
	b.llease(2, "B", 0, 1, 300)
	a := b.lacq(1, "r", "A", excl, 10, 12, history.Acquired, 5)
	c := b.lacq(2, "r", "B", shared, 20, 22, history.Acquired, 7) // the fault lock-conflict-grant
	r := LockSafety(b.h)
	an := expect(t, r, Invalid, "lock-conflict")
	if !hasOps(an, a, c) {
		t.Errorf("anomaly lacks the grants:\n%s", dump(r))
	}
	for _, o := range an.Ops {
		if o.Kind != history.LockAcquire && o.Kind != history.LockCreateLease {
			t.Errorf("anomaly op not shown as recorded: %s", FormatOp(o))
		}
	}
	if !strings.Contains(FormatOp(an.Ops[len(an.Ops)-1]), "lock_acquire ns/r lease=B shared") {
		t.Errorf("FormatOp: %s", FormatOp(an.Ops[len(an.Ops)-1]))
	}
	// Neither the semaphore checkers nor the other lock checkers mind.
	expect(t, Safety(b.h), Valid, "")
	expect(t, Fencing(b.h), Valid, "")
	expect(t, LockFencing(b.h), Valid, "")
}

func TestLockConflictAncestorAndDescendant(t *testing.T) {
	b := newHB(nil)
	b.llease(1, "A", 0, 1, 300)
	b.llease(2, "B", 0, 1, 300)
	b.llease(3, "C", 0, 1, 300)
	b.lacq(1, "r/a", "A", shared, 10, 12, history.Acquired, 5)
	b.lacq(2, "r", "B", excl, 20, 22, history.Acquired, 7)       // ancestor of a shared hold
	b.lacq(3, "r/a/x", "C", shared, 30, 32, history.Acquired, 9) // descendant of an exclusive one
	r := LockSafety(b.h)
	expect(t, r, Invalid, "lock-conflict")
	if n := r.Stats["anomaly:lock-conflict"]; n != 2 {
		t.Errorf("%d conflicts, want 2 (A-B, B-C; A-C are both shared)\n%s", n, dump(r))
	}
}

func TestLockNoConflict(t *testing.T) {
	b := newHB(nil)
	b.llease(1, "A", 0, 1, 300)
	b.llease(2, "B", 0, 1, 300)
	b.lacq(1, "r", "A", shared, 10, 12, history.Acquired, 5)
	b.lacq(2, "r/a", "B", shared, 13, 15, history.Acquired, 6) // shared under shared: fine
	expect(t, LockSafety(b.h), Valid, "")
	b.lacq(1, "r/a/x", "A", excl, 16, 18, history.Acquired, 7) // exclusive under B's shared r/a
	expect(t, LockSafety(b.h), Invalid, "lock-conflict")

	b = newHB(nil)
	b.llease(1, "A", 0, 1, 300)
	b.llease(2, "B", 0, 1, 300)
	b.lacq(1, "r/a", "A", excl, 10, 12, history.Acquired, 5)
	b.lacq(2, "r/b", "B", excl, 13, 15, history.Acquired, 6)   // a sibling
	b.lacq(2, "r/ab", "B", excl, 16, 18, history.Acquired, 7)  // "r/a" is no ancestor of "r/ab"
	b.lacq(1, "r/a/x", "A", excl, 19, 20, history.Acquired, 8) // the same lease never conflicts
	b.lacq(1, "r", "A", excl, 21, 22, history.Info, 0)         // not certain
	b.lacq(2, "r", "B", shared, 23, 24, history.TimedOut, 0)
	b.h.HealedAt, b.h.ServedAgainAt = ms(30), ms(31)
	lockOK(t, b.h)
	allOK(t, b.h)
}

func TestLockHandOffs(t *testing.T) {
	b := newHB(nil)
	b.llease(1, "A", 0, 1, 300)
	b.llease(2, "B", 0, 1, 300)
	b.llease(3, "C", 0, 1, 1) // certainly alive until 1000ms
	b.lacq(1, "r", "A", excl, 10, 12, history.Acquired, 5)
	b.lrel(1, "r", "A", 20, 40, "")                         // release: certainty ends at its invoke
	b.lacq(2, "r", "B", excl, 21, 25, history.Acquired, 9)  // granted by the release, answered first
	b.lrel(2, "r", "B", 50, 0, history.Info)                // indeterminate release
	b.lacq(3, "r", "C", excl, 55, 60, history.Acquired, 12) // it did happen
	// C's lease runs out under it; A takes r/a after C's certain expiry.
	b.lacq(1, "r/a", "A", excl, 990, 1000, history.Acquired, 20)
	lockOK(t, b.h)
}

func TestLockDowngrade(t *testing.T) {
	good := func(bAnswered float64) *history.History {
		b := newHB(nil)
		b.llease(1, "A", 0, 1, 300)
		b.llease(2, "B", 0, 1, 300)
		b.lacq(1, "r", "A", excl, 10, 12, history.Acquired, 5)
		b.lacq(2, "r", "B", shared, 15, bAnswered, history.Acquired, 8) // waited for the downgrade
		b.lacq(1, "r", "A", shared, 20, 30, history.Acquired, 8)        // downgrade: B granted in its commit
		return b.h
	}
	lockOK(t, good(25)) // B answered before A's downgrade answer, after it was sent
	// B answered before A asked to downgrade: A was certainly exclusive.
	expect(t, LockSafety(good(19)), Invalid, "lock-conflict")
}

func TestLockUpgrade(t *testing.T) {
	h := func(relAt float64) *history.History {
		b := newHB(nil)
		b.llease(1, "A", 0, 1, 300)
		b.llease(2, "B", 0, 1, 300)
		b.lacq(1, "r", "A", shared, 10, 12, history.Acquired, 5)
		b.lacq(2, "r", "B", shared, 13, 14, history.Acquired, 6)
		b.lacq(1, "r", "A", excl, 20, 50, history.Acquired, 9) // upgrade, granted by B's release
		b.lrel(2, "r", "B", relAt, relAt+2, "")
		return b.h
	}
	lockOK(t, h(40))
	// B's release sent only after the upgrade was answered.
	expect(t, LockSafety(h(60)), Invalid, "lock-conflict")

	// An upgrade that times out leaves the shared hold; a shared grant
	// beside it is fine.
	b := newHB(nil)
	b.llease(1, "A", 0, 1, 300)
	b.llease(2, "B", 0, 1, 300)
	b.lacq(1, "r", "A", shared, 10, 12, history.Acquired, 5)
	b.lacq(2, "r", "B", shared, 13, 14, history.Acquired, 6)
	b.lacq(1, "r", "A", excl, 20, 1020, history.TimedOut, 0)
	b.add(history.Op{Process: 1, Kind: history.LockAcquire, Lock: "r", Lease: "A", Exclusive: excl, Outcome: history.Fail,
		Code: "FailedPrecondition", Reason: "UPGRADE_CONFLICT"}, 30, 31)
	b.getLock(3, "r", 1030, 1031, lh("A", shared, 5), lh("B", shared, 6))
	lockOK(t, b.h)
}

func TestLockConflictRead(t *testing.T) {
	b := newHB(nil)
	b.llease(1, "A", 0, 1, 300)
	b.llease(2, "B", 0, 1, 300)
	b.lacq(1, "r", "A", excl, 10, 0, history.Info, 0)
	b.lacq(2, "r/a", "B", shared, 10, 0, history.Info, 0)
	rd := b.listLocks(3, "r", 20, 21, false, lv("r", lh("A", excl, 5)), lv("r/a", lh("B", shared, 6)))
	r := LockSafety(b.h)
	an := expect(t, r, Invalid, "lock-conflict-read")
	if !hasOps(an, rd) {
		t.Errorf("anomaly lacks the read:\n%s", dump(r))
	}
	// Shared holders side by side are fine.
	b = newHB(nil)
	b.llease(1, "A", 0, 1, 300)
	b.llease(2, "B", 0, 1, 300)
	b.lacq(1, "r", "A", shared, 10, 0, history.Info, 0)
	b.lacq(2, "r", "B", shared, 10, 0, history.Info, 0)
	b.getLock(3, "r", 20, 21, lh("A", shared, 5), lh("B", shared, 5))
	lockOK(t, b.h)
}

func TestLockConflictOneToken(t *testing.T) {
	b := newHB(nil)
	b.llease(1, "A", 0, 1, 300)
	b.llease(2, "B", 0, 1, 300)
	b.llease(3, "C", 0, 1, 300)
	b.lacq(1, "r", "A", shared, 10, 30, history.Acquired, 8) // one commit granting shared waiters: fine
	b.lacq(2, "r", "B", shared, 11, 31, history.Acquired, 8)
	expect(t, LockSafety(b.h), Valid, "")
	b.lacq(3, "r/a", "C", excl, 12, 32, history.Acquired, 8) // but not an exclusive one beside them
	r := LockSafety(b.h)
	expect(t, r, Invalid, "lock-conflict-token")
}

// ---- lock-fencing ----

func TestLockTokenOrder(t *testing.T) {
	b := newHB(nil)
	b.llease(1, "A", 0, 1, 300)
	b.llease(2, "B", 0, 1, 300)
	a := b.lacq(1, "r", "A", excl, 10, 12, history.Acquired, 10)
	b.lrel(1, "r", "A", 20, 21, "")
	c := b.lacq(2, "r", "B", excl, 30, 32, history.Acquired, 9)
	r := LockFencing(b.h)
	an := expect(t, r, Invalid, "lock-token-order")
	if !hasOps(an, a, c) {
		t.Errorf("anomaly lacks the grants:\n%s", dump(r))
	}
	expect(t, LockSafety(b.h), Valid, "")
}

func TestLockTokenOrderGlobal(t *testing.T) {
	b := newHB(map[string]int64{"s": 1})
	b.llease(1, "A", 0, 1, 300)
	b.lease(2, "S", 0, 1, 300)
	b.lacq(1, "r", "A", excl, 10, 12, history.Acquired, 10)
	b.acq(2, "s", "S", 1, 20, 22, history.Acquired, 7) // a semaphore grant after it, smaller token
	b.lacq(1, "q", "A", excl, 30, 32, history.Acquired, 8)
	r := LockFencing(b.h)
	expect(t, r, Invalid, "lock-token-order-global")
	if n := r.Stats["anomaly:lock-token-order-global"]; n != 2 {
		t.Errorf("%d global anomalies, want 2\n%s", n, dump(r))
	}
	expect(t, Fencing(b.h), Valid, "") // one semaphore grant: nothing for it
}

func TestLockTokensConcurrentAndMissing(t *testing.T) {
	b := newHB(nil)
	b.llease(1, "A", 0, 1, 300)
	b.llease(2, "B", 0, 1, 300)
	b.lacq(1, "r", "A", shared, 10, 20, history.Acquired, 10)
	b.lacq(2, "r", "B", shared, 11, 21, history.Acquired, 9) // concurrent: any order
	b.lacq(1, "r", "A", shared, 25, 26, history.Acquired, 11)
	b.lacq(2, "r", "B", shared, 25, 27, history.Acquired, 11) // one commit
	expect(t, LockFencing(b.h), Valid, "")
	b.lacq(2, "r/a", "B", shared, 30, 31, history.Acquired, 0)
	expect(t, LockFencing(b.h), Invalid, "lock-missing-token")
}

// ---- lock-lost ----

func TestLostLockGrant(t *testing.T) {
	b := newHB(nil)
	b.llease(1, "A", 0, 1, 300)
	a := b.lacq(1, "r/a", "A", excl, 10, 12, history.Acquired, 5)
	b.h.HealedAt = ms(1000)
	rd := b.getLock(9, "r/a", 1010, 1012) // unlocked: the grant is lost
	r := LockLost(b.h)
	an := expect(t, r, Invalid, "lost-lock-grant")
	if !hasOps(an, a, rd) || !strings.Contains(an.Description, "after healing") {
		t.Errorf("anomaly:\n%s", dump(r))
	}

	for name, read := range map[string]func(b *hb){
		"list without it":    func(b *hb) { b.listLocks(9, "", 1010, 1012, false, lv("r/b", lh("B", excl, 3))) },
		"list of the prefix": func(b *hb) { b.listLocks(9, "r", 1010, 1012, false) },
		"older token":        func(b *hb) { b.getLock(9, "r/a", 1010, 1012, lh("A", excl, 4)) },
		"shared":             func(b *hb) { b.getLock(9, "r/a", 1010, 1012, lh("A", shared, 5)) },
		"during the run":     func(b *hb) { b.getLock(9, "r/a", 500, 501) },
	} {
		b := newHB(nil)
		b.llease(1, "A", 0, 1, 300)
		b.llease(2, "B", 0, 1, 300)
		b.lacq(1, "r/a", "A", excl, 10, 12, history.Acquired, 5)
		b.lacq(2, "r/b", "B", excl, 10, 0, history.Info, 0)
		b.h.HealedAt = ms(1000)
		read(b)
		if r := LockLost(b.h); r.Valid != Invalid {
			t.Errorf("%s: %s, want anomaly\n%s", name, r.Valid, dump(r))
		}
	}
}

func TestLockReadsAgree(t *testing.T) {
	b := newHB(nil)
	b.llease(1, "A", 0, 1, 300)
	b.llease(2, "B", 0, 1, 300)
	b.llease(3, "C", 0, 1, 1) // expires by 1000ms at the latest... or later
	b.lacq(1, "r/a", "A", excl, 10, 12, history.Acquired, 5)
	b.lacq(2, "r/b", "B", shared, 10, 12, history.Acquired, 6)
	b.lacq(3, "q", "C", excl, 10, 12, history.Acquired, 7)
	b.lrel(2, "r/b", "B", 20, 0, history.Info) // may or may not have happened
	b.getLock(9, "r/b", 30, 31)                // it had
	b.getLock(9, "r/a", 30, 31, lh("A", excl, 5))
	b.listLocks(9, "r/a", 32, 33, false, lv("r/a", lh("A", excl, 5))) // a prefix that does not cover r/b
	b.listLocks(9, "", 34, 35, true, lv("q", lh("C", excl, 7)))       // truncated after q: r/a unknown
	b.lacq(1, "r/a", "A", shared, 40, 0, history.Info, 0)             // a downgrade, maybe
	b.getLock(9, "r/a", 50, 51, lh("A", shared, 44))                  // it happened, with a new token
	b.h.HealedAt = ms(1500)                                           // C's lease may have run out
	b.listLocks(9, "", 1510, 1511, false, lv("r/a", lh("A", shared, 44)))
	b.h.ServedAgainAt = ms(1511)
	lockOK(t, b.h)
}

func TestLostLockRelease(t *testing.T) {
	b := newHB(nil)
	b.llease(1, "A", 0, 1, 300)
	a := b.lacq(1, "r", "A", excl, 10, 12, history.Acquired, 5)
	rel := b.lrel(1, "r", "A", 20, 22, "")
	b.h.HealedAt = ms(100)
	rd := b.getLock(9, "r", 110, 111, lh("A", excl, 5))
	r := LockLost(b.h)
	an := expect(t, r, Invalid, "lost-lock-release")
	if !hasOps(an, a, rel, rd) {
		t.Errorf("anomaly:\n%s", dump(r))
	}

	// A revoke of the lease.
	b = newHB(nil)
	b.llease(1, "A", 0, 1, 300)
	b.lacq(1, "r", "A", shared, 10, 12, history.Acquired, 5)
	b.lrevoke(1, "A", 20, 22, "")
	b.listLocks(9, "", 110, 111, false, lv("r", lh("A", shared, 5)))
	expect(t, LockLost(b.h), Invalid, "lost-lock-release")

	// A re-acquire that may have come after the release explains it.
	b = newHB(nil)
	b.llease(1, "A", 0, 1, 300)
	b.lacq(1, "r", "A", excl, 10, 12, history.Acquired, 5)
	b.lrel(1, "r", "A", 20, 30, "")
	b.lacq(1, "r", "A", excl, 25, 0, history.Info, 0)
	b.getLock(9, "r", 110, 111, lh("A", excl, 27))
	lockOK(t, b.h)
}

func TestPhantomLockHolder(t *testing.T) {
	b := newHB(nil)
	b.llease(1, "A", 0, 1, 300)
	b.lacq(1, "r", "A", excl, 10, 12, history.Acquired, 5)
	b.lacq(1, "r/a", "A", excl, 13, 14, history.TimedOut, 0)
	b.getLock(9, "r/a", 20, 21, lh("A", excl, 6)) // never granted
	expect(t, LockLost(b.h), Invalid, "phantom-lock-holder")

	b = newHB(nil)
	b.llease(1, "A", 0, 1, 300)
	b.lacq(1, "r", "A", excl, 10, 12, history.Acquired, 5)
	b.getLock(9, "r", 20, 21, lh("A", excl, 6)) // a token nobody got
	expect(t, LockLost(b.h), Invalid, "phantom-lock-holder")
}

// ---- lock-fifo ----

// fifo builds: A (lease LA) asks r/a exclusively at 10 and waits; read W
// [20, 22] shows it waiting; B (lease LB) asks bLock at bInv and is granted
// token bTok; A is granted token 60 at 100.
func fifo(bLock string, bExcl bool, bInv float64, bTok uint64, extra func(b *hb)) (*hb, [3]int) {
	b := newHB(nil)
	b.llease(1, "LA", 0, 1, 300)
	b.llease(2, "LB", 0, 1, 300)
	b.llease(3, "LH", 0, 1, 300)
	b.lacq(3, "r/a", "LH", shared, 2, 3, history.Acquired, 4) // what A waits for
	if extra != nil {
		extra(b)
	}
	a := b.lacq(1, "r/a", "LA", excl, 10, 100, history.Acquired, 60)
	w := b.lwaiters(4, "r/a", 20, 22, lw("LA", excl))
	c := b.lacq(2, bLock, "LB", bExcl, bInv, bInv+2, history.Acquired, bTok)
	b.lrel(2, bLock, "LB", 70, 72, "")
	b.lrel(3, "r/a", "LH", 80, 82, "")
	return b, [3]int{a, w, c}
}

func TestLockFIFOOvertake(t *testing.T) {
	for _, c := range []struct {
		lock string
		excl bool
	}{{"r/a", shared}, {"r", shared}, {"r/a/x", excl}, {"r/a/x", shared}} {
		b, ids := fifo(c.lock, c.excl, 30, 50, nil)
		r := LockFIFO(b.h)
		an := expect(t, r, Invalid, "lock-fifo-overtake")
		if !hasOps(an, ids[0], ids[1], ids[2]) {
			t.Errorf("%s: anomaly lacks ops:\n%s", c.lock, dump(r))
		}
	}
	// B's lease held r before, released for certain before B was sent.
	b, _ := fifo("r", shared, 30, 50, func(b *hb) {
		b.lacq(2, "r", "LB", shared, 4, 5, history.Acquired, 5)
		b.lrel(2, "r", "LB", 6, 7, "")
	})
	expect(t, LockFIFO(b.h), Invalid, "lock-fifo-overtake")
}

func TestLockFIFOLegal(t *testing.T) {
	cases := map[string]*hb{}
	only := func(b *hb, _ [3]int) *hb { return b }
	cases["B granted after A"] = only(fifo("r/a", shared, 30, 61, nil))
	cases["B sent before the read answered"] = only(fifo("r/a", shared, 21, 50, nil))
	cases["no conflict: a sibling"] = only(fifo("r/b", excl, 30, 50, nil))
	cases["no conflict: r/ab"] = only(fifo("r/ab", excl, 30, 50, nil))
	cases["re-acquire or downgrade of a hold"] = only(fifo("r", shared, 30, 50, func(b *hb) {
		b.lacq(2, "r", "LB", shared, 4, 5, history.Acquired, 5)
	}))
	cases["upgrade"] = only(fifo("r/a", excl, 30, 50, func(b *hb) {
		b.lacq(2, "r/a", "LB", shared, 4, 5, history.Acquired, 5)
	}))
	cases["B's lease may hold an ancestor"] = only(fifo("r/a/x", shared, 30, 50, func(b *hb) {
		b.lacq(2, "r", "LB", excl, 4, 0, history.Info, 0)
	}))
	cases["release not acknowledged"] = only(fifo("r", shared, 30, 50, func(b *hb) {
		b.lacq(2, "r", "LB", shared, 4, 5, history.Acquired, 5)
		b.lrel(2, "r", "LB", 6, 0, history.Info)
	}))
	cases["another request of A's lease may be the waiter"] = only(fifo("r/a", shared, 30, 50, func(b *hb) {
		b.lacq(1, "r/a", "LA", excl, 1, 0, history.Info, 0)
	}))
	cases["read shows another mode"] = func() *hb {
		b, _ := fifo("r/a", shared, 30, 50, nil)
		for i := range b.h.Ops {
			if b.h.Ops[i].Kind == history.LockWaiters {
				b.h.Ops[i].Waiters[0].Exclusive = false
			}
		}
		return b
	}()
	cases["A never granted"] = func() *hb {
		b, ids := fifo("r/a", shared, 30, 50, nil)
		for i := range b.h.Ops {
			if b.h.Ops[i].ID == ids[0] {
				b.h.Ops[i].AcquireOutcome, b.h.Ops[i].Token = history.TimedOut, 0
			}
		}
		return b
	}()
	for name, b := range cases {
		if r := LockFIFO(b.h); r.Valid != Valid {
			t.Errorf("%s: %s, want ok\n%s", name, r.Valid, dump(r))
		}
	}
}
