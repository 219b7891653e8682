package fsm

import (
	"reflect"
	"sort"
	"testing"
)

// docs/API.md, Semaphore leases.

func TestLeaseCreateGet(t *testing.T) {
	h := newHarness(t)
	h.fails(cLease("ns", lid(1), "p", 10), CodeNotFound, "ns")
	h.ok(cNS("ns"))
	r := h.ok(cLease("ns", lid(1), "host/pid-1", 10))
	l := r.Lease
	if l.LeaseId != lid(1) || l.ProcessId != "host/pid-1" || l.TtlSeconds != 10 || l.CreatedAt != h.now || l.ExpiresAt != h.now+10*sec {
		t.Fatalf("create returned %v", l)
	}
	h.fails(cLease("ns", lid(1), "other", 20), CodeAlreadyExists, lid(1))
	h.fails(cLease("ns", lid(2), "p", 0), CodeInvalidArgument, "ttl_seconds")
	h.fails(cLease("ns", lid(2), "p", -1), CodeInvalidArgument, "ttl_seconds")
	h.fails(cLease("ns", lid(2), "p", 301), CodeInvalidArgument, "ttl_seconds", "300")
	h.ok(cLease("ns", lid(2), "p", 300))
	// Lease ids are scoped to their namespace.
	h.ok(cNS("ns2"))
	h.ok(cLease("ns2", lid(1), "q", 5))

	g, err := h.f.GetSemaphoreLease("ns", lid(1), h.now)
	if err != nil || protoString(g) != protoString(l) {
		t.Fatalf("get %v %v", g, err)
	}
	if g, err := h.f.GetSemaphoreLease("ns", lid(1), l.ExpiresAt-1); err != nil || g.LeaseId != lid(1) {
		t.Fatal("a lease is alive until expires_at")
	}
	_, err = h.f.GetSemaphoreLease("ns", lid(1), l.ExpiresAt)
	expectCode(t, err, CodeNotFound, lid(1))
	_, err = h.f.GetSemaphoreLease("ns", lid(3), h.now)
	expectCode(t, err, CodeNotFound)
	_, err = h.f.GetSemaphoreLease("nope", lid(1), h.now)
	expectCode(t, err, CodeNotFound)
}

