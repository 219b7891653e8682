package check

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/grackle-coord/grackle/jepsen/history"
)

const lt = 10 * time.Second // linearizability timeout in tests

// ---- known-bad histories ----

func TestDoubleGrant(t *testing.T) {
	b := newHB(map[string]int64{"s": 1})
	b.lease(1, "A", 0, 1, 300)
	b.lease(2, "B", 0, 1, 300)
	a := b.acq(1, "s", "A", 1, 10, 12, history.Acquired, 5)
	c := b.acq(2, "s", "B", 1, 20, 22, history.Acquired, 7)
	b.h.HealedAt, b.h.ServedAgainAt = ms(30), ms(31)

	an := expect(t, Safety(b.h), Invalid, "double-grant")
	if !hasOps(an, a, c) {
		t.Errorf("safety anomaly lacks the grants:\n%s", dump(Safety(b.h)))
	}
	lin := Linearizability(b.h, lt)
	an = expect(t, lin, Invalid, "not-linearizable")
	if !hasOps(an, a, c) || len(an.Ops) != 2 {
		t.Errorf("want exactly the two grants as sub-history:\n%s", dump(lin))
	}
	expect(t, Fencing(b.h), Valid, "")
}

func TestLostAcknowledgedGrant(t *testing.T) {
	b := newHB(map[string]int64{"s": 2})
	b.lease(1, "A", 0, 1, 300)
	a := b.acq(1, "s", "A", 1, 10, 12, history.Acquired, 5)
	b.get(2, "s", 15, 16, 1, 1)
	b.h.HealedAt = ms(1000)
	rd := b.holders(9, "s", 1010, 1012) // after healing: the hold is gone
	b.h.ServedAgainAt = ms(1012)

	an := expect(t, LostWrites(b.h), Invalid, "lost-grant")
	if !hasOps(an, a, rd) {
		t.Errorf("lost-grant lacks ops:\n%s", dump(LostWrites(b.h)))
	}
	an = expect(t, Linearizability(b.h, lt), Invalid, "not-linearizable")
	if !hasOps(an, a, rd) {
		t.Errorf("linearizability anomaly lacks ops:\n%s", dump(Linearizability(b.h, lt)))
	}
	expect(t, Safety(b.h), Valid, "")
}

func TestLostGrantOlderToken(t *testing.T) {
	b := newHB(map[string]int64{"s": 2})
	b.lease(1, "A", 0, 1, 300)
	b.acq(1, "s", "A", 1, 10, 12, history.Acquired, 5)
	b.acq(1, "s", "A", 1, 20, 22, history.Acquired, 9) // re-acquire: new token
	b.h.HealedAt = ms(1000)
	b.holders(9, "s", 1010, 1012, hold("A", 1, 5))
	b.h.ServedAgainAt = ms(1012)
	an := expect(t, LostWrites(b.h), Invalid, "lost-grant")
	if !strings.Contains(an.Description, "older token 5") {
		t.Errorf("description: %s", an.Description)
	}
}

func TestLostGrantByCount(t *testing.T) {
	b := newHB(map[string]int64{"s": 2})
	b.lease(1, "A", 0, 1, 300)
	b.acq(1, "s", "A", 2, 10, 12, history.Acquired, 5)
	b.h.HealedAt = ms(1000)
	b.get(9, "s", 1010, 1012, 0, 0)
	b.h.ServedAgainAt = ms(1012)
	expect(t, LostWrites(b.h), Invalid, "lost-grant-count")
}

func TestStaleRead(t *testing.T) {
	b := newHB(map[string]int64{"s": 3})
	b.lease(1, "A", 0, 1, 300)
	a := b.acq(1, "s", "A", 2, 10, 12, history.Acquired, 5)
	g := b.get(2, "s", 20, 25, 0, 0)
	lin := Linearizability(b.h, lt)
	an := expect(t, lin, Invalid, "not-linearizable")
	if !hasOps(an, a, g) || len(an.Ops) != 2 {
		t.Errorf("want the acquire and the stale get:\n%s", dump(lin))
	}
	if !strings.Contains(an.Description, "by themselves not linearizable") {
		t.Errorf("window should be self-contained: %s", an.Description)
	}
}

