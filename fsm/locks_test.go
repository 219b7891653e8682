package fsm

import (
	"fmt"
	"math/rand"
	"os"
	"testing"
	"time"

	fsmpb "github.com/grackle-coord/grackle/proto/grackle/fsm/v1"
	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
)

const (
	llA = "ll_aaaaaaaaaaaaaaaaaaaa"
	llB = "ll_bbbbbbbbbbbbbbbbbbbb"
	llC = "ll_cccccccccccccccccccc"
)

func lockGrant(ns, name, lease string, excl bool) *fsmpb.LockGrant {
	return &fsmpb.LockGrant{NamespaceName: ns, LockName: name, LeaseId: lease, Exclusive: excl}
}

func cLock(ns, name, lease string, excl bool) *fsmpb.Command {
	return &fsmpb.Command{Op: &fsmpb.Command_AcquireLock{AcquireLock: &fsmpb.AcquireLock{Grant: lockGrant(ns, name, lease, excl)}}}
}

func cLockQ(ns, name, lease string, excl bool) *fsmpb.Command {
	c := cLock(ns, name, lease, excl)
	c.GetAcquireLock().Queued = true
	return c
}

func cUnlock(ns, name, lease string) *fsmpb.Command {
	return &fsmpb.Command{Op: &fsmpb.Command_ReleaseLock{ReleaseLock: &fsmpb.ReleaseLock{NamespaceName: ns, LockName: name, LeaseId: lease}}}
}

func cLockLease(ns, id string, md map[string]string) *fsmpb.Command {
	return &fsmpb.Command{Op: &fsmpb.Command_CreateLease{CreateLease: &fsmpb.CreateLease{NamespaceName: ns, LeaseId: id, ProcessId: "p-" + id[3:5], TtlSeconds: 60, Metadata: md}}}
}

func lockSetup(t testing.TB) *harness {
	h := newHarness(t)
	h.ok(cNS("ns"))
	for _, l := range []string{llA, llB, llC} {
		h.ok(cLockLease("ns", l, map[string]string{"host": l[3:5]}))
	}
	return h
}

func TestLockApplyRules(t *testing.T) {
	h := lockSetup(t)
	r := h.ok(cLock("ns", "a/b", llA, true))
	if !r.Acquired || r.LockHolder.FencingToken != r.Index || r.Lock.State != pb.LockState_LOCK_STATE_EXCLUSIVE_LOCKED {
		t.Fatalf("first grant: %+v", r)
	}
	// A queued request is not granted even when free; a conflicting one is
	// refused with its reason; the same lease never conflicts.
	if r := h.ok(cLockQ("ns", "z", llB, true)); r.Acquired || r.LockReason != pb.ContentionReason_CONTENTION_REASON_QUEUE {
		t.Fatalf("queued: %+v", r)
	}
	if r := h.ok(cLock("ns", "a", llB, false)); r.Acquired || r.LockReason != pb.ContentionReason_CONTENTION_REASON_DESCENDANT ||
		len(r.BlockingLocks) != 1 || r.BlockingLocks[0] != "a/b" {
		t.Fatalf("above an exclusive descendant: %+v", r)
	}
	if r := h.ok(cLock("ns", "a", llA, false)); !r.Acquired {
		t.Fatal("the same lease conflicted with itself")
	}
	// Downgrade frees (Freed names the lock); a queued re-acquire in the
	// same mode is granted anyway.
	if r := h.ok(cLockQ("ns", "a/b", llA, false)); !r.Acquired || len(r.FreedLocks) != 1 {
		t.Fatalf("downgrade: %+v", r)
	}
	if r := h.ok(cLockQ("ns", "a/b", llA, false)); !r.Acquired {
		t.Fatal("re-acquire in the same mode while queued")
	}
	if r := h.ok(cLock("ns", "a/b", llB, false)); !r.Acquired {
		t.Fatal("shared with shared")
	}
	// Upgrade with a peer: not granted, the shared hold stays.
	if r := h.ok(cLock("ns", "a/b", llA, true)); r.Acquired || r.LockReason != pb.ContentionReason_CONTENTION_REASON_PEER {
		t.Fatalf("upgrade with a peer: %+v", r)
	}
	h.ok(cUnlock("ns", "a/b", llB))
	if r := h.ok(cLock("ns", "a/b", llA, true)); !r.Acquired || !r.LockHolder.Exclusive {
		t.Fatalf("upgrade alone: %+v", r)
	}
	// Bad input changes nothing.
	for _, name := range []string{"a//b", "/a", "a/", "é"} {
		h.fails(cLock("ns", name, llC, true), CodeInvalidArgument, "lock_name")
	}
	h.fails(cLock("ns", "q", "ls_aaaaaaaaaaaaaaaaaaaa", true), CodeInvalidArgument, "lease_id")
	h.fails(cLock("ns", "q", "ll_dddddddddddddddddddd", true), CodeNotFound, "lock lease")
}

