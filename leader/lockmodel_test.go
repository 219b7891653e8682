package leader

import (
	"fmt"
	"math/rand"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/grackle-coord/grackle/apierr"
	"github.com/grackle-coord/grackle/fsm"
	fsmpb "github.com/grackle-coord/grackle/proto/grackle/fsm/v1"
)

// TestLockQueueAgainstModel drives the real state machine and the real lock
// queues with random acquires (both modes, several depths, blocking and
// not), releases, upgrades, downgrades, lease expiries, revokes, deletes
// and waiters giving up, one step at a time, with every grant command the
// queues propose applied before the next step (as the leader's term does,
// in log order). After every step it checks against a brute-force model of
// the contract (API.md, AcquireLock):
//
//   - safety: no two holds conflict (every pair, by the conflict relation);
//   - fairness: no request was granted while an earlier request that
//     conflicts with it (in the model's queue order: arrival, upgrades at
//     the head) still waits;
//   - liveness: every request still waiting conflicts with a holder or
//     with an earlier request still waiting (else it should have been
//     granted by the command that made room);
//   - the queue's order is the model's, and the state machine's
//     invariants hold.
func TestLockQueueAgainstModel(t *testing.T) {
	seeds := 40
	if testing.Short() {
		seeds = 10
	}
	for seed := int64(1); seed <= int64(seeds); seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { runLockModel(t, seed, 400) })
	}
}

var modelNames = []string{"a", "a/b", "a/b/c", "a/d", "a/d/e", "x", "x/y"}

type modelReq struct {
	w             *waiter
	lease, name   string
	excl, upgrade bool
	keeps         bool // a re-acquire in the same mode or a downgrade
}

type lockHarness struct {
	t       *testing.T
	rng     *rand.Rand
	f       *fsm.FSM
	q       *queues
	index   uint64
	now     int64
	pending []pendingGrants
	leases  []string
	nextID  int
	queue   []*modelReq // the model's queue of requests still waiting, in order
	granted int
}

type pendingGrants struct {
	cmd *fsmpb.Command
	ws  []*waiter
}

const modelNS = "m"

func runLockModel(t *testing.T, seed int64, steps int) {
	h := &lockHarness{t: t, rng: rand.New(rand.NewSource(seed)), f: fsm.New(fsm.Options{TempDir: t.TempDir()}), now: 1_000_000_000}
	h.q = newQueues(100, h.f, nopObserver{})
	h.q.proposeGrants = func(cmd *fsmpb.Command, ws []*waiter) bool {
		h.pending = append(h.pending, pendingGrants{cmd, ws})
		return true
	}
	h.apply(&fsmpb.Command{Op: &fsmpb.Command_CreateNamespace{CreateNamespace: &fsmpb.CreateNamespace{Name: modelNS}}})
	for i := 0; i < 4; i++ {
		h.newLease()
	}
	for step := 0; step < steps; step++ {
		before := h.snapshotQueue()
		what := h.step()
		h.drain()
		h.check(step, what, before)
	}
	if h.granted == 0 {
		t.Fatal("nothing was ever granted: the test tests nothing")
	}
}

func (h *lockHarness) apply(cmd *fsmpb.Command) *fsm.Result {
	h.index++
	h.now += int64(time.Millisecond)
	cmd.Now = h.now
	res := h.f.ApplyCommand(h.index, cmd)
	if res.Err != nil && res.Err.Code == fsm.CodeInternal {
		h.t.Fatalf("internal error: %v", res.Err)
	}
	h.q.observe(res)
	return res
}

// drain applies the grant commands the queues proposed, in order, until
// none is left (each may lead to more).
func (h *lockHarness) drain() {
	for len(h.pending) > 0 {
		p := h.pending[0]
		h.pending = h.pending[1:]
		res := h.apply(p.cmd)
		h.q.settle(p.ws, res)
	}
}

func (h *lockHarness) newLease() string {
	h.nextID++
	id := fmt.Sprintf("ll_%020d", h.nextID)
	res := h.apply(&fsmpb.Command{Op: &fsmpb.Command_CreateLease{CreateLease: &fsmpb.CreateLease{NamespaceName: modelNS, LeaseId: id, ProcessId: "p", TtlSeconds: 100}}})
	if res.Err != nil {
		h.t.Fatal(res.Err)
	}
	h.leases = append(h.leases, id)
	return id
}

func (h *lockHarness) dropLease(id string) {
	for i, l := range h.leases {
		if l == id {
			h.leases = append(h.leases[:i], h.leases[i+1:]...)
			break
		}
	}
	h.newLease()
}

