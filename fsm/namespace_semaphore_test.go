package fsm

import (
	"reflect"
	"strings"
	"testing"

	fsmpb "github.com/grackle-coord/grackle/proto/grackle/fsm/v1"
)

// docs/API.md, Namespaces: create, get, update (full replacement, versions),
// delete (cascade; a missing namespace is not an error).

func TestNamespaceCreateGet(t *testing.T) {
	h := newHarness(t)
	r := h.ok(cNSFull("team-a_1", "the A team", md("owner", "alice")))
	n := r.Namespace
	if n.Name != "team-a_1" || n.Description != "the A team" || !reflect.DeepEqual(n.Metadata, md("owner", "alice")) ||
		n.Version != 1 || n.CreatedAt != h.now || n.UpdatedAt != h.now {
		t.Fatalf("create returned %v", n)
	}
	h.advance(sec)
	g, err := h.f.GetNamespace("team-a_1")
	if err != nil || !reflect.DeepEqual(g.Metadata, n.Metadata) || g.Version != 1 || g.CreatedAt != n.CreatedAt || g.Description != n.Description {
		t.Fatalf("get: %v %v", g, err)
	}
	// The view is a copy: mutating it does not touch the state.
	g.Metadata["owner"] = "mallory"
	if g2, _ := h.f.GetNamespace("team-a_1"); g2.Metadata["owner"] != "alice" {
		t.Fatal("a returned view aliases the stored metadata")
	}
	// The command's map is not aliased either.
	m := md("k", "v")
	h.ok(cNSFull("other", "", m))
	m["k"] = "changed"
	if g3, _ := h.f.GetNamespace("other"); g3.Metadata["k"] != "v" {
		t.Fatal("the command's metadata map is aliased into the state")
	}

	h.fails(cNS("team-a_1"), CodeAlreadyExists, "team-a_1")
	_, err = h.f.GetNamespace("missing")
	expectCode(t, err, CodeNotFound, "missing")
}

func TestNamespaceUpdate(t *testing.T) {
	h := newHarness(t)
	created := h.ok(cNSFull("ns", "d1", md("a", "1", "b", "2"))).Namespace
	h.advance(5 * sec)
	r := h.ok(cNSUpdate("ns", "d2", md("c", "3"), 1))
	n := r.Namespace
	if n.Version != 2 || n.Description != "d2" || !reflect.DeepEqual(n.Metadata, md("c", "3")) ||
		n.CreatedAt != created.CreatedAt || n.UpdatedAt != h.now {
		t.Fatalf("update returned %v", n)
	}
	if g, _ := h.f.GetNamespace("ns"); g.Version != 2 || g.Description != "d2" || len(g.Metadata) != 1 {
		t.Fatalf("get after update: %v", g)
	}
	// Full replacement: empty fields clear.
	h.advance(sec)
	n = h.ok(cNSUpdate("ns", "", nil, 2)).Namespace
	if n.Version != 3 || n.Description != "" || len(n.Metadata) != 0 {
		t.Fatalf("clearing update returned %v", n)
	}
	// Mismatched versions: older, newer, the one just used.
	for _, v := range []int64{1, 2, 4, 100} {
		h.fails(cNSUpdate("ns", "x", md("x", "y"), v), CodeInvalidArgument, "version mismatch")
	}
	h.fails(cNSUpdate("ns", "x", nil, 0), CodeInvalidArgument, "expected_version")
	h.fails(cNSUpdate("ns", "x", nil, -1), CodeInvalidArgument, "expected_version")
	h.fails(cNSUpdate("nope", "x", nil, 1), CodeNotFound, "nope")
	if g, _ := h.f.GetNamespace("ns"); g.Version != 3 {
		t.Fatalf("version %d after failed updates", g.Version)
	}
}