// A command made only of lock grants is a known command, also inside a
// packed batch (a server that took it for an unknown op would stop).
func TestLockGrantsOnlyCommandInBatch(t *testing.T) {
	h := lockSetup(t)
	inner, err := Encode(&fsmpb.Command{Now: h.now, LockGrants: []*fsmpb.LockGrant{lockGrant("ns", "x", llA, true), lockGrant("ns", "x", llB, true), lockGrant("ns", "y", llB, false)}})
	if err != nil {
		t.Fatal(err)
	}
	r := h.ok(&fsmpb.Command{Op: &fsmpb.Command_Batch{Batch: &fsmpb.Batch{Commands: [][]byte{inner}}}})
	gs := r.Batch[0].LockGrants
	// The second conflicts with the first (granted); the third does not
	// conflict with the failed second (shared y vs exclusive x).
	if len(gs) != 3 || !gs[0].Granted || gs[1].Granted || !gs[2].Granted {
		t.Fatalf("lock grants in a batch: %+v", gs)
	}
}

// After a grant that does not apply, later grants in the same command that
// conflict with it are skipped: no later request overtakes it.
func TestLockGrantsKeepConflictFIFO(t *testing.T) {
	h := lockSetup(t)
	h.ok(cLock("ns", "k", llA, false))
	r := h.ok(&fsmpb.Command{LockGrants: []*fsmpb.LockGrant{lockGrant("ns", "k", llB, true), lockGrant("ns", "k/x", llC, false)}})
	if r.LockGrants[0].Granted || r.LockGrants[1].Granted {
		t.Fatalf("a later conflicting grant overtook a failed one: %+v", r.LockGrants)
	}
}

func TestLockSnapshotRoundTrip(t *testing.T) {
	h := lockSetup(t)
	h.ok(cLock("ns", "a", llA, false))
	h.ok(cLock("ns", "a", llB, false))
	h.ok(cLock("ns", "b/c/d", llC, true))
	h.ok(cLease("ns", "ls_aaaaaaaaaaaaaaaaaaaa", "p", 60))
	g := New(Options{TempDir: t.TempDir()})
	b := snapshotBytes(t, h.f)
	if err := restoreBytes(g, b); err != nil {
		t.Fatal(err)
	}
	if err := g.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
	l, _ := g.GetLock("ns", "a", h.now)
	if l.State != pb.LockState_LOCK_STATE_SHARED_LOCKED || len(l.Holders) != 2 || l.Holders[0].LeaseId != llA {
		t.Fatalf("restored lock: %v", l)
	}
	ll, err := g.GetLockLease("ns", llA, h.now)
	if err != nil || ll.Metadata["host"] != "aa" {
		t.Fatalf("restored lock lease: %v %v", ll, err)
	}
	if string(snapshotBytes(t, g)) != string(b) {
		t.Fatal("the restored state writes different bytes")
	}
	// A conflict after restore is still refused (derived counts rebuilt).
	h2 := &harness{t: t, f: g, now: h.now, idx: h.idx, check: true}
	if r := h2.ok(cLock("ns", "b", llA, false)); r.Acquired {
		t.Fatal("restored state lost the descendant's exclusive hold")
	}
}