func TestDecreasingFencingToken(t *testing.T) {
	b := newHB(map[string]int64{"s": 1})
	b.lease(1, "A", 0, 1, 300)
	b.lease(2, "B", 0, 1, 300)
	a := b.acq(1, "s", "A", 1, 10, 12, history.Acquired, 10)
	b.rel(1, "s", "A", 20, 21, history.OK)
	c := b.acq(2, "s", "B", 1, 30, 32, history.Acquired, 9)
	an := expect(t, Fencing(b.h), Invalid, "token-order")
	if !hasOps(an, a, c) {
		t.Errorf("token-order lacks ops:\n%s", dump(Fencing(b.h)))
	}
	expect(t, Safety(b.h), Valid, "")
	expect(t, Linearizability(b.h, lt), Valid, "")
}

func TestDuplicateFencingToken(t *testing.T) {
	b := newHB(map[string]int64{"s": 2, "t": 1})
	b.lease(1, "A", 0, 1, 300)
	b.lease(2, "B", 0, 1, 300)
	b.acq(1, "s", "A", 1, 10, 20, history.Acquired, 10)
	b.acq(2, "s", "B", 1, 11, 21, history.Acquired, 10) // concurrent, same token
	b.acq(2, "t", "B", 1, 30, 31, history.Acquired, 10) // same token on another semaphore
	r := Fencing(b.h)
	expect(t, r, Invalid, "duplicate-token")
	expect(t, r, Invalid, "duplicate-token-global")
	expect(t, r, Invalid, "token-order-global")
}

func TestRejectedFencedWriteByCurrentHolder(t *testing.T) {
	b := newHB(map[string]int64{"fen": 1})
	b.lease(1, "A", 0, 1, 5)
	b.lease(2, "B", 0, 1, 5)
	b.acq(2, "fen", "B", 1, 2, 3, history.Acquired, 11)
	hw := b.fence(2, "fen", "B", 4, 11, true)
	b.rel(2, "fen", "B", 5, 6, history.OK)
	a := b.acq(1, "fen", "A", 1, 10, 12, history.Acquired, 10) // a lower token: also a token-order anomaly
	fw := b.fence(1, "fen", "A", 13, 10, false)
	r := Fencing(b.h)
	an := expect(t, r, Invalid, "rejected-current-holder")
	if !hasOps(an, a, fw, hw) {
		t.Errorf("rejected-current-holder lacks ops:\n%s", dump(r))
	}
}

func TestRejectedFencedWriteOfStaleHolderIsFine(t *testing.T) {
	b := newHB(map[string]int64{"fen": 1})
	b.h.Meta["linear_prefix"] = "lin-" // expiring leases: out of porcupine's model
	b.lease(1, "A", 0, 1, 1)           // expires by the client's clock at 1000ms
	b.lease(2, "B", 1100, 1101, 5)
	b.acq(1, "fen", "A", 1, 10, 12, history.Acquired, 10)
	b.fence(1, "fen", "A", 13, 10, true)
	b.acq(2, "fen", "B", 1, 1200, 1210, history.Acquired, 20)
	b.fence(2, "fen", "B", 1211, 20, true)
	b.fence(1, "fen", "A", 1500, 10, false) // stale holder, rightly rejected
	b.rel(1, "fen", "A", 1501, 1502, history.OK)
	b.h.HealedAt, b.h.ServedAgainAt = ms(1600), ms(1601)
	allOK(t, b.h)
}

// ---- known-good histories ----