func TestLeaseRefresh(t *testing.T) {
	h := newHarness(t)
	h.ok(cNS("ns"))
	h.ok(cSem("ns", "s", 5))
	h.ok(cSem("ns", "t", 5))
	created := h.ok(cLease("ns", lid(1), "p", 10)).Lease
	h.ok(cLease("ns", lid(2), "p", 10))
	h.ok(cAcq("ns", "s", lid(1), 2))
	h.ok(cAcq("ns", "t", lid(1), 3))
	h.advance(8 * sec)
	r := h.ok(cRefresh("ns", lid(1), 20))
	if r.Lease.ExpiresAt != h.now+20*sec || r.Lease.TtlSeconds != 20 || r.Lease.CreatedAt != created.CreatedAt {
		t.Fatalf("refresh returned %v", r.Lease)
	}
	// Past the old expiry, the lease and both holds are alive.
	h.advance(15 * sec)
	if _, err := h.f.GetSemaphoreLease("ns", lid(1), h.now); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"s", "t"} {
		p, _ := h.f.ListSemaphoreHolders("ns", s, 0, "", h.now)
		if len(p.Items) != 1 || p.Items[0].ExpiresAt != r.Lease.ExpiresAt {
			t.Fatalf("%s holders after refresh: %v", s, p.Items)
		}
	}
	if s, _ := h.f.GetSemaphore("ns", "s", h.now); s.ActiveHolds != 2 {
		t.Fatalf("hold lost: %v", s)
	}
	// A refresh may also shorten (expires_at = now + ttl).
	r = h.ok(cRefresh("ns", lid(1), 1))
	if r.Lease.ExpiresAt != h.now+sec {
		t.Fatalf("short refresh %v", r.Lease)
	}
	h.fails(cRefresh("ns", lid(1), 0), CodeInvalidArgument, "ttl_seconds")
	h.fails(cRefresh("ns", lid(1), 301), CodeInvalidArgument, "ttl_seconds")
	h.fails(cRefresh("ns", lid(9), 10), CodeNotFound, lid(9))
	h.fails(cRefresh("nope", lid(1), 10), CodeNotFound, "nope")

	// lid(2) expired long ago without being reaped: the refresh reaps it
	// (and its holds) and is NotFound.
	h.ok(cRefresh("ns", lid(1), 100))
	r = h.apply(cRefresh("ns", lid(2), 10))
	expectErr(t, r.Err, CodeNotFound, lid(2))
	if !reflect.DeepEqual(r.RemovedLeases, []LeaseKey{{"ns", lid(2)}}) {
		t.Fatalf("RemovedLeases %v", r.RemovedLeases)
	}
	if c := h.f.Counts(); c.Leases != 1 {
		t.Fatalf("expired lease not reaped: %+v", c)
	}
	// Its holds go with it and are reported freed.
	h.ok(cLease("ns", lid(3), "p", 5))
	h.ok(cAcq("ns", "s", lid(3), 3))
	h.advance(5 * sec)
	r = h.apply(cRefresh("ns", lid(3), 10))
	expectErr(t, r.Err, CodeNotFound)
	if !reflect.DeepEqual(r.Freed, semKeys("ns", "s")) {
		t.Fatalf("Freed %v", r.Freed)
	}
	if _, holds, _ := h.f.SemaphoreCapacity("ns", "s"); holds != 2 {
		t.Fatalf("stored holds %d after reaping", holds)
	}
	h.fails(cRefresh("ns", lid(3), 10), CodeNotFound)
}

func TestLeaseRevoke(t *testing.T) {
	h := newHarness(t)
	h.ok(cNS("ns"))
	h.ok(cSem("ns", "a", 5))
	h.ok(cSem("ns", "b", 5))
	h.ok(cLease("ns", lid(1), "p", 10))
	h.ok(cLease("ns", lid(2), "p", 10))
	h.ok(cAcq("ns", "b", lid(1), 2))
	h.ok(cAcq("ns", "a", lid(1), 3))
	h.ok(cAcq("ns", "a", lid(2), 1))
	r := h.ok(cRevoke("ns", lid(1)))
	if !reflect.DeepEqual(r.Freed, semKeys("ns", "a", "ns", "b")) || !reflect.DeepEqual(r.RemovedLeases, []LeaseKey{{"ns", lid(1)}}) {
		t.Fatalf("revoke: %+v", r)
	}
	if c := h.f.Counts(); c != (Counts{Namespaces: 1, Semaphores: 2, Leases: 1, Holders: 1}) {
		t.Fatalf("counts %+v", c)
	}
	if s, _ := h.f.GetSemaphore("ns", "a", h.now); s.ActiveHolds != 1 || s.ActiveHoldersCount != 1 {
		t.Fatalf("a: %v", s)
	}
	_, err := h.f.GetSemaphoreLease("ns", lid(1), h.now)
	expectCode(t, err, CodeNotFound)
	h.fails(cRevoke("ns", lid(1)), CodeNotFound, lid(1))
	h.fails(cRevoke("nope", lid(2)), CodeNotFound, "nope")
	// The id can be used again.
	h.ok(cLease("ns", lid(1), "p", 10))
}