func (h *lockHarness) pick(xs []string) string { return xs[h.rng.Intn(len(xs))] }

// heldLocks lists (lease, lock) of every hold.
func (h *lockHarness) holds() [][2]string {
	var out [][2]string
	for _, l := range h.leases {
		for _, n := range h.f.LeaseLocks(modelNS, l) {
			out = append(out, [2]string{l, n})
		}
	}
	return out
}

func (h *lockHarness) step() string {
	switch r := h.rng.Intn(100); {
	case r < 55:
		return h.acquire()
	case r < 75:
		hs := h.holds()
		if len(hs) == 0 {
			return h.acquire()
		}
		x := hs[h.rng.Intn(len(hs))]
		cmd := &fsmpb.Command{Op: &fsmpb.Command_ReleaseLock{ReleaseLock: &fsmpb.ReleaseLock{NamespaceName: modelNS, LockName: x[1], LeaseId: x[0]}}}
		h.withChanges(cmd, []fsm.LockChange{{Name: x[1], LeaseID: x[0], Gone: true}})
		return "release " + x[1] + " by " + x[0]
	case r < 82:
		// A waiter gives up (its timeout, or its caller left).
		if len(h.queue) == 0 {
			return h.acquire()
		}
		m := h.queue[h.rng.Intn(len(h.queue))]
		h.q.stop(m.w)
		return "stop " + m.name + " of " + m.lease
	case r < 88:
		l := h.pick(h.leases)
		var ch []fsm.LockChange
		for _, n := range h.f.LeaseLocks(modelNS, l) {
			ch = append(ch, fsm.LockChange{Name: n, LeaseID: l, Gone: true})
		}
		h.withChanges(&fsmpb.Command{Op: &fsmpb.Command_RevokeLease{RevokeLease: &fsmpb.RevokeLease{NamespaceName: modelNS, LeaseId: l}}}, ch)
		h.dropLease(l)
		return "revoke " + l
	case r < 94:
		// Expiry: every other lease refreshed, then time passes this one's
		// expires_at and the leader reaps it (no hand-off attached: the
		// queues pump after the result).
		l := h.pick(h.leases)
		for _, o := range h.leases {
			if o != l {
				h.apply(&fsmpb.Command{Op: &fsmpb.Command_RefreshLease{RefreshLease: &fsmpb.RefreshLease{NamespaceName: modelNS, LeaseId: o, TtlSeconds: 300}}})
			}
		}
		if ll, err := h.f.GetLockLease(modelNS, l, h.now); err == nil {
			h.now = max(h.now, ll.ExpiresAt)
		}
		// As the expiry loop does: the grants the reaped leases make room
		// for ride in the expiry's entry (the command applies at a later
		// now, so at least these leases go).
		cmd := &fsmpb.Command{Op: &fsmpb.Command_ExpireLeases{ExpireLeases: &fsmpb.ExpireLeases{}}}
		var ws []*waiter
		_, locks := h.f.Expiring(h.now, 0)
		for ns, changes := range locks {
			ws = append(ws, h.q.attachLocks(cmd, ns, changes)...)
		}
		res := h.apply(cmd)
		if len(ws) > 0 {
			h.q.settle(ws, res)
		}
		for _, o := range append([]string(nil), h.leases...) {
			if _, err := h.f.GetLockLease(modelNS, o, h.now); err != nil {
				h.dropLease(o)
			}
		}
		return "expire " + l
	default:
		n := h.pick(modelNames)
		var ch []fsm.LockChange
		for _, l := range h.f.LockHolderLeases(modelNS, n) {
			ch = append(ch, fsm.LockChange{Name: n, LeaseID: l, Gone: true})
		}
		h.withChanges(&fsmpb.Command{Op: &fsmpb.Command_DeleteLock{DeleteLock: &fsmpb.DeleteLock{NamespaceName: modelNS, LockName: n}}}, ch)
		return "delete " + n
	}
}

// withChanges proposes a command that makes room, with the grants it
// attaches (Term.withLockHandOff).
func (h *lockHarness) withChanges(cmd *fsmpb.Command, changes []fsm.LockChange) {
	var ws []*waiter
	if len(changes) > 0 {
		ws = h.q.attachLocks(cmd, modelNS, changes)
	}
	res := h.apply(cmd)
	if len(ws) > 0 {
		h.q.settle(ws, res)
	}
}