func TestIndeterminateAcquires(t *testing.T) {
	b := newHB(map[string]int64{"s": 2})
	b.lease(1, "A", 0, 1, 300)
	b.lease(2, "B", 0, 1, 300)
	b.lease(3, "C", 0, 1, 300)
	b.acq(1, "s", "A", 1, 10, 20, history.Acquired, 5)
	b.acq(2, "s", "B", 2, 12, 0, history.Info, 0) // may happen any time later
	b.acq(3, "s", "C", 1, 15, 30, history.Acquired, 6)
	b.get(4, "s", 25, 35, 2, 2)                    // A and C
	b.acq(12, "s", "C", 1, 32, 0, history.Info, 0) // re-acquire, unknown
	b.rel(1, "s", "A", 40, 41, history.OK)
	b.rel(3, "s", "C", 42, 0, history.Info) // release, unknown
	b.get(4, "s", 50, 51, 1, 1)             // C still there (its release had not happened yet)
	b.holders(4, "s", 52, 53, hold("C", 1, 6))
	b.get(4, "s", 60, 61, 0, 0) // now the release happened
	b.get(4, "s", 70, 71, 2, 1) // B's indeterminate acquire happened at last
	b.holders(4, "s", 72, 73, hold("B", 2, 9))
	b.h.HealedAt, b.h.ServedAgainAt = ms(65), ms(71)
	allOK(t, b.h)
}

func TestIndeterminateAcquireNeverHappened(t *testing.T) {
	b := newHB(map[string]int64{"s": 1})
	b.lease(1, "A", 0, 1, 300)
	b.lease(2, "B", 0, 1, 300)
	b.acq(1, "s", "A", 1, 10, 0, history.Info, 0)
	b.get(2, "s", 20, 21, 0, 0)
	b.acq(2, "s", "B", 1, 30, 31, history.Acquired, 8)
	b.holders(2, "s", 40, 41, hold("B", 1, 8))
	b.h.HealedAt, b.h.ServedAgainAt = ms(35), ms(41)
	allOK(t, b.h)
}

func TestExpiredHoldThenAnotherGrant(t *testing.T) {
	b := newHB(map[string]int64{"fen": 1})
	b.h.Meta["linear_prefix"] = "lin-" // expiring leases: out of porcupine's model
	b.lease(1, "A", 0, 2, 1)           // certainly alive until 1000ms
	b.acq(1, "fen", "A", 1, 10, 20, history.Acquired, 3)
	b.fence(1, "fen", "A", 21, 3, true)
	b.lease(2, "B", 900, 905, 3)
	b.acq(2, "fen", "B", 1, 990, 1000, history.Acquired, 9) // answered right at A's conservative expiry
	b.fence(2, "fen", "B", 1001, 9, true)
	b.fence(1, "fen", "A", 1600, 3, false) // A worked past its lease
	b.h.HealedAt, b.h.ServedAgainAt = ms(1700), ms(1705)
	b.holders(9, "fen", 1702, 1705, hold("B", 1, 9))
	allOK(t, b.h)
}

func TestRefreshKeepsHold(t *testing.T) {
	// The same as above with A refreshing: now B's grant overlaps A's hold.
	b := newHB(map[string]int64{"fen": 1})
	b.lease(1, "A", 0, 2, 1)
	b.acq(1, "fen", "A", 1, 10, 20, history.Acquired, 3)
	b.refresh(1, "A", 500, 510, 1, history.OK, "")
	b.lease(2, "B", 900, 905, 3)
	b.acq(2, "fen", "B", 1, 990, 1000, history.Acquired, 9)
	expect(t, Safety(b.h), Invalid, "double-grant")

	// A refresh with a shorter TTL sent after the last answered one may
	// have shortened the lease: then B's grant is fine.
	b = newHB(map[string]int64{"fen": 1})
	b.lease(1, "A", 0, 2, 3)
	b.acq(1, "fen", "A", 1, 10, 20, history.Acquired, 3)
	b.refresh(1, "A", 500, 0, 1, history.Info, "")
	b.lease(2, "B", 900, 905, 3)
	b.acq(2, "fen", "B", 1, 1500, 1510, history.Acquired, 9)
	expect(t, Safety(b.h), Valid, "")
}

