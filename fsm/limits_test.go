package fsm

import (
	"testing"
)

// docs/API.md, Limits, replicated through SetLimits.
func TestLimits(t *testing.T) {
	small := Limits{MaxNamespaces: 2, MaxSemaphoresPerNamespace: 2, MaxLeasesPerNamespace: 2, MaxHoldersPerSemaphore: 2, MaxPermits: 10, MaxTTLSeconds: 30,
		MaxLocksPerNamespace: 2, MaxLockLeasesPerNamespace: 2, MaxHoldersPerLock: 2,
		MaxWaitGroupsPerNamespace: 2, MaxBarriersPerNamespace: 2, MaxWaitGroupCounter: 5, MaxBarrierProcesses: 3, MaxJobsPerCall: 4}

	t.Run("defaults", func(t *testing.T) {
		if New(Options{}).Limits() != DefaultLimits() {
			t.Fatal("a new FSM does not start with the defaults")
		}
		d := DefaultLimits()
		if d.MaxNamespaces != 100_000 || d.MaxSemaphoresPerNamespace != 1_000_000 || d.MaxLeasesPerNamespace != 1_000_000 ||
			d.MaxHoldersPerSemaphore != 10_000 || d.MaxPermits != 1_000_000_000 || d.MaxTTLSeconds != 300 {
			t.Fatalf("defaults %+v differ from docs/API.md, Limits", d)
		}
	})
	t.Run("set and validate", func(t *testing.T) {
		h := newHarness(t)
		h.ok(cLimits(small))
		if h.f.Limits() != small {
			t.Fatalf("limits %+v", h.f.Limits())
		}
		for _, f := range []struct {
			field string
			set   func(*Limits)
		}{
			{"max_namespaces", func(l *Limits) { l.MaxNamespaces = 0 }},
			{"max_semaphores_per_namespace", func(l *Limits) { l.MaxSemaphoresPerNamespace = -1 }},
			{"max_leases_per_namespace", func(l *Limits) { l.MaxLeasesPerNamespace = 0 }},
			{"max_holders_per_semaphore", func(l *Limits) { l.MaxHoldersPerSemaphore = 0 }},
			{"max_permits", func(l *Limits) { l.MaxPermits = 0 }},
			{"max_ttl_seconds", func(l *Limits) { l.MaxTTLSeconds = 0 }},
		} {
			l := small
			f.set(&l)
			h.fails(cLimits(l), CodeInvalidArgument, f.field)
		}
		if h.f.Limits() != small {
			t.Fatal("a rejected SetLimits changed the limits")
		}
	})
	t.Run("namespaces", func(t *testing.T) {
		h := newHarness(t)
		h.ok(cLimits(small))
		h.ok(cNS("a"))
		h.ok(cNS("b"))
		h.fails(cNS("c"), CodeResourceExhausted, "namespaces", "2")
		h.fails(cNS("a"), CodeAlreadyExists) // existence is reported first
		h.ok(cNSDelete("a"))
		h.ok(cNS("c"))
	})
	t.Run("semaphores per namespace", func(t *testing.T) {
		h := newHarness(t)
		h.ok(cLimits(small))
		h.ok(cNS("a"))
		h.ok(cNS("b"))
		h.ok(cSem("a", "1", 1))
		h.ok(cSem("a", "2", 1))
		h.fails(cSem("a", "3", 1), CodeResourceExhausted, "semaphores", "2")
		h.ok(cSem("b", "3", 1)) // per namespace
		h.ok(cSemDelete("a", "1"))
		h.ok(cSem("a", "3", 1))
	})
	t.Run("leases per namespace", func(t *testing.T) {
		h := newHarness(t)
		h.ok(cLimits(small))
		h.ok(cNS("a"))
		h.ok(cNS("b"))
		h.ok(cLease("a", lid(1), "p", 5))
		h.ok(cLease("a", lid(2), "p", 5))
		h.fails(cLease("a", lid(3), "p", 5), CodeResourceExhausted, "leases", "2")
		h.ok(cLease("b", lid(3), "p", 5))
		h.ok(cRevoke("a", lid(1)))
		h.ok(cLease("a", lid(3), "p", 5))
		// An expired lease still counts until it is reaped.
		h.advance(5 * sec)
		h.fails(cLease("a", lid(4), "p", 5), CodeResourceExhausted)
		h.ok(cExpire(0))
		h.ok(cLease("a", lid(4), "p", 5))
	})
	t.Run("holders per semaphore", func(t *testing.T) {
		h := newHarness(t)
		h.ok(cLimits(small))
		h.ok(cNS("a"))
		h.ok(cSem("a", "s", 10))
		h.ok(cSem("a", "t", 10))
		for i := 1; i <= 2; i++ {
			h.ok(cLease("a", lid(i), "p", 30))
			h.ok(cAcq("a", "s", lid(i), 1))
		}
		h.ok(cRevoke("a", lid(2)))
		h.ok(cLease("a", lid(2), "p", 30))
		h.ok(cAcq("a", "s", lid(2), 1))
		h.ok(cLimits(Limits{MaxNamespaces: 2, MaxSemaphoresPerNamespace: 2, MaxLeasesPerNamespace: 3, MaxHoldersPerSemaphore: 2, MaxPermits: 10, MaxTTLSeconds: 30,
			MaxLocksPerNamespace: 2, MaxLockLeasesPerNamespace: 2, MaxHoldersPerLock: 2}))
		h.ok(cLease("a", lid(3), "p", 30))
		h.fails(cAcq("a", "s", lid(3), 1), CodeResourceExhausted, "holders", "2")
		// A queued attempt does not try to grant, so it is not refused.
		if r := h.ok(cAcqQ("a", "s", lid(3), 1)); r.Acquired {
			t.Fatal("queued acquire granted")
		}
		// Existing holders may still re-acquire; another semaphore is fine.
		if r := h.ok(cAcq("a", "s", lid(1), 5)); !r.Acquired {
			t.Fatal("re-acquire refused at the holder limit")
		}
		h.ok(cAcq("a", "t", lid(3), 1))
		// Through a conditional grant: an error on the grant.
		before := dumpState(h.f)
		r := h.ok(cGrants(grant("a", "s", lid(3), 1)))
		if r.Grants[0].Granted {
			t.Fatal("grant over the holder limit")
		}
		expectErr(t, r.Grants[0].Err, CodeResourceExhausted, "holders")
		if dumpState(h.f) != before {
			t.Fatal("refused grant changed the state")
		}
		h.ok(cRel("a", "s", lid(2)))
		h.ok(cAcq("a", "s", lid(3), 1))
	})
	t.Run("permits", func(t *testing.T) {
		h := newHarness(t)
		h.ok(cLimits(small))
		h.ok(cNS("a"))
		h.ok(cSem("a", "s", 10))
		h.fails(cSem("a", "t", 11), CodeInvalidArgument, "permits", "10")
		h.fails(cSemUpdate("a", "s", "", 11, nil, 1), CodeInvalidArgument, "permits", "10")
		h.ok(cSemUpdate("a", "s", "", 9, nil, 1))
	})
	t.Run("ttl", func(t *testing.T) {
		h := newHarness(t)
		h.ok(cLimits(small))
		h.ok(cNS("a"))
		h.ok(cLease("a", lid(1), "p", 30))
		h.fails(cLease("a", lid(2), "p", 31), CodeInvalidArgument, "ttl_seconds", "30")
		h.fails(cRefresh("a", lid(1), 31), CodeInvalidArgument, "ttl_seconds", "30")
		h.ok(cRefresh("a", lid(1), 30))
	})
	t.Run("replicated in snapshots", func(t *testing.T) {
		h := newHarness(t)
		h.ok(cLimits(small))
		g := New(Options{TempDir: t.TempDir()})
		if err := restoreBytes(g, snapshotBytes(t, h.f)); err != nil {
			t.Fatal(err)
		}
		if g.Limits() != small {
			t.Fatalf("restored limits %+v", g.Limits())
		}
	})
}
