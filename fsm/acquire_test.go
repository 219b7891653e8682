package fsm

import (
	"reflect"
	"testing"

	fsmpb "github.com/grackle-coord/grackle/proto/grackle/fsm/v1"
)

// acquireFixture: namespace "ns", semaphore "s" with the given permits,
// leases lid(1..n) with a 60 s ttl, process "p<i>".
func acquireFixture(t *testing.T, permits int64, leases int) *harness {
	h := newHarness(t)
	h.ok(cNS("ns"))
	h.ok(cSem("ns", "s", permits))
	for i := 1; i <= leases; i++ {
		h.ok(cLease("ns", lid(i), "p"+string(rune('0'+i)), 60))
	}
	return h
}

func holdersOf(t testing.TB, f *FSM, ns, sem string, now int64) []holderSummary {
	t.Helper()
	p, err := f.ListSemaphoreHolders(ns, sem, 250, "", now)
	if err != nil {
		t.Fatal(err)
	}
	var out []holderSummary
	for _, h := range p.Items {
		out = append(out, holderSummary{h.LeaseId, h.Weight})
	}
	return out
}

type holderSummary struct {
	lease  string
	weight int64
}

// docs/API.md, Acquire validation (at the FSM level: weight; timeouts are the
// RPC layer's) and 2.
func TestAcquireRejects(t *testing.T) {
	cases := []struct {
		name   string
		prep   func(h *harness)
		cmd    *fsmpb.Command
		code   Code
		substr string
	}{
		{"weight 0", nil, cAcq("ns", "s", lid(1), 0), CodeInvalidArgument, "weight"},
		{"weight -1", nil, cAcq("ns", "s", lid(1), -1), CodeInvalidArgument, "weight"},
		{"weight above permits", nil, cAcq("ns", "s", lid(1), 6), CodeInvalidArgument, "weight exceeds semaphore permits"},
		{"weight above permits, queued", nil, cAcqQ("ns", "s", lid(1), 6), CodeInvalidArgument, "weight exceeds semaphore permits"},
		{"weight above permits while held", func(h *harness) { h.ok(cAcq("ns", "s", lid(1), 2)) }, cAcq("ns", "s", lid(1), 6), CodeInvalidArgument, "weight exceeds semaphore permits"},
		// Rule 1 before rule 2: a weight that can never fit is refused as
		// such even when the lease is missing or expired too.
		{"weight above permits, missing lease", nil, cAcq("ns", "s", lid(9), 6), CodeInvalidArgument, "weight exceeds semaphore permits"},
		{"weight above permits, expired lease", func(h *harness) { h.advance(61 * sec) }, cAcq("ns", "s", lid(1), 6), CodeInvalidArgument, "weight exceeds semaphore permits"},
		{"missing namespace", nil, cAcq("nope", "s", lid(1), 1), CodeNotFound, "nope"},
		{"missing semaphore", nil, cAcq("ns", "nope", lid(1), 1), CodeNotFound, "nope"},
		{"missing lease", nil, cAcq("ns", "s", lid(9), 1), CodeNotFound, lid(9)},
		{"lease of another namespace", func(h *harness) {
			h.ok(cNS("other"))
			h.ok(cLease("other", lid(7), "p", 60))
		}, cAcq("ns", "s", lid(7), 1), CodeNotFound, lid(7)},
		{"lease expired exactly now", func(h *harness) { h.advance(60 * sec) }, cAcq("ns", "s", lid(1), 1), CodeNotFound, lid(1)},
		{"lease expired, queued", func(h *harness) { h.advance(61 * sec) }, cAcqQ("ns", "s", lid(1), 1), CodeNotFound, lid(1)},
		{"lease expired while holding", func(h *harness) {
			h.ok(cAcq("ns", "s", lid(1), 1))
			h.advance(60 * sec)
		}, cAcq("ns", "s", lid(1), 1), CodeNotFound, lid(1)},
		{"no grant at all", nil, &fsmpb.Command{Op: &fsmpb.Command_Acquire{Acquire: &fsmpb.Acquire{}}}, CodeInvalidArgument, "namespace_name"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := acquireFixture(t, 5, 1)
			if c.prep != nil {
				c.prep(h)
			}
			r := h.fails(c.cmd, c.code, c.substr)
			if r.Acquired || r.Holder != nil {
				t.Fatalf("failed acquire reports a grant: %+v", r)
			}
		})
	}
	// weight == permits is fine.
	h := acquireFixture(t, 5, 1)
	if r := h.ok(cAcq("ns", "s", lid(1), 5)); !r.Acquired {
		t.Fatal("weight == permits not granted")
	}
	// A lease one nanosecond from expiry is alive.
	h = acquireFixture(t, 5, 1)
	h.advance(60*sec - 1)
	if r := h.ok(cAcq("ns", "s", lid(1), 1)); !r.Acquired {
		t.Fatal("live lease refused")
	}
}