func TestListLeasesByProcess(t *testing.T) {
	h := newHarness(t)
	h.ok(cNS("ns"))
	h.ok(cNS("other"))
	h.ok(cLease("ns", lid(5), "p1", 10))
	h.ok(cLease("ns", lid(2), "p2", 10))
	h.ok(cLease("ns", lid(3), "p1", 100))
	h.ok(cLease("ns", lid(1), "p1", 100))
	h.ok(cLease("ns", lid(4), "p10", 100))
	h.ok(cLease("other", lid(6), "p1", 100))
	ids := func(proc string, now int64) []string {
		p, err := h.f.ListSemaphoreLeases("ns", proc, 0, "", now)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, l := range p.Items {
			out = append(out, l.LeaseId)
			if proc != "" && l.ProcessId != proc {
				t.Fatalf("filter %q listed %v", proc, l)
			}
		}
		return out
	}
	if got := ids("", h.now); !reflect.DeepEqual(got, []string{lid(1), lid(2), lid(3), lid(4), lid(5)}) {
		t.Fatalf("all: %v", got)
	}
	if got := ids("p1", h.now); !reflect.DeepEqual(got, []string{lid(1), lid(3), lid(5)}) {
		t.Fatalf("p1: %v", got)
	}
	if got := ids("p2", h.now); !reflect.DeepEqual(got, []string{lid(2)}) {
		t.Fatalf("p2: %v", got)
	}
	if got := ids("nobody", h.now); len(got) != 0 {
		t.Fatalf("nobody: %v", got)
	}
	// Expired leases are not listed, with or without a filter.
	later := h.now + 10*sec
	if got := ids("", later); !reflect.DeepEqual(got, []string{lid(1), lid(3), lid(4)}) {
		t.Fatalf("all, later: %v", got)
	}
	if got := ids("p1", later); !reflect.DeepEqual(got, []string{lid(1), lid(3)}) {
		t.Fatalf("p1, later: %v", got)
	}
	_, err := h.f.ListSemaphoreLeases("nope", "", 0, "", h.now)
	expectCode(t, err, CodeNotFound)
}

// ExpireLeases removes exactly the leases with expires_at <= now, earliest
// first, at most max of them, with their holds.
func TestExpireLeases(t *testing.T) {
	h := newHarness(t)
	h.ok(cNS("ns"))
	h.ok(cSem("ns", "s", 10))
	t0 := h.now
	// ttl i+1 seconds for lid(i): created in an order unrelated to expiry.
	for _, i := range []int{3, 0, 4, 1, 2} {
		h.ok(cLease("ns", lid(i), "p", int64(i+1)))
		h.ok(cAcq("ns", "s", lid(i), 1))
	}
	if at, ok := h.f.NextExpiry(); !ok || at != t0+sec {
		t.Fatalf("NextExpiry %d %v", at, ok)
	}
	// Nothing is due: nothing happens.
	before := dumpState(h.f)
	if r := h.ok(cExpire(0)); len(r.RemovedLeases) != 0 || dumpState(h.f) != before {
		t.Fatalf("expired early: %+v", r)
	}
	// now = t0+3s: lid(0), lid(1), lid(2) are due (lid(2) exactly at now).
	h.now = t0 + 3*sec
	r := h.ok(cExpire(2))
	if want := []LeaseKey{{"ns", lid(0)}, {"ns", lid(1)}}; !reflect.DeepEqual(r.RemovedLeases, want) {
		t.Fatalf("max 2: removed %v", r.RemovedLeases)
	}
	if !reflect.DeepEqual(r.Freed, semKeys("ns", "s", "ns", "s")) {
		t.Fatalf("Freed %v", r.Freed)
	}
	r = h.ok(cExpire(0))
	if want := []LeaseKey{{"ns", lid(2)}}; !reflect.DeepEqual(r.RemovedLeases, want) {
		t.Fatalf("unbounded: removed %v", r.RemovedLeases)
	}
	if c := h.f.Counts(); c.Leases != 2 || c.Holders != 2 {
		t.Fatalf("counts %+v", c)
	}
	if _, holds, _ := h.f.SemaphoreCapacity("ns", "s"); holds != 2 {
		t.Fatalf("stored holds %d", holds)
	}
	if at, _ := h.f.NextExpiry(); at != t0+4*sec {
		t.Fatalf("NextExpiry %d", at)
	}
	// Leases in several namespaces, same expiry: ordered by (at, ns, id).
	h2 := newHarness(t)
	for _, ns := range []string{"b", "a"} {
		h2.ok(cNS(ns))
		h2.ok(cLease(ns, lid(2), "p", 1))
		h2.ok(cLease(ns, lid(1), "p", 1))
	}
	h2.advance(sec)
	r = h2.ok(cExpire(3))
	if want := []LeaseKey{{"a", lid(1)}, {"a", lid(2)}, {"b", lid(1)}}; !reflect.DeepEqual(r.RemovedLeases, want) {
		t.Fatalf("order %v", r.RemovedLeases)
	}
}