func TestReacquireDifferentWeight(t *testing.T) {
	b := newHB(map[string]int64{"s": 3})
	b.lease(1, "A", 0, 1, 300)
	b.lease(2, "B", 0, 1, 300)
	b.acq(1, "s", "A", 1, 10, 12, history.Acquired, 3)
	b.acq(1, "s", "A", 3, 20, 22, history.Acquired, 4)
	b.get(3, "s", 30, 31, 3, 1)
	b.acq(2, "s", "B", 1, 32, 33, history.Unavailable, 0)
	b.acq(1, "s", "A", 2, 40, 42, history.Acquired, 5)
	b.acq(2, "s", "B", 1, 50, 52, history.Acquired, 6)
	b.holders(3, "s", 60, 61, hold("A", 2, 5), hold("B", 1, 6))
	b.h.HealedAt, b.h.ServedAgainAt = ms(55), ms(61)
	allOK(t, b.h)

	// A stale weight is caught.
	b.holders(3, "s", 70, 71, hold("A", 3, 5), hold("B", 1, 6))
	expect(t, Linearizability(b.h, lt), Invalid, "not-linearizable")
}

func TestUnavailableOutcomes(t *testing.T) {
	b := newHB(map[string]int64{"s": 1})
	b.lease(1, "A", 0, 1, 300)
	b.lease(2, "B", 0, 1, 300)
	b.acq(1, "s", "A", 1, 10, 12, history.Acquired, 3)
	b.acq(2, "s", "B", 1, 13, 14, history.Unavailable, 0)
	b.acq(2, "s", "B", 1, 15, 1015, history.TimedOut, 0)
	b.acq(2, "s", "B", 1, 1020, 1021, history.Fail, 0)
	b.get(2, "s", 1030, 1031, 1, 1)
	b.rel(1, "s", "A", 1040, 1041, history.OK)
	b.acq(2, "s", "B", 1, 1050, 1051, history.Acquired, 8)
	b.holders(2, "s", 1060, 1061, hold("B", 1, 8))
	b.h.HealedAt, b.h.ServedAgainAt = ms(1055), ms(1061)
	allOK(t, b.h)
}

func TestRevokeWithoutSemaphoreIsInferred(t *testing.T) {
	b := newHB(map[string]int64{"s": 1})
	b.lease(1, "A", 0, 1, 300)
	b.lease(2, "B", 0, 1, 300)
	b.acq(1, "s", "A", 1, 10, 12, history.Acquired, 3)
	b.revoke(1, "", "A", 20, 21, history.OK)
	b.acq(2, "s", "B", 1, 30, 31, history.Acquired, 5)
	b.holders(2, "s", 40, 41, hold("B", 1, 5))
	b.h.HealedAt, b.h.ServedAgainAt = ms(35), ms(41)
	allOK(t, b.h)
}

func TestIndeterminateReleaseVoidsLaterCertainty(t *testing.T) {
	// Judgment call: a release whose outcome is unknown may take effect at
	// any later time, even after a re-acquire, so the re-acquired hold is
	// never certain.
	b := newHB(map[string]int64{"s": 1})
	b.lease(1, "A", 0, 1, 300)
	b.lease(2, "B", 0, 1, 300)
	b.acq(1, "s", "A", 1, 10, 12, history.Acquired, 3)
	b.rel(1, "s", "A", 20, 0, history.Info)
	b.acq(11, "s", "A", 1, 30, 32, history.Acquired, 4)
	b.acq(2, "s", "B", 1, 40, 42, history.Acquired, 5)
	expect(t, Safety(b.h), Valid, "")
	expect(t, Linearizability(b.h, lt), Valid, "")
	expect(t, Fencing(b.h), Valid, "")
}

func TestLostWritesIgnoresExpiredLease(t *testing.T) {
	b := newHB(map[string]int64{"fen": 1})
	b.lease(1, "A", 0, 1, 2)
	b.acq(1, "fen", "A", 1, 10, 12, history.Acquired, 3)
	b.h.HealedAt = ms(1000)
	b.holders(9, "fen", 1500, 2500) // A's lease may have run out during the read
	b.h.ServedAgainAt = ms(2500)
	expect(t, LostWrites(b.h), Valid, "")
}