// docs/API.md, All or none.
func TestAcquireAllOrNone(t *testing.T) {
	h := acquireFixture(t, 5, 3)
	r := h.ok(cAcq("ns", "s", lid(1), 3))
	if !r.Acquired || r.Semaphore.ActiveHolds != 3 || r.Semaphore.ActiveHoldersCount != 1 || r.Holder.Weight != 3 {
		t.Fatalf("first: %+v", r)
	}
	before := dumpState(h.f)
	h.advance(sec)
	r = h.ok(cAcq("ns", "s", lid(2), 3))
	if r.Acquired || r.Holder != nil || r.Semaphore.ActiveHolds != 3 || r.Semaphore.ActiveHoldersCount != 1 {
		t.Fatalf("3+3 > 5 granted or reported wrongly: %+v", r)
	}
	if len(r.Freed) != 0 {
		t.Fatalf("Freed %v", r.Freed)
	}
	// Only last_activity_at moved.
	if got := dumpState(h.f); got == before {
		t.Fatal("last_activity_at not recorded")
	} else if dumpExceptActivity(got) != dumpExceptActivity(before) {
		t.Fatalf("a refused acquire changed the state:\n%s\n%s", before, got)
	}
	r = h.ok(cAcq("ns", "s", lid(2), 2))
	if !r.Acquired || r.Semaphore.ActiveHolds != 5 || r.Semaphore.ActiveHoldersCount != 2 {
		t.Fatalf("3+2 <= 5 not granted: %+v", r)
	}
	if r := h.ok(cAcq("ns", "s", lid(3), 1)); r.Acquired {
		t.Fatal("granted on a full semaphore")
	}
	if got := holdersOf(t, h.f, "ns", "s", h.now); !reflect.DeepEqual(got, []holderSummary{{lid(1), 3}, {lid(2), 2}}) {
		t.Fatalf("holders %v", got)
	}
}

// dumpExceptActivity masks last_activity_at in a dump.
func dumpExceptActivity(d string) string {
	return activityRE.ReplaceAllString(d, "act=*")
}

// docs/API.md, FIFO and waiting, at the FSM level: Queued=true never grants a new hold or an
// increase, even when it would fit; it still records the attempt.
func TestAcquireQueuedDoesNotGrant(t *testing.T) {
	h := acquireFixture(t, 5, 2)
	h.advance(sec)
	r := h.ok(cAcqQ("ns", "s", lid(1), 1))
	if r.Acquired || r.Holder != nil || r.Semaphore.ActiveHolds != 0 {
		t.Fatalf("queued acquire granted: %+v", r)
	}
	if r.Semaphore.LastActivityAt != h.now {
		t.Fatal("queued attempt not recorded")
	}
	// An increase of an existing hold, queued, waits too.
	h.ok(cAcq("ns", "s", lid(1), 1))
	r = h.ok(cAcqQ("ns", "s", lid(1), 2))
	if r.Acquired || h.f.HeldWeight("ns", "s", lid(1)) != 1 {
		t.Fatalf("queued increase granted: %+v", r)
	}
}

