package fsm

import (
	"testing"

	fsmpb "github.com/grackle-coord/grackle/proto/grackle/fsm/v1"
)

func stateBytesOf(f *FSM) int64 { return f.StateBytes() }

// withQuota is the default limits with a state quota.
func withQuota(max int64) Limits {
	l := DefaultLimits()
	l.MaxStateBytes = max
	return l
}

// refusedByQuota applies c, which must fail with STATE_QUOTA and change
// nothing (harness.fails compares the whole state before and after).
func (h *harness) refusedByQuota(c *fsmpb.Command) {
	h.t.Helper()
	r := h.fails(c, CodeResourceExhausted, "state quota", "max_state_bytes")
	if r.Err.Reason != ReasonStateQuota {
		h.t.Fatalf("%s: reason %q, want %s", opName(c), r.Err.Reason, ReasonStateQuota)
	}
}

// docs/API.md, State quota: at the quota every write that grows the state
// is refused with STATE_QUOTA and changes nothing; releases, revokes,
// deletes, expiry, refreshes, updates that do not grow and membership go
// on, lower the total, and make room for creates again.
func TestStateQuota(t *testing.T) {
	h := newHarness(t)
	if stateBytesOf(h.f) != 0 {
		t.Fatalf("an empty state accounts %d bytes", stateBytesOf(h.f))
	}
	h.ok(cNS("q"))
	h.ok(cSem("q", "s", 10))
	h.ok(cLease("q", lid(1), "p1", 60))
	h.ok(cLease("q", lid(2), "p2", 60))
	h.ok(cAcq("q", "s", lid(1), 1))
	h.ok(cLockLease("q", llA, md("k", "v")))
	h.ok(cLock("q", "a/b", llA, true))
	h.ok(cWG("q", "wg", 5))
	h.ok(cBar("q", "bar", 3))
	h.ok(cNSFull("big", "a description that takes room", md("key", "a value")))
	full := stateBytesOf(h.f)
	if full <= 0 {
		t.Fatalf("state accounts %d bytes", full)
	}

	// Quota exactly at the current size: nothing may grow.
	h.ok(cLimits(withQuota(full)))
	grow := map[string]*fsmpb.Command{
		"create namespace":      cNS("other"),
		"create semaphore":      cSem("q", "s2", 1),
		"create lease":          cLease("q", lid(3), "p3", 60),
		"create lock lease":     cLockLease("q", llB, nil),
		"acquire (new hold)":    cAcq("q", "s", lid(2), 1),
		"re-acquire, more md":   cAcqFull("q", "s", lid(1), 1, false, md("more", "metadata")),
		"acquire lock":          cLock("q", "c", llA, true),
		"create wait group":     cWG("q", "wg2", 1),
		"complete jobs":         cDone("q", "wg", "j1"),
		"create barrier":        cBar("q", "bar2", 2),
		"arrive":                cArrive("q", "bar", "p1", 1),
		"create token":          cToken(aclTok("tok", "s1", RoleRead, AnyNamespace)),
		"update ns, more md":    cNSUpdate("big", "a description that takes room", md("key", "a value", "k2", "v2"), 1),
		"update sem, more desc": cSemUpdate("q", "s", "longer", 10, nil, 1),
		"update wg, more md":    cWGUpdate("q", "wg", "", 5, 0, 0, md("a", "b"), 1),
		"update bar, more desc": cBarUpdate("q", "bar", "longer", 3, 0, nil, 1),
	}
	for name, c := range grow {
		t.Run(name, func(t *testing.T) {
			h.t = t
			h.refusedByQuota(c)
		})
	}
	h.t = t
	if got := stateBytesOf(h.f); got != full {
		t.Fatalf("refused writes moved the total from %d to %d", full, got)
	}
	// A queued waiter's grant is refused the same way, on its own.
	r := h.ok(cGrants(grant("q", "s", lid(2), 1)))
	if r.Grants[0].Granted || r.Grants[0].Err == nil || r.Grants[0].Err.Reason != ReasonStateQuota {
		t.Fatalf("grant at the quota: %+v", r.Grants[0])
	}

	// What does not grow still works.
	h.ok(cNSUpdate("big", "a description that takes room", md("key", "a value"), 1)) // same size
	h.ok(cNSUpdate("big", "", nil, 2))                                               // smaller
	h.ok(cRefresh("q", lid(1), 30))
	h.ok(cAcq("q", "s", lid(1), 2)) // a re-acquire with no more metadata
	h.ok(cLock("q", "a/b", llA, true))
	h.ok(&fsmpb.Command{Op: &fsmpb.Command_SetMember{SetMember: &fsmpb.SetMember{NodeId: "n9", RaftAddress: "127.0.0.1:1", GrpcAddress: "127.0.0.1:2"}}})
	h.ok(&fsmpb.Command{Op: &fsmpb.Command_RemoveMember{RemoveMember: &fsmpb.RemoveMember{NodeId: "n9"}}})

	// Each of these frees room.
	for _, step := range []struct {
		name string
		c    *fsmpb.Command
	}{
		{"release", cRel("q", "s", lid(1))},
		{"release lock", cUnlock("q", "a/b", llA)},
		{"revoke", cRevoke("q", lid(1))},
		{"delete wait group", cWGDelete("q", "wg")},
		{"delete barrier", cBarDelete("q", "bar")},
		{"delete semaphore", cSemDelete("q", "s")},
	} {
		before := stateBytesOf(h.f)
		h.ok(step.c)
		if after := stateBytesOf(h.f); after >= before {
			t.Fatalf("%s: total %d -> %d, want it lower", step.name, before, after)
		}
	}
	// Expiry frees room too.
	before := stateBytesOf(h.f)
	h.advance(61 * sec)
	h.ok(cExpire(0))
	if after := stateBytesOf(h.f); after >= before {
		t.Fatalf("expiry: total %d -> %d, want it lower", before, after)
	}
	// Below the quota, creates work again, until the quota is reached.
	h.ok(cNS("other"))
	n := 0
	for ; n < 100; n++ {
		r := h.apply(cNS("fill" + string(rune('a'+n%26)) + string(rune('a'+n/26))))
		if r.Err != nil {
			if r.Err.Reason != ReasonStateQuota {
				t.Fatalf("fill %d: %v", n, r.Err)
			}
			break
		}
	}
	if n == 100 || stateBytesOf(h.f) < full {
		t.Fatalf("creates never reached the quota: %d creates, %d of %d bytes", n, stateBytesOf(h.f), full)
	}
	// Dropping the bound (0) lets the state grow again.
	h.ok(cLimits(withQuota(0)))
	h.ok(cNS("unbounded"))
	h.ok(cLimits(withQuota(-1)))
	h.ok(cNS("unbounded2"))
}