func TestLostLease(t *testing.T) {
	b := newHB(map[string]int64{"s": 1})
	b.lease(1, "A", 0, 1, 5)
	b.refresh(1, "A", 1000, 1001, 5, history.Fail, "NotFound: lease ls_A not found")
	b.lease(2, "B", 0, 1, 1)
	b.refresh(2, "B", 1500, 1501, 5, history.Fail, "NotFound: lease expired") // really expired
	b.lease(3, "C", 0, 1, 5)
	b.revoke(3, "", "C", 100, 101, history.OK)
	b.refresh(3, "C", 200, 201, 5, history.Fail, "NotFound: lease") // revoked
	r := LostWrites(b.h)
	an := expect(t, r, Invalid, "lost-lease")
	if len(r.Anomalies) != 1 || !strings.Contains(an.Description, "lease A") {
		t.Errorf("want one lost-lease for A:\n%s", dump(r))
	}
}

func TestLiveness(t *testing.T) {
	h := &history.History{HealedAt: 10 * time.Second, ServedAgainAt: 12 * time.Second}
	expect(t, Liveness(h, 5*time.Second), Valid, "")
	expect(t, Liveness(h, time.Second), Invalid, "served-late")
	h.ServedAgainAt = 0
	expect(t, Liveness(h, 5*time.Second), Invalid, "not-served-again")
}

func TestVerdictOf(t *testing.T) {
	if v := verdictOf([]porcupine.CheckResult{porcupine.Ok, porcupine.Unknown}); v != Unknown {
		t.Errorf("ok+unknown = %s", v)
	}
	if v := verdictOf([]porcupine.CheckResult{porcupine.Illegal, porcupine.Unknown}); v != Invalid {
		t.Errorf("illegal+unknown = %s", v)
	}
	if v := verdictOf([]porcupine.CheckResult{porcupine.Ok}); v != Valid {
		t.Errorf("ok = %s", v)
	}
	if v := Overall([]Result{{Valid: Valid}, {Valid: Unknown, Skipped: true}}); v != Valid {
		t.Errorf("overall with a skipped unknown = %s", v)
	}
}

func TestLinearPrefixScope(t *testing.T) {
	// Expiring leases on fen- semaphores are out of the model's scope.
	b := newHB(map[string]int64{"lin-0": 1, "fen-0": 1})
	b.h.Meta["linear_prefix"] = "lin-"
	b.lease(1, "A", 0, 1, 1)
	b.lease(2, "B", 0, 1, 300)
	b.acq(1, "fen-0", "A", 1, 10, 12, history.Acquired, 3)
	b.acq(2, "fen-0", "B", 1, 1500, 1502, history.Acquired, 4) // A expired
	b.acq(2, "lin-0", "B", 1, 10, 12, history.Acquired, 2)
	r := Linearizability(b.h, lt)
	expect(t, r, Valid, "")
	if r.Stats["partitions"] != 1 {
		t.Errorf("partitions = %d, want 1", r.Stats["partitions"])
	}
	b.h.Meta["linear_prefix"] = ""
	expect(t, Linearizability(b.h, lt), Invalid, "not-linearizable")
}

// longHistory has 150 rounds of acquire/release/get by three leases on
// a 2-permit semaphore; with stale, the get right after the first grant
// of round 75 misses it. It returns that grant's and that get's ids.
func longHistory(stale bool) (*hb, int, int) {
	b := newHB(map[string]int64{"s": 2})
	leases := []string{"A", "B", "C"}
	for i, l := range leases {
		b.lease(i, l, 0, 1, 300)
	}
	tm := 10.0
	holds := map[string]int64{}
	var tok uint64
	var bad, badAcq int
	for round := 0; round < 150; round++ {
		for i, l := range leases {
			if holds[l] == 0 {
				var sum int64
				for _, w := range holds {
					sum += w
				}
				if sum+1 <= 2 {
					tok++
					id := b.acq(i, "s", l, 1, tm, tm+1, history.Acquired, tok)
					holds[l] = 1
					if round == 75 && bad == 0 {
						badAcq = id
					}
				} else {
					b.acq(i, "s", l, 1, tm, tm+1, history.Unavailable, 0)
				}
			} else {
				b.rel(i, "s", l, tm, tm+1, history.OK)
				holds[l] = 0
			}
			tm += 2
			var sum, n int64
			for _, w := range holds {
				sum += w
				if w > 0 {
					n++
				}
			}
			if stale && badAcq != 0 && bad == 0 {
				bad = b.get(5, "s", tm, tm+1, sum-1, n-1) // misses the grant just made
			} else {
				b.get(5, "s", tm, tm+1, sum, n)
			}
			tm += 2
		}
	}
	return b, badAcq, bad
}