// docs/API.md, Re-acquire: a decrease happens at once, even queued; re-acquire keeps
// locked_at and a single holder, replaces weight and metadata, and gets a
// new fencing token; an increase that does not fit leaves the hold as it was.
func TestReacquire(t *testing.T) {
	h := acquireFixture(t, 5, 2)
	r1 := h.ok(cAcqFull("ns", "s", lid(1), 2, false, md("a", "1")))
	lockedAt, tok1 := r1.Holder.LockedAt, r1.Holder.FencingToken
	if lockedAt != h.now || !reflect.DeepEqual(r1.Holder.Metadata, md("a", "1")) {
		t.Fatalf("first: %+v", r1.Holder)
	}
	h.advance(sec)
	r2 := h.ok(cAcqFull("ns", "s", lid(1), 4, false, md("b", "2")))
	if !r2.Acquired || r2.Holder.LockedAt != lockedAt || r2.Holder.Weight != 4 || !reflect.DeepEqual(r2.Holder.Metadata, md("b", "2")) ||
		r2.Holder.FencingToken <= tok1 || r2.Semaphore.ActiveHolds != 4 || r2.Semaphore.ActiveHoldersCount != 1 {
		t.Fatalf("increase that fits: %+v", r2)
	}
	if len(r2.Freed) != 0 {
		t.Fatalf("an increase freed %v", r2.Freed)
	}
	p, _ := h.f.ListSemaphoreHolders("ns", "s", 0, "", h.now)
	if len(p.Items) != 1 || p.Items[0].FencingToken != r2.Holder.FencingToken || p.Items[0].LockedAt != lockedAt {
		t.Fatalf("listing shows %v", p.Items)
	}

	// Same weight again: granted, new token, still one holder.
	h.advance(sec)
	r3 := h.ok(cAcq("ns", "s", lid(1), 4))
	if !r3.Acquired || r3.Holder.FencingToken <= r2.Holder.FencingToken || r3.Holder.LockedAt != lockedAt || len(r3.Holder.Metadata) != 0 {
		t.Fatalf("same weight: %+v", r3)
	}

	// A decrease, queued: granted at once, frees permits.
	h.advance(sec)
	r4 := h.ok(cAcqQ("ns", "s", lid(1), 1))
	if !r4.Acquired || r4.Holder.Weight != 1 || r4.Semaphore.ActiveHolds != 1 || r4.Holder.LockedAt != lockedAt ||
		r4.Holder.FencingToken <= r3.Holder.FencingToken {
		t.Fatalf("queued decrease: %+v", r4)
	}
	if !reflect.DeepEqual(r4.Freed, semKeys("ns", "s")) {
		t.Fatalf("decrease Freed %v", r4.Freed)
	}

	// An increase that does not fit: not granted, the hold is unchanged
	// (weight, token, metadata, locked_at), no error.
	h.ok(cAcq("ns", "s", lid(2), 3))
	h.ok(cAcqFull("ns", "s", lid(1), 1, false, md("keep", "me")))
	before := dumpExceptActivity(dumpState(h.f))
	h.advance(sec)
	r5 := h.ok(cAcqFull("ns", "s", lid(1), 3, false, md("new", "x")))
	if r5.Acquired || r5.Holder != nil || r5.Semaphore.ActiveHolds != 4 {
		t.Fatalf("increase that does not fit: %+v", r5)
	}
	if dumpExceptActivity(dumpState(h.f)) != before {
		t.Fatal("an increase that did not fit changed the hold")
	}
	if got := holdersOf(t, h.f, "ns", "s", h.now); !reflect.DeepEqual(got, []holderSummary{{lid(1), 1}, {lid(2), 3}}) {
		t.Fatalf("holders %v", got)
	}
	// It fits exactly: 2 + 3 = 5.
	if r := h.ok(cAcq("ns", "s", lid(1), 2)); !r.Acquired || r.Semaphore.ActiveHolds != 5 {
		t.Fatalf("exact fit: %+v", r)
	}
}