// ExtendLeases adds extend_ns to every lease alive at now, and to nothing
// else; it never shortens one.
func TestExtendLeases(t *testing.T) {
	h := newHarness(t)
	h.ok(cNS("ns"))
	h.ok(cSem("ns", "s", 10))
	t0 := h.now
	h.ok(cLease("ns", lid(1), "p", 1))
	h.ok(cLease("ns", lid(2), "p", 2))
	h.ok(cLease("ns", lid(3), "p", 5))
	h.ok(cAcq("ns", "s", lid(2), 1))
	h.now = t0 + 2*sec // lid(1) and lid(2) are dead (lid(2) exactly now)
	h.ok(cExtend(10 * sec))
	exp := map[string]int64{}
	h.f.st.leases.Scan(func(l leaseRec) bool { exp[l.id] = l.expiresAt; return true })
	if want := map[string]int64{lid(1): t0 + sec, lid(2): t0 + 2*sec, lid(3): t0 + 15*sec}; !reflect.DeepEqual(exp, want) {
		t.Fatalf("expiries %v want %v", exp, want)
	}
	if _, err := h.f.GetSemaphoreLease("ns", lid(2), h.now); err == nil {
		t.Fatal("a dead lease came back to life")
	}
	// The holder listing follows the lease.
	h.ok(cAcq("ns", "s", lid(3), 1))
	h.ok(cExtend(sec))
	p, _ := h.f.ListSemaphoreHolders("ns", "s", 0, "", h.now)
	if len(p.Items) != 1 || p.Items[0].ExpiresAt != t0+16*sec {
		t.Fatalf("holders %v", p.Items)
	}
	before := dumpState(h.f)
	h.ok(cExtend(0))
	if dumpState(h.f) != before {
		t.Fatal("extend 0 changed something")
	}
	h.fails(cExtend(-1), CodeInvalidArgument, "extend_ns")
	// Saturates instead of overflowing.
	h.ok(cExtend(1<<63 - 1))
	if l, err := h.f.GetSemaphoreLease("ns", lid(3), h.now); err != nil || l.ExpiresAt != 1<<63-1 {
		t.Fatalf("saturated lease %v %v", l, err)
	}
}