// A snapshot written by the server before locks (format 2) restores.
func TestRestoreFormat2Snapshot(t *testing.T) {
	b, err := os.ReadFile("testdata/snapshot-format2.db")
	if err != nil {
		t.Fatal(err)
	}
	g := New(Options{TempDir: t.TempDir()})
	if err := restoreBytes(g, b); err != nil {
		t.Fatalf("format 2: %v", err)
	}
	if err := g.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
	sem, err := g.GetSemaphore("ns1", "s1", 0)
	if err != nil || sem.ActiveHolds != 5 || sem.ActiveHoldersCount != 2 {
		t.Fatalf("format 2 semaphore: %v %v", sem, err)
	}
	if g.Limits().MaxHoldersPerLock != DefaultLimits().MaxHoldersPerLock {
		t.Fatal("lock limits of a format-2 snapshot are not the defaults")
	}
}

// Tampered lock records are refused with an error naming the record.
func TestRestoreRefusesConflictingLockHolds(t *testing.T) {
	h := lockSetup(t)
	h.ok(cLock("ns", "a", llA, true))
	h.ok(cLock("ns", "b", llB, true))
	// Forge: give B's hold the name "a" (both exclusive on one lock). The
	// records are rewritten through the codec, as a crafted file would be.
	s := h.f.st
	var forged *lockHold
	s.lockHolds.Scan(func(x *lockHold) bool {
		if x.name == "b" {
			forged = x
		}
		return true
	})
	s.dropLockHold(forged, h.now)
	forged.name = "a"
	s.putLockHold(forged, lockRec{ns: "ns", name: "a", lockedAt: h.now, lastActivity: h.now})
	b := snapshotBytes(t, h.f)
	if err := restoreBytes(New(Options{TempDir: t.TempDir()}), b); err == nil {
		t.Fatal("a snapshot with two exclusive holds of one lock restored")
	}
}

// Deciding a conflict costs O(depth), not a scan: the leader's decision
// (LockConflict) and an acquire and release applied, in a namespace
// holding 100 locks or 1,000,000 under one ancestor.
func BenchmarkLockAmong(b *testing.B) {
	for _, n := range []int{100, 1_000_000} {
		h := newHarness(b)
		h.check = false
		lim := DefaultLimits()
		lim.MaxLocksPerNamespace = 2 * 1_000_000 // the million and the probes
		h.ok(cLimits(lim))
		h.ok(cNS("ns"))
		h.ok(cLockLease("ns", llA, nil))
		h.ok(cLockLease("ns", llB, nil))
		for i := 0; i < n; i++ {
			h.ok(cLock("ns", fmt.Sprintf("jobs/%07d", i), llA, false))
		}
		b.Run(fmt.Sprintf("decide/%d", n), func(b *testing.B) {
			// An exclusive request above them all: refused by the count of
			// holds below "jobs", without looking at them.
			for i := 0; i < b.N; i++ {
				if r, _ := h.f.LockConflict("ns", "jobs", llB, true, nil, false); r != pb.ContentionReason_CONTENTION_REASON_DESCENDANT {
					b.Fatal(r)
				}
			}
		})
		b.Run(fmt.Sprintf("apply/%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				h.ok(cLock("ns", "jobs/x", llB, false))
				h.ok(cUnlock("ns", "jobs/x", llB))
			}
		})
	}
}