// docs/API.md, Fencing tokens: the fencing token is the raft index of the granting entry and
// strictly increases with every grant (several in one entry included).
func TestFencingTokens(t *testing.T) {
	h := acquireFixture(t, 10, 4)
	h.ok(cSem("ns", "t", 10))
	r := h.ok(cAcq("ns", "s", lid(1), 1))
	if r.Holder.FencingToken != h.idx {
		t.Fatalf("token %d, index %d", r.Holder.FencingToken, h.idx)
	}
	last := r.Holder.FencingToken
	// A gap in the indexes (entries of other kinds): the token follows the index.
	h.idx += 100
	r = h.ok(cAcq("ns", "t", lid(1), 1))
	if r.Holder.FencingToken != h.idx || r.Holder.FencingToken <= last {
		t.Fatalf("token %d at index %d", r.Holder.FencingToken, h.idx)
	}
	last = r.Holder.FencingToken
	// Three grants in one entry: index, index+1, index+2 ...
	r = h.ok(withGrants(cAcq("ns", "s", lid(2), 1), grant("ns", "s", lid(3), 1), grant("ns", "t", lid(2), 1)))
	toks := []uint64{r.Holder.FencingToken, r.Grants[0].Holder.FencingToken, r.Grants[1].Holder.FencingToken}
	if toks[0] != h.idx || toks[1] != h.idx+1 || toks[2] != h.idx+2 || toks[0] <= last {
		t.Fatalf("tokens %v at index %d", toks, h.idx)
	}
	// ... so the next entry's grant must go past index+2 although its index is lower.
	r = h.ok(cAcq("ns", "s", lid(4), 1))
	if r.Holder.FencingToken != toks[2]+1 {
		t.Fatalf("token %d after %v", r.Holder.FencingToken, toks)
	}
	last = r.Holder.FencingToken
	// Re-acquire: a new token; the listing shows the latest one.
	r = h.ok(cAcq("ns", "s", lid(1), 1))
	if r.Holder.FencingToken <= last {
		t.Fatalf("re-acquire token %d <= %d", r.Holder.FencingToken, last)
	}
	p, _ := h.f.ListSemaphoreHolders("ns", "s", 0, "", h.now)
	if p.Items[0].LeaseId != lid(1) || p.Items[0].FencingToken != r.Holder.FencingToken {
		t.Fatalf("listing %v", p.Items)
	}
	// A refused acquire consumes no token.
	tokBefore := h.f.st.lastToken
	h.ok(cAcq("ns", "s", lid(2), 10))
	h.fails(cAcq("ns", "s", lid(9), 1), CodeNotFound)
	if h.f.st.lastToken != tokBefore {
		t.Fatal("a refused acquire consumed a token")
	}
}

func TestHolderView(t *testing.T) {
	h := acquireFixture(t, 5, 1)
	h.advance(3 * sec)
	r := h.ok(cAcqFull("ns", "s", lid(1), 2, false, md("job", "42")))
	l, _ := h.f.GetSemaphoreLease("ns", lid(1), h.now)
	want := holderSummary{lid(1), 2}
	hv := r.Holder
	if (holderSummary{hv.LeaseId, hv.Weight}) != want || hv.ProcessId != "p1" || hv.ExpiresAt != l.ExpiresAt ||
		hv.LockedAt != h.now || hv.FencingToken != h.idx || hv.Metadata["job"] != "42" {
		t.Fatalf("holder %v (lease %v)", hv, l)
	}
	p, _ := h.f.ListSemaphoreHolders("ns", "s", 0, "", h.now)
	if len(p.Items) != 1 || protoString(p.Items[0]) != protoString(hv) {
		t.Fatalf("listed %v, acquired %v", p.Items, hv)
	}
}

// ReleaseSemaphore: what the lease does not hold changes nothing and is
// not an error (only last_activity_at moves, docs/API.md, Semaphores: "every release").
func TestRelease(t *testing.T) {
	h := acquireFixture(t, 5, 3)
	h.ok(cAcq("ns", "s", lid(1), 2))
	h.ok(cAcq("ns", "s", lid(2), 3))
	h.ok(cSem("ns", "t", 5))

	h.advance(sec)
	r := h.ok(cRel("ns", "s", lid(1)))
	if !reflect.DeepEqual(r.Freed, semKeys("ns", "s")) || r.Semaphore.ActiveHolds != 3 || r.Semaphore.ActiveHoldersCount != 1 ||
		r.Semaphore.LastActivityAt != h.now {
		t.Fatalf("release: %+v", r)
	}
	if h.f.HeldWeight("ns", "s", lid(1)) != 0 || len(h.f.LeaseHolds("ns", lid(1))) != 0 {
		t.Fatal("hold still indexed")
	}
	for _, c := range []struct {
		name string
		cmd  *fsmpb.Command
	}{
		{"again", cRel("ns", "s", lid(1))},
		{"a lease holding nothing", cRel("ns", "s", lid(3))},
		{"a missing lease", cRel("ns", "s", lid(99))},
		{"a semaphore the lease does not hold", cRel("ns", "t", lid(2))},
	} {
		before := dumpExceptActivity(dumpState(h.f))
		h.advance(sec)
		r := h.ok(c.cmd)
		if len(r.Freed) != 0 || r.Semaphore == nil {
			t.Fatalf("%s: %+v", c.name, r)
		}
		if dumpExceptActivity(dumpState(h.f)) != before {
			t.Fatalf("%s: releasing what is not held changed the state", c.name)
		}
		if got := holdersOf(t, h.f, "ns", "s", h.now); !reflect.DeepEqual(got, []holderSummary{{lid(2), 3}}) {
			t.Fatalf("%s: holders %v", c.name, got)
		}
	}
	h.fails(cRel("nope", "s", lid(2)), CodeNotFound, "nope")
	h.fails(cRel("ns", "nope", lid(2)), CodeNotFound, "nope")
	// Releasing the hold of an expired (not yet reaped) lease works.
	h.advance(60 * sec)
	if r := h.ok(cRel("ns", "s", lid(2))); len(r.Freed) != 1 {
		t.Fatalf("release of an expired holder: %+v", r)
	}
	if c := h.f.Counts(); c.Holders != 0 {
		t.Fatalf("counts %+v", c)
	}
}