// Reads hide expired leases and their holds before any reaping.
func TestReadsHideExpired(t *testing.T) {
	h := newHarness(t)
	h.ok(cNS("ns"))
	h.ok(cSem("ns", "s", 10))
	h.ok(cLease("ns", lid(1), "p", 5))
	h.ok(cLease("ns", lid(2), "p", 10))
	h.ok(cLease("ns", lid(3), "p", 20))
	h.ok(cAcq("ns", "s", lid(1), 1))
	h.ok(cAcq("ns", "s", lid(2), 2))
	h.ok(cAcq("ns", "s", lid(3), 4))
	for _, c := range []struct {
		at             int64
		holds, holders int64
		listed         []string
	}{
		{h.now, 7, 3, []string{lid(1), lid(2), lid(3)}},
		{h.now + 5*sec - 1, 7, 3, []string{lid(1), lid(2), lid(3)}},
		{h.now + 5*sec, 6, 2, []string{lid(2), lid(3)}},
		{h.now + 10*sec, 4, 1, []string{lid(3)}},
		{h.now + 20*sec, 0, 0, nil},
	} {
		s, _ := h.f.GetSemaphore("ns", "s", c.at)
		if s.ActiveHolds != c.holds || s.ActiveHoldersCount != c.holders {
			t.Fatalf("at +%ds: %v", (c.at-epoch)/sec, s)
		}
		ls, _ := h.f.ListSemaphores("ns", 0, "", c.at)
		if ls.Items[0].ActiveHolds != c.holds || ls.Items[0].ActiveHoldersCount != c.holders {
			t.Fatalf("list at +%ds: %v", (c.at-epoch)/sec, ls.Items[0])
		}
		var got []string
		for _, hv := range holdersOf(t, h.f, "ns", "s", c.at) {
			got = append(got, hv.lease)
		}
		if !reflect.DeepEqual(got, c.listed) {
			t.Fatalf("at +%ds: holders %v", (c.at-epoch)/sec, got)
		}
		lp, _ := h.f.ListSemaphoreLeases("ns", "", 0, "", c.at)
		var leases []string
		for _, l := range lp.Items {
			leases = append(leases, l.LeaseId)
		}
		sort.Strings(leases)
		if !reflect.DeepEqual(leases, c.listed) {
			t.Fatalf("at +%ds: leases %v", (c.at-epoch)/sec, leases)
		}
	}
	// The write path's stored counts still include the unreaped holds.
	if _, holds, _ := h.f.SemaphoreCapacity("ns", "s"); holds != 7 {
		t.Fatalf("stored holds %d", holds)
	}
}

// Time never goes backwards: a command stamped earlier than the last one
// is applied at the last one's time.
func TestTimeNeverGoesBackwards(t *testing.T) {
	h := newHarness(t)
	h.ok(cNS("ns"))
	h.ok(cSem("ns", "s", 5))
	t1 := h.now + 100*sec
	h.now = t1
	h.ok(cNoop())
	if h.f.LastNow() != t1 {
		t.Fatalf("LastNow %d", h.f.LastNow())
	}
	h.now = t1 - 50*sec // an older leader clock
	l := h.ok(cLease("ns", lid(1), "p", 10)).Lease
	if l.CreatedAt != t1 || l.ExpiresAt != t1+10*sec {
		t.Fatalf("lease stamped with the older clock: %v", l)
	}
	if h.f.LastNow() != t1 {
		t.Fatal("LastNow went backwards")
	}
	r := h.ok(cAcq("ns", "s", lid(1), 1))
	if r.Holder.LockedAt != t1 || r.Semaphore.LastActivityAt != t1 {
		t.Fatalf("acquire stamped with the older clock: %+v", r)
	}
	// Expiry is judged at the clamped time too: a lease dead at lastNow
	// cannot be used by a command that claims an earlier now.
	h.now = t1 + 10*sec
	h.ok(cNoop())
	h.now = t1
	h.fails(cAcq("ns", "s", lid(1), 2), CodeNotFound)
	expectErr(t, h.apply(cRefresh("ns", lid(1), 10)).Err, CodeNotFound) // and it is reaped
	if c := h.f.Counts(); c.Leases != 0 {
		t.Fatalf("counts %+v", c)
	}
}

// At the very end of time (now = MaxInt64) no lease is alive, so an
// ExtendLeases must extend none (a dead lease must not come back to life
// for a reader at an earlier now).
func TestExtendLeasesAtEndOfTime(t *testing.T) {
	h := newHarness(t)
	h.ok(cNS("ns"))
	h.ok(cLease("ns", lid(1), "p", 1))
	exp := h.now + sec
	h.now = 1<<63 - 1
	h.ok(cExtend(10 * sec))
	if l, ok := h.f.st.getLease("ns", lid(1)); !ok || l.expiresAt != exp {
		t.Fatalf("a dead lease was extended: %+v", l)
	}
}