func TestNamespaceDeleteCascades(t *testing.T) {
	h := newHarness(t)
	for _, ns := range []string{"a", "b"} {
		h.ok(cNS(ns))
		h.ok(cSem(ns, "s1", 5))
		h.ok(cSem(ns, "s2", 5))
		h.ok(cLease(ns, lid(1), "p", 60))
		h.ok(cLease(ns, lid(2), "p", 60))
		h.ok(cAcq(ns, "s1", lid(1), 2))
		h.ok(cAcq(ns, "s2", lid(1), 1))
		h.ok(cAcq(ns, "s1", lid(2), 3))
	}
	if c := h.f.Counts(); c != (Counts{Namespaces: 2, Semaphores: 4, Leases: 4, Holders: 6}) {
		t.Fatalf("counts before: %+v", c)
	}
	beforeB := dumpFiltered(h.f, `"b"`)
	r := h.ok(cNSDelete("a"))
	if r.RemovedNamespace != "a" {
		t.Fatalf("RemovedNamespace %q", r.RemovedNamespace)
	}
	if want := semKeys("a", "s1", "a", "s2"); !reflect.DeepEqual(r.RemovedSemaphores, want) {
		t.Fatalf("RemovedSemaphores %v want %v", r.RemovedSemaphores, want)
	}
	if want := []LeaseKey{{"a", lid(1)}, {"a", lid(2)}}; !reflect.DeepEqual(r.RemovedLeases, want) {
		t.Fatalf("RemovedLeases %v want %v", r.RemovedLeases, want)
	}
	if c := h.f.Counts(); c != (Counts{Namespaces: 1, Semaphores: 2, Leases: 2, Holders: 3}) {
		t.Fatalf("counts after: %+v", c)
	}
	_, err := h.f.GetNamespace("a")
	expectCode(t, err, CodeNotFound)
	_, err = h.f.GetSemaphore("a", "s1", h.now)
	expectCode(t, err, CodeNotFound)
	_, err = h.f.GetSemaphoreLease("a", lid(1), h.now)
	expectCode(t, err, CodeNotFound)
	_, err = h.f.ListSemaphores("a", 0, "", h.now)
	expectCode(t, err, CodeNotFound)
	if hs := h.f.LeaseHolds("a", lid(1)); len(hs) != 0 {
		t.Fatalf("lease index still has %v", hs)
	}
	if after := dumpFiltered(h.f, `"b"`); after != beforeB {
		t.Fatalf("deleting a touched b:\n%s\n%s", beforeB, after)
	}
	// A recreated namespace starts empty: nothing of the old one leaks back.
	h.ok(cNS("a"))
	h.ok(cSem("a", "s1", 5))
	if s, _ := h.f.GetSemaphore("a", "s1", h.now); s.ActiveHolds != 0 || s.ActiveHoldersCount != 0 {
		t.Fatalf("recreated semaphore shows holds: %v", s)
	}
	if p, _ := h.f.ListSemaphoreLeases("a", "", 0, "", h.now); len(p.Items) != 0 {
		t.Fatalf("recreated namespace lists leases %v", p.Items)
	}
	if p, _ := h.f.ListSemaphoreHolders("a", "s1", 0, "", h.now); len(p.Items) != 0 {
		t.Fatalf("recreated semaphore lists holders %v", p.Items)
	}
	h.ok(cLease("a", lid(1), "p", 60)) // the id is free again
	// A missing namespace: no error, nothing changes.
	before := dumpState(h.f)
	r = h.ok(cNSDelete("never-existed"))
	if r.RemovedNamespace != "" || len(r.RemovedLeases)+len(r.RemovedSemaphores) != 0 || dumpState(h.f) != before {
		t.Fatalf("deleting a missing namespace did something: %+v", r)
	}
	h.fails(cNSDelete("bad name"), CodeInvalidArgument, "namespace_name")
}