// Conditional grants (command.proto Grant, DESIGN.md hand-off): applied
// after the op, in order; a failed grant on a semaphore skips every later
// grant on it in the same command; a lease dead at now is NotFound.
func TestConditionalGrants(t *testing.T) {
	t.Run("after the op, in order", func(t *testing.T) {
		h := acquireFixture(t, 4, 4)
		h.ok(cAcq("ns", "s", lid(1), 4))
		h.advance(sec)
		r := h.ok(withGrants(cRel("ns", "s", lid(1)), grant("ns", "s", lid(3), 1), grant("ns", "s", lid(2), 3)))
		if len(r.Grants) != 2 || !r.Grants[0].Granted || !r.Grants[1].Granted {
			t.Fatalf("grants %+v", r.Grants)
		}
		if r.Grants[0].Semaphore.ActiveHolds != 1 || r.Grants[1].Semaphore.ActiveHolds != 4 {
			t.Fatalf("grant views %v / %v", r.Grants[0].Semaphore, r.Grants[1].Semaphore)
		}
		if r.Grants[0].Holder.LeaseId != lid(3) || r.Grants[0].Holder.LockedAt != h.now || r.Grants[0].Holder.FencingToken != h.idx ||
			r.Grants[1].Holder.FencingToken != h.idx+1 {
			t.Fatalf("grant holders %v / %v", r.Grants[0].Holder, r.Grants[1].Holder)
		}
		// Acquisition order is grant order.
		if got := holdersOf(t, h.f, "ns", "s", h.now); !reflect.DeepEqual(got, []holderSummary{{lid(3), 1}, {lid(2), 3}}) {
			t.Fatalf("holders %v", got)
		}
		if s, _ := h.f.GetSemaphore("ns", "s", h.now); s.LastActivityAt != h.now {
			t.Fatal("a grant is activity")
		}
	})
	t.Run("head of line blocks its semaphore only", func(t *testing.T) {
		h := acquireFixture(t, 3, 5)
		h.ok(cSem("ns", "t", 3))
		r := h.ok(cGrants(
			grant("ns", "s", lid(1), 2), // fits
			grant("ns", "s", lid(2), 2), // does not fit: blocks s
			grant("ns", "t", lid(2), 2), // another semaphore: applies
			grant("ns", "s", lid(3), 1), // would fit, skipped
			grant("ns", "t", lid(4), 1), // applies
		))
		got := []bool{}
		for _, g := range r.Grants {
			got = append(got, g.Granted)
			if g.Err != nil {
				t.Fatalf("unexpected grant error %v", g.Err)
			}
		}
		if !reflect.DeepEqual(got, []bool{true, false, true, false, true}) {
			t.Fatalf("granted %v", got)
		}
		if r.Grants[1].Semaphore == nil || r.Grants[1].Semaphore.ActiveHolds != 2 || r.Grants[1].Holder != nil {
			t.Fatalf("the failed grant reports %+v", r.Grants[1])
		}
		if h.f.HeldWeight("ns", "s", lid(3)) != 0 {
			t.Fatal("a grant behind a blocked one was applied")
		}
		if got := holdersOf(t, h.f, "ns", "t", h.now); !reflect.DeepEqual(got, []holderSummary{{lid(2), 2}, {lid(4), 1}}) {
			t.Fatalf("t holders %v", got)
		}
	})
	t.Run("dead lease", func(t *testing.T) {
		h := acquireFixture(t, 3, 0)
		h.ok(cLease("ns", lid(1), "p", 1))
		h.ok(cLease("ns", lid(2), "p", 60))
		h.advance(sec) // lid(1) expires exactly now
		r := h.ok(cGrants(grant("ns", "s", lid(1), 1), grant("ns", "s", lid(2), 1)))
		if r.Grants[0].Granted || r.Grants[1].Granted {
			t.Fatalf("grants %+v", r.Grants)
		}
		expectErr(t, r.Grants[0].Err, CodeNotFound, lid(1))
		if r.Grants[1].Err != nil {
			t.Fatal("a skipped grant carries an error")
		}
		if c := h.f.Counts(); c.Holders != 0 {
			t.Fatal("hold granted to a dead lease")
		}
	})
	t.Run("errors", func(t *testing.T) {
		h := acquireFixture(t, 3, 1)
		for _, c := range []struct {
			g    *fsmpb.Grant
			code Code
			msg  string
		}{
			{grant("nope", "s", lid(1), 1), CodeNotFound, "nope"},
			{grant("ns", "nope", lid(1), 1), CodeNotFound, "nope"},
			{grant("ns", "s", lid(5), 1), CodeNotFound, lid(5)},
			{grant("ns", "s", lid(1), 4), CodeInvalidArgument, "weight exceeds semaphore permits"},
			{grant("ns", "s", lid(1), 0), CodeInvalidArgument, "weight"},
			{grant("ns", "s", "bad", 1), CodeInvalidArgument, "lease_id"},
		} {
			before := dumpState(h.f)
			r := h.ok(cGrants(c.g))
			if r.Grants[0].Granted {
				t.Fatalf("%v granted", c.g)
			}
			expectErr(t, r.Grants[0].Err, c.code, c.msg)
			if dumpState(h.f) != before {
				t.Fatalf("%v changed the state", c.g)
			}
		}
	})
	t.Run("a failed op does not stop its grants", func(t *testing.T) {
		h := acquireFixture(t, 3, 1)
		r := h.apply(withGrants(cNS("ns"), grant("ns", "s", lid(1), 2)))
		expectErr(t, r.Err, CodeAlreadyExists)
		if !r.Grants[0].Granted || h.f.HeldWeight("ns", "s", lid(1)) != 2 {
			t.Fatalf("grants %+v", r.Grants)
		}
	})
	t.Run("re-grant keeps locked_at", func(t *testing.T) {
		h := acquireFixture(t, 3, 1)
		lockedAt := h.ok(cAcq("ns", "s", lid(1), 1)).Holder.LockedAt
		h.advance(sec)
		r := h.ok(cGrants(grant("ns", "s", lid(1), 3)))
		if !r.Grants[0].Granted || r.Grants[0].Holder.LockedAt != lockedAt || r.Grants[0].Holder.Weight != 3 {
			t.Fatalf("%+v", r.Grants[0])
		}
	})
	t.Run("after revoke and expiry", func(t *testing.T) {
		h := acquireFixture(t, 2, 0)
		h.ok(cLease("ns", lid(1), "p", 10))
		h.ok(cLease("ns", lid(2), "p", 60))
		h.ok(cLease("ns", lid(3), "p", 60))
		h.ok(cAcq("ns", "s", lid(1), 2))
		if r := h.ok(cGrants(grant("ns", "s", lid(2), 2))); r.Grants[0].Granted {
			t.Fatal("granted over a full semaphore")
		}
		h.advance(10 * sec)
		r := h.ok(withGrants(cExpire(0), grant("ns", "s", lid(2), 2)))
		if !r.Grants[0].Granted || !reflect.DeepEqual(r.RemovedLeases, []LeaseKey{{"ns", lid(1)}}) {
			t.Fatalf("expire+grant %+v", r)
		}
		r = h.ok(withGrants(cRevoke("ns", lid(2)), grant("ns", "s", lid(3), 1)))
		if !r.Grants[0].Granted || !reflect.DeepEqual(r.Freed, semKeys("ns", "s")) {
			t.Fatalf("revoke+grant %+v", r)
		}
	})
}