func (h *lockHarness) acquire() string {
	l, n := h.pick(h.leases), h.pick(modelNames)
	excl := h.rng.Intn(2) == 0
	timeout := time.Hour
	if h.rng.Intn(5) == 0 {
		timeout = 0
	}
	held, heldExcl := h.f.LockHeld(modelNS, n, l)
	m := &modelReq{lease: l, name: n, excl: excl, upgrade: held && !heldExcl && excl, keeps: h.covered(l, n, excl)}
	// The model: a newer request of the lease on the lock supersedes one
	// that waits; a second upgrader is refused.
	wantRefused := false
	for _, o := range h.queue {
		if m.upgrade && o.upgrade && o.lease != l && fsm.LocksConflict(o.lease, o.name, true, l, n, true) {
			wantRefused = true
		}
	}
	w := newWaiter(fsm.SemKey{Namespace: modelNS}, l, 0, nil, timeout, h.now)
	w.lock = &lockWant{name: n, excl: excl, upgrade: m.upgrade, covered: h.f.LockCovered(modelNS, n, l, excl)}
	if w.lock.covered != m.keeps {
		h.t.Fatalf("LockCovered(%s, %s, %v) = %v, model %v", n, l, excl, w.lock.covered, m.keeps)
	}
	m.w = w
	behind, err := h.q.enqueue(w)
	if wantRefused != (err != nil) {
		var dump []string
		for _, ws := range h.q.byTree {
			for _, x := range ws {
				dump = append(dump, fmt.Sprintf("%s %v %s up=%v %v", x.lock.name, x.lock.excl, x.leaseID[len(x.leaseID)-2:], x.lock.upgrade, x.state))
			}
		}
		h.t.Fatalf("acquire %s by %s (upgrade %v): refused %v, model says %v (model %s; queues %v)", n, l, m.upgrade, err, wantRefused, describeQueue(h.queue), dump)
	}
	if err != nil {
		if le, ok := err.(*Error); !ok || le.Code != codes.FailedPrecondition || le.Reason != apierr.UpgradeConflict {
			h.t.Fatalf("refused with %v (model %s)", err, describeQueue(h.queue))
		}
		return "refused upgrade " + n
	}
	// Superseded requests leave the model's queue.
	kept := h.queue[:0]
	for _, o := range h.queue {
		if !(o.lease == l && o.name == n) {
			kept = append(kept, o)
		}
	}
	h.queue = kept
	if m.upgrade {
		i := 0
		for i < len(h.queue) && h.queue[i].upgrade {
			i++
		}
		h.queue = append(h.queue[:i], append([]*modelReq{m}, h.queue[i:]...)...)
	} else {
		h.queue = append(h.queue, m)
	}
	cmd := &fsmpb.Command{Op: &fsmpb.Command_AcquireLock{AcquireLock: &fsmpb.AcquireLock{Queued: behind,
		Grant: &fsmpb.LockGrant{NamespaceName: modelNS, LockName: n, LeaseId: l, Exclusive: excl}}}}
	var ws []*waiter
	if held && heldExcl && !excl {
		ws = h.q.attachLocks(cmd, modelNS, []fsm.LockChange{{Name: n, LeaseID: l}})
	}
	res := h.apply(cmd)
	h.q.acquired(w, res, nil, timeout == 0)
	if len(ws) > 0 {
		h.q.settle(ws, res)
	}
	return fmt.Sprintf("acquire %s by %s excl=%v upgrade=%v timeout=%v", n, l, excl, m.upgrade, timeout)
}

// covered: the model's rule of a request that waits for no one: the lease
// holds the lock or an ancestor, exclusive or (for a shared request) shared.
func (h *lockHarness) covered(lease, name string, excl bool) bool {
	for _, x := range h.holds() {
		if x[0] != lease || (x[1] != name && !fsm.IsAncestor(x[1], name)) {
			continue
		}
		if _, hx := h.f.LockHeld(modelNS, x[1], lease); hx || !excl {
			return true
		}
	}
	return false
}

func conflicts(a, b *modelReq) bool {
	return fsm.LocksConflict(a.lease, a.name, a.excl, b.lease, b.name, b.excl)
}

func (h *lockHarness) snapshotQueue() []*modelReq { return append([]*modelReq(nil), h.queue...) }