// ACLService.Bootstrap works at the quota (once), so that an operator can
// always get in; token creation does not.
func TestStateQuotaBootstrap(t *testing.T) {
	h := newHarness(t)
	h.ok(cNS("q"))
	h.ok(cLimits(withQuota(1)))
	h.refusedByQuota(cToken(aclTok("t1", "s1", RoleRead, AnyNamespace)))
	h.ok(cBootstrap(aclTok("root", "s0", RoleAdmin, AnyNamespace)))
	h.ok(cRevokeToken("root"))
}

// The accounted size is a function of the records alone: a replica that
// replayed the log, one that restored a snapshot of it, and one that
// restored and then applied the rest agree, table by table (check compares
// each table's running total with its records).
func TestStateBytesReplayEqualsRestore(t *testing.T) {
	h := newHarness(t)
	h.record = true
	h.ok(cNSFull("a", "desc", md("k", "v", "k2", "v2")))
	h.ok(cNS("b"))
	h.ok(cSemFull("a", "s", "semaphore", 5, md("x", "y")))
	h.ok(cSem("b", "t", 2))
	for i := 0; i < 5; i++ {
		h.ok(cLease("a", lid(i), "proc", 60))
		h.ok(cAcqFull("a", "s", lid(i), 1, false, md("i", string(rune('0'+i)))))
	}
	h.ok(cLockLease("a", llA, md("host", "h1")))
	h.ok(cLockLease("a", llB, nil))
	h.ok(cLock("a", "x/y", llA, false))
	h.ok(cLock("a", "x/y", llB, false))
	h.ok(cWGFull("a", "wg", "group", 4, 0, 0, md("w", "g")))
	h.ok(cJobs("a", "wg", job("j1", "m", "1"), job("j2")))
	h.ok(cBar("a", "bar", 3))
	h.ok(cArriveMD("a", "bar", "p1", 1, md("a", "1")))
	h.ok(cToken(aclTok("tok", "s1", RoleWrite, "a")))
	h.ok(&fsmpb.Command{Op: &fsmpb.Command_SetMember{SetMember: &fsmpb.SetMember{NodeId: "n1", RaftAddress: "127.0.0.1:1", GrpcAddress: "127.0.0.1:2"}}})
	h.ok(cRel("a", "s", lid(0)))
	h.ok(cRevoke("a", lid(1)))
	h.ok(cSemUpdate("a", "s", "", 6, md("x", "yy"), 1))
	mid := len(h.log)
	snap := snapshotBytes(t, h.f)
	h.ok(cNSDelete("b"))
	h.ok(cDone("a", "wg", "j3"))
	h.ok(cArrive("a", "bar", "p2", 1))
	want := stateBytesOf(h.f)
	if want <= 0 {
		t.Fatal("no bytes accounted")
	}

	replay := newHarness(t)
	for _, c := range h.log {
		replay.idx++
		replay.f.ApplyCommand(replay.idx, c)
	}
	if got := stateBytesOf(replay.f); got != want {
		t.Fatalf("replayed: %d bytes, want %d", got, want)
	}

	restored := New(Options{TempDir: t.TempDir()})
	if err := restoreBytes(restored, snap); err != nil {
		t.Fatal(err)
	}
	if err := restored.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
	for i, c := range h.log[mid:] {
		restored.ApplyCommand(uint64(mid+i+1), c)
	}
	if got := stateBytesOf(restored); got != want {
		t.Fatalf("restored then applied: %d bytes, want %d", got, want)
	}
	if err := restored.CheckInvariants(); err != nil {
		t.Fatal(err)
	}

	// A snapshot of the final state restores to the same total, over a
	// state that held something else.
	final := snapshotBytes(t, h.f)
	if err := restoreBytes(replay.f, final); err != nil {
		t.Fatal(err)
	}
	if got := stateBytesOf(replay.f); got != want {
		t.Fatalf("restored over another state: %d bytes, want %d", got, want)
	}
}

// The quota is replicated like every limit, in the snapshot too; a
// SetLimits or snapshot without it (an older leader) means no bound.
func TestStateQuotaReplicated(t *testing.T) {
	if l := limitsFrom(&fsmpb.SetLimits{MaxNamespaces: 1}); l.MaxStateBytes != 0 {
		t.Fatalf("an old SetLimits gives a quota of %d", l.MaxStateBytes)
	}
	h := newHarness(t)
	h.ok(cLimits(withQuota(12345)))
	r := New(Options{TempDir: t.TempDir()})
	if err := restoreBytes(r, snapshotBytes(t, h.f)); err != nil {
		t.Fatal(err)
	}
	if got := r.Limits().MaxStateBytes; got != 12345 {
		t.Fatalf("restored quota %d", got)
	}
}