// A long history with one stale read in the middle: the reported
// sub-history is small and the visualization is written.
func TestMinimalSubHistory(t *testing.T) {
	b, badAcq, bad := longHistory(true)
	vis := filepath.Join(t.TempDir(), "lin.html")
	r := LinearizabilityWith(b.h, LinOptions{Timeout: lt, VisualizationPath: vis})
	an := expect(t, r, Invalid, "not-linearizable")
	if !hasOps(an, badAcq, bad) || len(an.Ops) > 4 {
		t.Errorf("want a small sub-history with #%d and #%d:\n%s", badAcq, bad, dump(r))
	}
	if fi, err := os.Stat(vis); err != nil || fi.Size() == 0 {
		t.Errorf("visualization not written: %v", err)
	}
}

func TestTimeoutIsUnknown(t *testing.T) {
	b, _, _ := longHistory(false)
	r := LinearizabilityWith(b.h, LinOptions{Timeout: time.Nanosecond, MinimizeTimeout: time.Nanosecond})
	expect(t, r, Unknown, "")
	if r.Stats["partitions_unknown"] != 1 || !strings.Contains(strings.Join(r.Notes, " "), "timed out") {
		t.Errorf("want a timed-out partition noted:\n%s", dump(r))
	}
	if Overall([]Result{r}) != Unknown {
		t.Error("overall should be unknown")
	}
}

// When the whole check times out, a short prefix can still prove the
// violation.
func TestTimeoutButIllegalPrefix(t *testing.T) {
	b, badAcq, bad := longHistory(true)
	r := LinearizabilityWith(b.h, LinOptions{Timeout: time.Nanosecond, MinimizeTimeout: 20 * time.Second})
	an := expect(t, r, Invalid, "not-linearizable")
	if !hasOps(an, badAcq, bad) {
		t.Errorf("want #%d and #%d:\n%s", badAcq, bad, dump(r))
	}
}

// An acquire answered NotFound says the lease is gone: fine after a
// revoke (even an indeterminate one), an anomaly otherwise.
func TestLeaseGone(t *testing.T) {
	b := newHB(map[string]int64{"s": 1})
	b.lease(1, "A", 0, 1, 300)
	b.acq(1, "s", "A", 1, 10, 12, history.Acquired, 3)
	b.revoke(1, "s", "A", 20, 0, history.Info)
	b.acq(11, "s", "A", 1, 30, 31, history.Fail, 0)
	b.h.Ops[len(b.h.Ops)-1].Error, b.h.Ops[len(b.h.Ops)-1].Code = "NotFound: lease A not found", "NotFound"
	b.get(2, "s", 40, 41, 0, 0)
	expect(t, Linearizability(b.h, lt), Valid, "")

	b = newHB(map[string]int64{"s": 1})
	b.lease(1, "A", 0, 1, 300)
	b.acq(1, "s", "A", 1, 10, 12, history.Acquired, 3)
	nf := b.acq(1, "s", "A", 1, 30, 31, history.Fail, 0)
	b.h.Ops[len(b.h.Ops)-1].Error, b.h.Ops[len(b.h.Ops)-1].Code = "NotFound: lease A not found", "NotFound"
	r := Linearizability(b.h, lt)
	an := expect(t, r, Invalid, "not-linearizable")
	if !hasOps(an, nf) {
		t.Errorf("want the NotFound answer in the sub-history:\n%s", dump(r))
	}
}