// dumpFiltered keeps the dump lines that mention s.
func dumpFiltered(f *FSM, s string) string {
	var out []string
	for _, l := range strings.Split(dumpState(f), "\n") {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// docs/API.md, Semaphores.

func TestSemaphoreCreateGet(t *testing.T) {
	h := newHarness(t)
	h.fails(cSem("ns", "s", 1), CodeNotFound, "ns")
	h.ok(cNS("ns"))
	s := h.ok(cSemFull("ns", "s", "desc", 7, md("k", "v"))).Semaphore
	if s.Name != "s" || s.Description != "desc" || s.Permits != 7 || s.ActiveHolds != 0 || s.ActiveHoldersCount != 0 ||
		s.Version != 1 || s.CreatedAt != h.now || s.UpdatedAt != h.now || s.LastActivityAt != h.now || s.Metadata["k"] != "v" {
		t.Fatalf("create returned %v", s)
	}
	g, err := h.f.GetSemaphore("ns", "s", h.now)
	if err != nil || g.Permits != 7 || g.Version != 1 || g.LastActivityAt != s.LastActivityAt {
		t.Fatalf("get: %v %v", g, err)
	}
	h.fails(cSem("ns", "s", 3), CodeAlreadyExists, `"s"`)
	h.fails(cSem("ns", "z", 0), CodeInvalidArgument, "permits")
	h.fails(cSem("ns", "z", -5), CodeInvalidArgument, "permits")
	h.fails(cSem("ns", "z", DefaultLimits().MaxPermits+1), CodeInvalidArgument, "permits", "1000000000")
	h.ok(cSem("ns", "max", DefaultLimits().MaxPermits))
	h.ok(cSem("ns", "one", 1))
	_, err = h.f.GetSemaphore("ns", "missing", h.now)
	expectCode(t, err, CodeNotFound, "missing")
	_, err = h.f.GetSemaphore("nons", "s", h.now)
	expectCode(t, err, CodeNotFound, "nons")
	// Same semaphore name in another namespace is a different semaphore.
	h.ok(cNS("ns2"))
	h.ok(cSem("ns2", "s", 2))
	if g, _ := h.f.GetSemaphore("ns", "s", h.now); g.Permits != 7 {
		t.Fatal("ns2/s overwrote ns/s")
	}
}

func TestSemaphoreUpdate(t *testing.T) {
	h := newHarness(t)
	h.ok(cNS("ns"))
	created := h.ok(cSemFull("ns", "s", "d", 5, md("a", "1"))).Semaphore
	h.ok(cLease("ns", lid(1), "p", 60))
	h.ok(cLease("ns", lid(2), "p", 60))
	h.ok(cAcq("ns", "s", lid(1), 2))
	act := h.ok(cAcq("ns", "s", lid(2), 1)).Semaphore.LastActivityAt
	h.advance(10 * sec)

	// Raising permits: version+1, fields replaced, Freed names it,
	// last_activity_at untouched.
	r := h.ok(cSemUpdate("ns", "s", "d2", 8, md("b", "2"), 1))
	s := r.Semaphore
	if s.Version != 2 || s.Permits != 8 || s.Description != "d2" || !reflect.DeepEqual(s.Metadata, md("b", "2")) ||
		s.UpdatedAt != h.now || s.CreatedAt != created.CreatedAt || s.LastActivityAt != act || s.ActiveHolds != 3 {
		t.Fatalf("update returned %v", s)
	}
	if !reflect.DeepEqual(r.Freed, semKeys("ns", "s")) {
		t.Fatalf("raise: Freed %v", r.Freed)
	}
	// Lowering (still >= active_holds) and keeping: nothing freed.
	r = h.ok(cSemUpdate("ns", "s", "d2", 4, nil, 2))
	if len(r.Freed) != 0 || r.Semaphore.Permits != 4 || r.Semaphore.Version != 3 || len(r.Semaphore.Metadata) != 0 {
		t.Fatalf("lower: %+v", r)
	}
	r = h.ok(cSemUpdate("ns", "s", "d3", 4, nil, 3))
	if len(r.Freed) != 0 || r.Semaphore.Version != 4 {
		t.Fatalf("same permits: %+v", r)
	}
	// Exactly active_holds is allowed; one below is FailedPrecondition.
	h.ok(cSemUpdate("ns", "s", "", 3, nil, 4))
	h.fails(cSemUpdate("ns", "s", "", 2, nil, 5), CodeFailedPrecondition, "permits", "active_holds")
	// Version mismatch changes nothing, whatever else is wrong or right.
	h.fails(cSemUpdate("ns", "s", "zzz", 9, md("z", "z"), 4), CodeInvalidArgument, "version mismatch")
	h.fails(cSemUpdate("ns", "s", "zzz", 9, nil, 6), CodeInvalidArgument, "version mismatch")
	h.fails(cSemUpdate("ns", "s", "", 9, nil, 0), CodeInvalidArgument, "expected_version")
	h.fails(cSemUpdate("ns", "s", "", 0, nil, 5), CodeInvalidArgument, "permits")
	h.fails(cSemUpdate("ns", "s", "", DefaultLimits().MaxPermits+1, nil, 5), CodeInvalidArgument, "permits")
	h.fails(cSemUpdate("ns", "nope", "", 9, nil, 1), CodeNotFound, "nope")
	h.fails(cSemUpdate("nope", "s", "", 9, nil, 1), CodeNotFound, "nope")
	if g, _ := h.f.GetSemaphore("ns", "s", h.now); g.Version != 5 || g.Permits != 3 || g.LastActivityAt != act {
		t.Fatalf("after failed updates: %v", g)
	}
	// Raising permits lets a waiter in (the leader's grant in the same entry).
	h.ok(cLease("ns", lid(3), "p", 60))
	r = h.ok(withGrants(cSemUpdate("ns", "s", "", 5, nil, 5), grant("ns", "s", lid(3), 2)))
	if !r.Grants[0].Granted || r.Grants[0].Semaphore.ActiveHolds != 5 {
		t.Fatalf("grant after raise: %+v", r.Grants[0])
	}
}

// The FailedPrecondition check uses the stored holds, which still count a
// holder whose lease expired but was not reaped yet (the conservative choice
// documented in apply.go: the stored state keeps active_holds <= permits).
func TestSemaphoreUpdateCountsUnreapedHolds(t *testing.T) {
	h := newHarness(t)
	h.ok(cNS("ns"))
	h.ok(cSem("ns", "s", 5))
	h.ok(cLease("ns", lid(1), "p", 1))
	h.ok(cAcq("ns", "s", lid(1), 4))
	h.advance(2 * sec)
	if s, _ := h.f.GetSemaphore("ns", "s", h.now); s.ActiveHolds != 0 {
		t.Fatalf("expired hold still visible: %v", s)
	}
	h.fails(cSemUpdate("ns", "s", "", 3, nil, 1), CodeFailedPrecondition)
	h.ok(cExpire(0))
	h.ok(cSemUpdate("ns", "s", "", 3, nil, 1))
}

func TestSemaphoreDelete(t *testing.T) {
	h := newHarness(t)
	h.ok(cNS("ns"))
	h.ok(cSem("ns", "s", 5))
	h.ok(cSem("ns", "t", 5))
	h.ok(cLease("ns", lid(1), "p", 60))
	h.ok(cAcq("ns", "s", lid(1), 2))
	h.ok(cAcq("ns", "t", lid(1), 2))
	r := h.ok(cSemDelete("ns", "s"))
	if !reflect.DeepEqual(r.RemovedSemaphores, semKeys("ns", "s")) {
		t.Fatalf("RemovedSemaphores %v", r.RemovedSemaphores)
	}
	if got := h.f.LeaseHolds("ns", lid(1)); !reflect.DeepEqual(got, []string{"t"}) {
		t.Fatalf("lease still holds %v", got)
	}
	if c := h.f.Counts(); c.Semaphores != 1 || c.Holders != 1 || c.Leases != 1 {
		t.Fatalf("counts %+v", c)
	}
	_, err := h.f.GetSemaphore("ns", "s", h.now)
	expectCode(t, err, CodeNotFound)
	_, err = h.f.ListSemaphoreHolders("ns", "s", 0, "", h.now)
	expectCode(t, err, CodeNotFound)
	// Recreated under the same name: no holders come back.
	h.ok(cSem("ns", "s", 5))
	if s, _ := h.f.GetSemaphore("ns", "s", h.now); s.ActiveHolds != 0 {
		t.Fatalf("recreated: %v", s)
	}
	if got := h.ok(cAcq("ns", "s", lid(1), 5)); !got.Acquired || got.Holder.LockedAt != h.now {
		t.Fatalf("acquire on recreated semaphore: %+v", got)
	}
	// Missing semaphore or namespace: no error, nothing changes.
	before := dumpState(h.f)
	for _, c := range []*fsmpb.Command{cSemDelete("ns", "nope"), cSemDelete("nons", "s")} {
		if r := h.ok(c); len(r.RemovedSemaphores) != 0 {
			t.Fatalf("%+v", r)
		}
	}
	if dumpState(h.f) != before {
		t.Fatal("deleting a missing semaphore changed the state")
	}
	h.fails(cSemDelete("ns", ""), CodeInvalidArgument, "semaphore_name")
}

// docs/API.md, Semaphores: last_activity_at is set at creation, then on every acquire
// (acquired or not) and every release; not by updates or reads.
func TestLastActivityAt(t *testing.T) {
	h := newHarness(t)
	h.ok(cNS("ns"))
	h.ok(cSem("ns", "s", 2))
	h.ok(cLease("ns", lid(1), "p", 100))
	h.ok(cLease("ns", lid(2), "p", 100))
	act := func() int64 {
		s, err := h.f.GetSemaphore("ns", "s", h.now)
		if err != nil {
			t.Fatal(err)
		}
		return s.LastActivityAt
	}
	created := act()
	if created != h.now {
		t.Fatalf("at creation %d want %d", created, h.now)
	}
	steps := []struct {
		name    string
		cmd     *fsmpb.Command
		changes bool
	}{
		{"acquire granted", cAcq("ns", "s", lid(1), 2), true},
		{"acquire not granted (does not fit)", cAcq("ns", "s", lid(2), 1), true},
		{"acquire queued", cAcqQ("ns", "s", lid(2), 1), true},
		{"update", cSemUpdate("ns", "s", "x", 3, nil, 1), false},
		{"release held", cRel("ns", "s", lid(1)), true},
		{"release not held", cRel("ns", "s", lid(2)), true},
		{"acquire with a missing lease (NotFound)", cAcq("ns", "s", lid(9), 1), false},
		{"acquire too heavy (InvalidArgument)", cAcq("ns", "s", lid(1), 4), false},
		{"noop", cNoop(), false},
		{"create another semaphore", cSem("ns", "t", 1), false},
	}
	for _, st := range steps {
		prev := act()
		h.advance(sec)
		h.apply(st.cmd)
		h.advance(sec)
		got := act() // a read at a later now does not move it either
		if st.changes && got != h.now-sec {
			t.Fatalf("%s: last_activity_at %d, want %d", st.name, got, h.now-sec)
		}
		if !st.changes && got != prev {
			t.Fatalf("%s: last_activity_at moved from %d to %d", st.name, prev, got)
		}
	}
}

// docs/API.md, Names and text: names 1..128 of [-_0-9a-zA-Z], process_id 1..128
// printable, description <= 1024, metadata <= 32 entries, keys 1..128,
// values <= 256, lease ids "ls_" + >= 20 base62. Each bound passes exactly
// at the limit and fails one over, with an error naming the field.
func TestBounds(t *testing.T) {
	longMD := func(n int) map[string]string {
		m := map[string]string{}
		for i := 0; i < n; i++ {
			m[strings.Repeat("k", 1)+string(rune('A'+i%26))+strings.Repeat("x", i/26)] = "v"
		}
		return m
	}
	name128, name129 := strings.Repeat("n", 128), strings.Repeat("n", 129)
	desc1024, desc1025 := strings.Repeat("d", 1024), strings.Repeat("d", 1025)
	key128, key129 := strings.Repeat("k", 128), strings.Repeat("k", 129)
	val256, val257 := strings.Repeat("v", 256), strings.Repeat("v", 257)
	if len(longMD(32)) != 32 || len(longMD(33)) != 33 {
		t.Fatal("longMD")
	}

	type mdCase struct {
		name string
		m    map[string]string
		ok   bool
		msg  string
	}
	mdCases := []mdCase{
		{"32 entries", longMD(32), true, ""},
		{"33 entries", longMD(33), false, "32"},
		{"key 128", map[string]string{key128: "v"}, true, ""},
		{"key 129", map[string]string{key129: "v"}, false, "128"},
		{"empty key", map[string]string{"": "v"}, false, "keys"},
		{"value 256", map[string]string{"k": val256}, true, ""},
		{"value 257", map[string]string{"k": val257}, false, "256"},
		{"empty value", map[string]string{"k": ""}, true, ""},
	}

	type cmdCase struct {
		name  string
		cmd   func(h *harness, i int) *fsmpb.Command
		ok    bool
		field string
	}
	var cases []cmdCase
	// names
	for _, nc := range []struct {
		v  string
		ok bool
	}{{name128, true}, {name129, false}, {"", false}, {"a b", false}, {"a/b", false}, {"é", false}, {"a.b", false}, {"A-z_09", true}, {"-", true}} {
		v, ok := nc.v, nc.ok
		cases = append(cases,
			cmdCase{"namespace name " + trunc(v), func(h *harness, i int) *fsmpb.Command { return cNS(v) }, ok, "name"},
			cmdCase{"semaphore name " + trunc(v), func(h *harness, i int) *fsmpb.Command { return cSem("ns", v, 1) }, ok, "semaphore_name"},
		)
	}
	// descriptions
	for _, dc := range []struct {
		v  string
		ok bool
	}{{desc1024, true}, {desc1025, false}, {"", true}, {"\xff", false}} {
		v, ok := dc.v, dc.ok
		cases = append(cases,
			cmdCase{"namespace description " + trunc(v), func(h *harness, i int) *fsmpb.Command { return cNSFull(nm(i), v, nil) }, ok, "description"},
			cmdCase{"namespace update description " + trunc(v), func(h *harness, i int) *fsmpb.Command { return cNSUpdate("ns", v, nil, nsVersion(h)) }, ok, "description"},
			cmdCase{"semaphore description " + trunc(v), func(h *harness, i int) *fsmpb.Command { return cSemFull("ns", nm(i), v, 1, nil) }, ok, "description"},
			cmdCase{"semaphore update description " + trunc(v), func(h *harness, i int) *fsmpb.Command { return cSemUpdate("ns", "s", v, 100, nil, semVersion(h)) }, ok, "description"},
		)
	}
	// metadata, on every command that carries it
	for _, mc := range mdCases {
		mc := mc
		cases = append(cases,
			cmdCase{"namespace metadata " + mc.name, func(h *harness, i int) *fsmpb.Command { return cNSFull(nm(i), "", mc.m) }, mc.ok, "metadata"},
			cmdCase{"namespace update metadata " + mc.name, func(h *harness, i int) *fsmpb.Command { return cNSUpdate("ns", "", mc.m, nsVersion(h)) }, mc.ok, "metadata"},
			cmdCase{"semaphore metadata " + mc.name, func(h *harness, i int) *fsmpb.Command { return cSemFull("ns", nm(i), "", 1, mc.m) }, mc.ok, "metadata"},
			cmdCase{"semaphore update metadata " + mc.name, func(h *harness, i int) *fsmpb.Command { return cSemUpdate("ns", "s", "", 100, mc.m, semVersion(h)) }, mc.ok, "metadata"},
			cmdCase{"acquire metadata " + mc.name, func(h *harness, i int) *fsmpb.Command { return cAcqFull("ns", "s", lid(1), 1, false, mc.m) }, mc.ok, "metadata"},
			cmdCase{"grant metadata " + mc.name, func(h *harness, i int) *fsmpb.Command {
				g := grant("ns", "s", lid(1), 1)
				g.Metadata = mc.m
				return withGrants(cNoop(), g)
			}, mc.ok, "metadata"},
		)
	}
	// process ids
	for _, pc := range []struct {
		v  string
		ok bool
	}{{strings.Repeat("p", 128), true}, {strings.Repeat("p", 129), false}, {"", false}, {"host-1/pid 42 ü", true}, {"a\nb", false}, {"a\x7fb", false}, {"\xff", false}, {strings.Repeat("ü", 64), true}, {strings.Repeat("ü", 64) + "x", false}} {
		v, ok := pc.v, pc.ok
		cases = append(cases, cmdCase{"process_id " + trunc(v), func(h *harness, i int) *fsmpb.Command { return cLease("ns", lid(1000+i), v, 10) }, ok, "process_id"})
	}
	// lease ids, on every command that carries one
	for _, lc := range []struct {
		v  string
		ok bool
	}{
		{"ls_" + strings.Repeat("a", 19), false}, {"ls_" + strings.Repeat("Z", 61), true}, {"ls_" + strings.Repeat("Z", 62), false},
		{"ls_" + strings.Repeat("a", 19) + "-", false}, {"lx_" + strings.Repeat("a", 20), false}, {"", false}, {"ls_" + strings.Repeat("a", 19) + "_", false},
	} {
		v, ok := lc.v, lc.ok
		cases = append(cases, cmdCase{"create lease id " + trunc(v), func(h *harness, i int) *fsmpb.Command { return cLease("ns", v, "p", 10) }, ok, "lease_id"})
		if !ok {
			cases = append(cases,
				cmdCase{"acquire lease id " + trunc(v), func(h *harness, i int) *fsmpb.Command { return cAcq("ns", "s", v, 1) }, false, "lease_id"},
				cmdCase{"release lease id " + trunc(v), func(h *harness, i int) *fsmpb.Command { return cRel("ns", "s", v) }, false, "lease_id"},
				cmdCase{"refresh lease id " + trunc(v), func(h *harness, i int) *fsmpb.Command { return cRefresh("ns", v, 10) }, false, "lease_id"},
				cmdCase{"revoke lease id " + trunc(v), func(h *harness, i int) *fsmpb.Command { return cRevoke("ns", v) }, false, "lease_id"},
			)
		}
	}

	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t)
			h.ok(cNS("ns"))
			h.ok(cSem("ns", "s", 100))
			h.ok(cLease("ns", lid(1), "p", 100))
			cmd := c.cmd(h, i)
			if c.ok {
				r := h.ok(cmd)
				for _, g := range r.Grants {
					if !g.Granted {
						t.Fatalf("grant not applied: %+v", g)
					}
				}
				return
			}
			if len(cmd.Grants) > 0 {
				before := dumpState(h.f)
				r := h.ok(cmd)
				if r.Grants[0].Granted {
					t.Fatal("grant with bad input applied")
				}
				expectErr(t, r.Grants[0].Err, CodeInvalidArgument, c.field)
				if dumpState(h.f) != before {
					t.Fatal("a rejected grant changed the state")
				}
				return
			}
			h.fails(cmd, CodeInvalidArgument, c.field)
		})
	}
}

func nm(i int) string {
	return "n" + strings.Repeat("x", i%7) + string(rune('a'+i%26)) + strings.Repeat("0", i/26)
}

func trunc(s string) string {
	if len(s) > 12 {
		return s[:12] + "..." + string(rune('0'+len(s)%10))
	}
	return s
}

func nsVersion(h *harness) int64 {
	n, err := h.f.GetNamespace("ns")
	if err != nil {
		h.t.Fatal(err)
	}
	return n.Version
}

func semVersion(h *harness) int64 {
	s, err := h.f.GetSemaphore("ns", "s", h.now)
	if err != nil {
		h.t.Fatal(err)
	}
	return s.Version
}