// genLockLog is a random log of lock commands (valid and not): lock
// leases created, refreshed, revoked and expired, acquires queued or not,
// releases, deletes, and commands of lock grants, on names of three
// depths in two namespaces.
func genLockLog(seed int64, n int) []*fsmpb.Command {
	r := rand.New(rand.NewSource(seed))
	names := []string{"a", "a/b", "a/b/c", "a/d", "x", "x/y", "a//b"}
	leases := []string{llA, llB, llC, "ll_dddddddddddddddddddd", "ls_aaaaaaaaaaaaaaaaaaaa"}
	nss := []string{"n1", "n2"}
	log := []*fsmpb.Command{cNS("n1"), cNS("n2")}
	for len(log) < n {
		ns, name, lease := nss[r.Intn(2)], names[r.Intn(len(names))], leases[r.Intn(len(leases))]
		excl := r.Intn(2) == 0
		var c *fsmpb.Command
		switch k := r.Intn(20); {
		case k < 3:
			c = cLockLease(ns, lease, map[string]string{"k": fmt.Sprint(r.Intn(3))})
			c.GetCreateLease().TtlSeconds = int64(1 + r.Intn(5))
		case k < 9:
			c = cLock(ns, name, lease, excl)
			c.GetAcquireLock().Queued = r.Intn(4) == 0
		case k < 12:
			c = cUnlock(ns, name, lease)
		case k < 13:
			c = &fsmpb.Command{Op: &fsmpb.Command_DeleteLock{DeleteLock: &fsmpb.DeleteLock{NamespaceName: ns, LockName: name}}}
		case k < 15:
			var gs []*fsmpb.LockGrant
			for i := 0; i < 1+r.Intn(4); i++ {
				gs = append(gs, lockGrant(ns, names[r.Intn(len(names))], leases[r.Intn(len(leases))], r.Intn(2) == 0))
			}
			c = &fsmpb.Command{LockGrants: gs}
		case k < 16:
			c = cRefresh(ns, lease, int64(1+r.Intn(5)))
		case k < 17:
			c = cRevoke(ns, lease)
		case k < 18:
			c = cExpire(0)
		case k < 19:
			c = cExtend(int64(r.Intn(2000)) * int64(time.Millisecond))
		default:
			c = cNSDelete(ns)
			log = append(log, c)
			c = cNS(ns)
		}
		log = append(log, c)
	}
	// Stamp the leader's clock: it moves on every few entries, past lease
	// TTLs now and then.
	t := epoch
	for i, c := range log {
		if i%7 == 0 {
			t += int64(700 * time.Millisecond)
		}
		c.Now = t
	}
	return log[:n]
}

// Two FSMs fed the same random lock log, one entry at a time and packed
// into batches of random sizes, give the same results and the same
// snapshot bytes; every state passes the invariants (no conflicting
// holds, counts and indexes agree); a restore midway changes nothing.
func TestLockDeterminism(t *testing.T) {
	for seed := int64(1); seed <= 8; seed++ {
		log := genLockLog(seed, 1500)
		r := rand.New(rand.NewSource(seed))
		a := New(Options{TempDir: t.TempDir()})
		b := New(Options{TempDir: t.TempDir()})
		granted := 0
		for i := 0; i < len(log); {
			k := 1 + r.Intn(8)
			if i+k > len(log) {
				k = len(log) - i
			}
			var packed [][]byte
			var want []string
			for j := 0; j < k; j++ {
				ra := a.ApplyCommand(uint64(i+1), log[i+j])
				if ra.Err != nil && ra.Err.Code == CodeInternal {
					t.Fatalf("seed %d entry %d: %v", seed, i+j, ra.Err)
				}
				if ra.Acquired {
					granted++
				}
				if err := a.CheckInvariants(); err != nil {
					t.Fatalf("seed %d entry %d (%s): %v", seed, i+j, opName(log[i+j]), err)
				}
				want = append(want, resultString(ra))
				packed = append(packed, mustEncode(t, log[i+j]))
			}
			// b applies the same commands as one batch entry at index i+1:
			// every command of a batch applies as an entry of its own at
			// the batch's index, so the results are the same.
			rb := b.ApplyCommand(uint64(i+1), &fsmpb.Command{Now: log[i].Now, Op: &fsmpb.Command_Batch{Batch: &fsmpb.Batch{Commands: packed}}})
			for j := range packed {
				if got := resultString(rb.Batch[j]); got != want[j] {
					t.Fatalf("seed %d entry %d: results differ\n one: %s\nbatch: %s", seed, i+j, want[j], got)
				}
			}
			i += k
			if i > len(log)/2 && i-k <= len(log)/2 {
				c := New(Options{TempDir: t.TempDir()})
				if err := restoreBytes(c, snapshotBytes(t, b)); err != nil {
					t.Fatal(err)
				}
				b = c
			}
		}
		if string(snapshotBytes(t, a)) != string(snapshotBytes(t, b)) {
			t.Fatalf("seed %d: snapshots differ", seed)
		}
		if granted == 0 {
			t.Fatalf("seed %d: nothing granted", seed)
		}
	}
}