func (h *lockHarness) check(step int, what string, before []*modelReq) {
	t := h.t
	fail := func(format string, a ...any) {
		t.Helper()
		t.Fatalf("step %d (%s): %s", step, what, fmt.Sprintf(format, a...))
	}
	if err := h.f.CheckInvariants(); err != nil {
		fail("invariants: %v", err)
	}
	// Who ended this step, and how.
	var grantedNow []*modelReq
	still := h.queue[:0]
	for _, m := range h.queue {
		select {
		case o := <-m.w.done:
			if o.Granted {
				grantedNow = append(grantedNow, m)
				h.granted++
			}
		default:
			still = append(still, m)
		}
	}
	h.queue = still
	// Safety: no two holds conflict.
	var holds []*modelReq
	for _, x := range h.holds() {
		_, excl := h.f.LockHeld(modelNS, x[1], x[0])
		holds = append(holds, &modelReq{lease: x[0], name: x[1], excl: excl})
	}
	for i, a := range holds {
		for _, b := range holds[i+1:] {
			if conflicts(a, b) {
				fail("conflicting holds: %s %v by %s and %s %v by %s", a.name, a.excl, a.lease, b.name, b.excl, b.lease)
			}
		}
	}
	// Fairness: nothing granted over an earlier conflicting request that
	// still waits (a holder's re-acquire or downgrade is not a new grant).
	for _, g := range grantedNow {
		if g.keeps {
			continue
		}
		for _, e := range h.queue {
			if e == g {
				break
			}
			if idx(before, e) >= 0 && idx(before, e) < idx(before, g) && conflicts(e, g) {
				fail("%s %v by %s granted while earlier %s %v by %s waits", g.name, g.excl, g.lease, e.name, e.excl, e.lease)
			}
		}
	}
	// Liveness: every waiting request is blocked by a holder or by an
	// earlier waiting request.
	for i, w := range h.queue {
		blocked := false
		for _, hd := range holds {
			if conflicts(w, hd) {
				blocked = true
				break
			}
		}
		for _, e := range h.queue[:i] {
			if !blocked && conflicts(e, w) {
				blocked = true
			}
		}
		if !blocked {
			var dump []string
			for _, ws := range h.q.byTree {
				for _, x := range ws {
					dump = append(dump, fmt.Sprintf("%s %v %s %v", x.lock.name, x.lock.excl, x.leaseID[len(x.leaseID)-2:], x.state))
				}
			}
			fail("%s %v by %s waits though nothing blocks it (queue %s; queues %v; holds %d)", w.name, w.excl, w.lease, describeQueue(h.queue), dump, len(holds))
		}
	}
	// The queues' order is the model's.
	var got, want []string
	for _, ws := range h.q.byTree {
		for _, w := range ws {
			if w.state != Done {
				got = append(got, w.leaseID+" "+w.lock.name)
			}
		}
	}
	for _, m := range h.queue {
		want = append(want, m.lease+" "+m.name)
	}
	if !sameOrderWithinTrees(got, want) {
		fail("queue %v, model %v", got, want)
	}
}

func idx(q []*modelReq, m *modelReq) int {
	for i, x := range q {
		if x == m {
			return i
		}
	}
	return -1
}

func describeQueue(q []*modelReq) string {
	var b strings.Builder
	for _, m := range q {
		fmt.Fprintf(&b, "[%s %v %s up=%v] ", m.name, m.excl, m.lease[len(m.lease)-2:], m.upgrade)
	}
	return b.String()
}

// sameOrderWithinTrees: the same entries, in the same relative order within
// each tree (the queues keep one list per tree; the model one list).
func sameOrderWithinTrees(got, want []string) bool {
	if len(got) != len(want) {
		return false
	}
	tree := func(e string) string {
		n := e[strings.IndexByte(e, ' ')+1:]
		if i := strings.IndexByte(n, '/'); i >= 0 {
			return n[:i]
		}
		return n
	}
	per := func(xs []string) map[string][]string {
		m := map[string][]string{}
		for _, x := range xs {
			m[tree(x)] = append(m[tree(x)], x)
		}
		return m
	}
	g, w := per(got), per(want)
	for k, v := range w {
		if strings.Join(v, ",") != strings.Join(g[k], ",") {
			return false
		}
	}
	return true
}

// The conflict relation itself (API.md, AcquireLock rule 1).
func TestLocksConflictRelation(t *testing.T) {
	for _, c := range []struct {
		a, b       string
		ea, eb     bool
		sameLease  bool
		wantResult bool
	}{
		{"a", "a", true, false, false, true},
		{"a", "a", false, false, false, false},
		{"a", "a/b", false, true, false, true},
		{"a/b", "a", true, false, false, true},
		{"a", "ab", true, true, false, false},
		{"a", "a-b", true, true, false, false},
		{"a/b", "a/c", true, true, false, false},
		{"a", "a/b/c", true, true, true, false},
	} {
		lb := "L2"
		if c.sameLease {
			lb = "L1"
		}
		if got := fsm.LocksConflict("L1", c.a, c.ea, lb, c.b, c.eb); got != c.wantResult {
			t.Errorf("%s %v vs %s %v (same lease %v): %v", c.a, c.ea, c.b, c.eb, c.sameLease, got)
		}
	}
}
