package fsm

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	fsmpb "github.com/grackle-coord/grackle/proto/grackle/fsm/v1"
)

// ---- a test harness: one FSM, a raft index and a leader clock ----

const (
	sec   = int64(1_000_000_000)
	epoch = 1_700_000_000 * sec // an arbitrary, realistic start time
)

type harness struct {
	t   testing.TB
	f   *FSM
	idx uint64
	now int64
	// check runs CheckInvariants after every command (on by default).
	check bool
	// record keeps a copy of every command applied, as stamped, in log.
	record bool
	log    []*fsmpb.Command
}

func newHarness(t testing.TB) *harness {
	t.Helper()
	return &harness{t: t, f: New(Options{TempDir: t.TempDir()}), now: epoch, check: true}
}

// advance moves the leader clock forward.
func (h *harness) advance(d int64) { h.now += d }

// apply stamps the command with the next index and the harness clock.
func (h *harness) apply(c *fsmpb.Command) *Result {
	h.t.Helper()
	h.idx++
	c.Now = h.now
	if h.record {
		h.log = append(h.log, proto.Clone(c).(*fsmpb.Command))
	}
	r := h.f.ApplyCommand(h.idx, c)
	if r == nil {
		h.t.Fatalf("index %d: nil result", h.idx)
	}
	if r.Index != h.idx {
		h.t.Fatalf("result index %d, want %d", r.Index, h.idx)
	}
	if h.check {
		if err := h.f.CheckInvariants(); err != nil {
			h.t.Fatalf("invariants after index %d (%s): %v", h.idx, opName(c), err)
		}
	}
	return r
}

// ok applies a command that must succeed.
func (h *harness) ok(c *fsmpb.Command) *Result {
	h.t.Helper()
	r := h.apply(c)
	if r.Err != nil {
		h.t.Fatalf("%s: unexpected error %v", opName(c), r.Err)
	}
	return r
}

// fails applies a command that must fail with code and a message that
// contains every one of substrs; it also checks that the failure changed
// nothing at all (it moves the clock first, so a timestamp write shows).
func (h *harness) fails(c *fsmpb.Command, code Code, substrs ...string) *Result {
	h.t.Helper()
	before := dumpState(h.f)
	h.advance(1_000_000) // so that a stray timestamp write shows
	r := h.apply(c)
	expectErr(h.t, r.Err, code, substrs...)
	if after := dumpState(h.f); after != before {
		h.t.Fatalf("%s failed with %v but changed the state:\n--- before\n%s--- after\n%s", opName(c), r.Err, before, after)
	}
	return r
}

func expectErr(t testing.TB, err *Error, code Code, substrs ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("want %v error, got none", code)
	}
	if err.Code != code {
		t.Fatalf("want %v error, got %v", code, err)
	}
	for _, s := range substrs {
		if !strings.Contains(err.Msg, s) {
			t.Fatalf("error %q does not mention %q", err.Msg, s)
		}
	}
}

// expectCode checks an error returned by a read.
func expectCode(t testing.TB, err error, code Code, substrs ...string) {
	t.Helper()
	var fe *Error
	if !errors.As(err, &fe) {
		t.Fatalf("want %v error, got %v", code, err)
	}
	expectErr(t, fe, code, substrs...)
}

func opName(c *fsmpb.Command) string {
	if c.GetOp() == nil {
		return fmt.Sprintf("(no op, %d grants)", len(c.GetGrants()))
	}
	return strings.TrimPrefix(fmt.Sprintf("%T", c.GetOp()), "*fsmpb.Command_")
}

// ---- command builders ----

var lids [64]string

func init() {
	for i := range lids {
		lids[i] = fmt.Sprintf("ls_%020d", i)
	}
}

func lid(i int) string {
	if i >= 0 && i < len(lids) {
		return lids[i]
	}
	return fmt.Sprintf("ls_%020d", i)
}

func md(kv ...string) map[string]string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

func cNS(name string) *fsmpb.Command { return cNSFull(name, "", nil) }

func cNSFull(name, desc string, m map[string]string) *fsmpb.Command {
	return &fsmpb.Command{Op: &fsmpb.Command_CreateNamespace{CreateNamespace: &fsmpb.CreateNamespace{Name: name, Description: desc, Metadata: m}}}
}

func cNSUpdate(name, desc string, m map[string]string, ver int64) *fsmpb.Command {
	return &fsmpb.Command{Op: &fsmpb.Command_UpdateNamespace{UpdateNamespace: &fsmpb.UpdateNamespace{Name: name, Description: desc, Metadata: m, ExpectedVersion: ver}}}
}

func cNSDelete(name string) *fsmpb.Command {
	return &fsmpb.Command{Op: &fsmpb.Command_DeleteNamespace{DeleteNamespace: &fsmpb.DeleteNamespace{Name: name}}}
}

func cSem(ns, name string, permits int64) *fsmpb.Command { return cSemFull(ns, name, "", permits, nil) }

func cSemFull(ns, name, desc string, permits int64, m map[string]string) *fsmpb.Command {
	return &fsmpb.Command{Op: &fsmpb.Command_CreateSemaphore{CreateSemaphore: &fsmpb.CreateSemaphore{NamespaceName: ns, Name: name, Description: desc, Permits: permits, Metadata: m}}}
}

func cSemUpdate(ns, name, desc string, permits int64, m map[string]string, ver int64) *fsmpb.Command {
	return &fsmpb.Command{Op: &fsmpb.Command_UpdateSemaphore{UpdateSemaphore: &fsmpb.UpdateSemaphore{NamespaceName: ns, Name: name, Description: desc, Permits: permits, Metadata: m, ExpectedVersion: ver}}}
}

func cSemDelete(ns, name string) *fsmpb.Command {
	return &fsmpb.Command{Op: &fsmpb.Command_DeleteSemaphore{DeleteSemaphore: &fsmpb.DeleteSemaphore{NamespaceName: ns, Name: name}}}
}

func grant(ns, sem, lease string, w int64) *fsmpb.Grant {
	return &fsmpb.Grant{NamespaceName: ns, SemaphoreName: sem, LeaseId: lease, Weight: w}
}

func cAcq(ns, sem, lease string, w int64) *fsmpb.Command {
	return cAcqFull(ns, sem, lease, w, false, nil)
}

func cAcqQ(ns, sem, lease string, w int64) *fsmpb.Command {
	return cAcqFull(ns, sem, lease, w, true, nil)
}

func cAcqFull(ns, sem, lease string, w int64, queued bool, m map[string]string) *fsmpb.Command {
	g := grant(ns, sem, lease, w)
	g.Metadata = m
	return &fsmpb.Command{Op: &fsmpb.Command_Acquire{Acquire: &fsmpb.Acquire{Grant: g, Queued: queued}}}
}

func cRel(ns, sem, lease string) *fsmpb.Command {
	return &fsmpb.Command{Op: &fsmpb.Command_Release{Release: &fsmpb.Release{NamespaceName: ns, SemaphoreName: sem, LeaseId: lease}}}
}

func cLease(ns, id, proc string, ttl int64) *fsmpb.Command {
	return &fsmpb.Command{Op: &fsmpb.Command_CreateLease{CreateLease: &fsmpb.CreateLease{NamespaceName: ns, LeaseId: id, ProcessId: proc, TtlSeconds: ttl}}}
}

func cRefresh(ns, id string, ttl int64) *fsmpb.Command {
	return &fsmpb.Command{Op: &fsmpb.Command_RefreshLease{RefreshLease: &fsmpb.RefreshLease{NamespaceName: ns, LeaseId: id, TtlSeconds: ttl}}}
}

func cRevoke(ns, id string) *fsmpb.Command {
	return &fsmpb.Command{Op: &fsmpb.Command_RevokeLease{RevokeLease: &fsmpb.RevokeLease{NamespaceName: ns, LeaseId: id}}}
}

func cExpire(max int32) *fsmpb.Command {
	return &fsmpb.Command{Op: &fsmpb.Command_ExpireLeases{ExpireLeases: &fsmpb.ExpireLeases{Max: max}}}
}

func cExtend(ns int64) *fsmpb.Command {
	return &fsmpb.Command{Op: &fsmpb.Command_ExtendLeases{ExtendLeases: &fsmpb.ExtendLeases{ExtendNs: ns}}}
}

func cLimits(l Limits) *fsmpb.Command {
	return &fsmpb.Command{Op: &fsmpb.Command_SetLimits{SetLimits: limitsProto(l)}}
}

func cNoop() *fsmpb.Command { return &fsmpb.Command{Op: &fsmpb.Command_Noop{Noop: &fsmpb.Noop{}}} }

func cGrants(gs ...*fsmpb.Grant) *fsmpb.Command { return &fsmpb.Command{Grants: gs} }

func withGrants(c *fsmpb.Command, gs ...*fsmpb.Grant) *fsmpb.Command {
	c.Grants = append(c.Grants, gs...)
	return c
}

func mustEncode(t testing.TB, c *fsmpb.Command) []byte {
	t.Helper()
	b, err := Encode(c)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// ---- state inspection ----

// dumpState renders every stored record and counter except lastIndex and
// lastNow (which every applied entry may move), in a canonical order, so
// that a test can assert that a command changed nothing.
func dumpState(f *FSM) string {
	s, done := f.read()
	defer done()
	var b strings.Builder
	fmt.Fprintf(&b, "token=%d seq=%d limits=%+v\n", s.lastToken, s.holdSeq, s.limits)
	s.namespaces.Scan(func(n nsRec) bool {
		fmt.Fprintf(&b, "ns %q desc=%q md=%s v=%d c=%d u=%d sems=%d leases=%d\n", n.name, n.desc, mdString(n.md), n.version, n.createdAt, n.updatedAt, n.semCount, n.leaseCount)
		return true
	})
	s.semaphores.Scan(func(x semRec) bool {
		fmt.Fprintf(&b, "sem %q/%q desc=%q md=%s permits=%d v=%d c=%d u=%d act=%d holds=%d holders=%d\n", x.ns, x.name, x.desc, mdString(x.md), x.permits, x.version, x.createdAt, x.updatedAt, x.lastActivity, x.holds, x.holders)
		return true
	})
	s.leases.Scan(func(l leaseRec) bool {
		fmt.Fprintf(&b, "lease %q/%q proc=%q ttl=%d c=%d exp=%d\n", l.ns, l.id, l.proc, l.ttl, l.createdAt, l.expiresAt)
		return true
	})
	s.holders.Scan(func(h *holderRec) bool {
		fmt.Fprintf(&b, "holder %q/%q seq=%d lease=%q w=%d locked=%d token=%d md=%s\n", h.ns, h.sem, h.seq, h.lease.id, h.weight, h.lockedAt, h.token, mdString(h.md))
		return true
	})
	s.members.Scan(func(m memberRec) bool {
		fmt.Fprintf(&b, "member %q %q %q\n", m.id, m.raftAddr, m.grpcAddr)
		return true
	})
	dumpWaits(&b, s)
	fmt.Fprintf(&b, "acl_bootstrapped=%v\n", s.aclBootstrapped)
	s.tokens.Scan(func(t tokenRec) bool {
		fmt.Fprintf(&b, "token %q hash=%x role=%q ns=%q desc=%q c=%d\n", t.id, t.hash, t.role, t.ns, t.desc, t.createdAt)
		return true
	})
	return b.String()
}

func mdString(m map[string]string) string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	var b strings.Builder
	b.WriteByte('{')
	for i, k := range ks {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%q:%q", k, m[k])
	}
	b.WriteByte('}')
	return b.String()
}

func snapshotBytes(t testing.TB, f *FSM) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := f.WriteSnapshot(&buf); err != nil {
		t.Fatalf("WriteSnapshot: %v", err)
	}
	return buf.Bytes()
}

func restoreBytes(f *FSM, b []byte) error { return f.Restore(io.NopCloser(bytes.NewReader(b))) }

// resultString renders a Result canonically (views as deterministic proto
// bytes), so that two results can be compared for equality.
func resultString(r *Result) string {
	if r == nil {
		return "<nil>"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "idx=%d err=%v rejected=%v acq=%v ", r.Index, r.Err, r.Rejected, r.Acquired)
	for _, m := range []proto.Message{r.Namespace, r.Semaphore, r.Lease, r.Holder} {
		b.WriteString(protoString(m))
		b.WriteByte(' ')
	}
	for _, g := range r.Grants {
		fmt.Fprintf(&b, "grant(%v,%v,%s,%s) ", g.Granted, g.Err, protoString(g.Semaphore), protoString(g.Holder))
	}
	fmt.Fprintf(&b, "freed=%v rl=%v rs=%v rn=%q", r.Freed, r.RemovedLeases, r.RemovedSemaphores, r.RemovedNamespace)
	for _, m := range []proto.Message{r.LockLease, r.Lock, r.LockHolder} {
		b.WriteByte(' ')
		b.WriteString(protoString(m))
	}
	fmt.Fprintf(&b, " released=%v reason=%v blocking=%v freedLocks=%v", r.Released, r.LockReason, r.BlockingLocks, r.FreedLocks)
	fmt.Fprintf(&b, " wg=%s bar=%s newJobs=%d allArrived=%v existed=%v woken=%v", protoString(r.WaitGroup), protoString(r.Barrier), r.NewJobs, r.AllArrived, r.Existed, r.Woken)
	if r.Err != nil {
		fmt.Fprintf(&b, " reason=%q meta=%v", r.Err.Reason, r.Err.Meta)
	}
	for _, g := range r.LockGrants {
		fmt.Fprintf(&b, " lockgrant(%v,%v,%s,%s)", g.Granted, g.Err, protoString(g.Lock), protoString(g.Holder))
	}
	for _, sub := range r.Batch {
		b.WriteString(" [" + resultString(sub) + "]")
	}
	return b.String()
}

func protoString(m proto.Message) string {
	if m == nil || !m.ProtoReflect().IsValid() {
		return "-"
	}
	raw, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		return "marshal error: " + err.Error()
	}
	return fmt.Sprintf("%x", raw)
}

func semKeys(ks ...string) []SemKey {
	var out []SemKey
	for i := 0; i+1 < len(ks); i += 2 {
		out = append(out, SemKey{ks[i], ks[i+1]})
	}
	return out
}

var activityRE = regexp.MustCompile(`act=-?[0-9]+`)

// dumpWaits renders the wait-group and barrier tables and their derived
// indexes (timers, arrivals by process, counts per namespace) for
// dumpState.
func dumpWaits(b *strings.Builder, s *state) {
	s.waitGroups.Scan(func(w wgRec) bool {
		fmt.Fprintf(b, "wg %q/%q desc=%q md=%s counter=%d completed=%d status=%v exp=%d keep=%d fin=%d v=%d c=%d u=%d act=%d\n",
			w.ns, w.name, w.desc, mdString(w.md), w.counter, w.completed, w.status, w.expiresAt, w.deleteAfter, w.finishedAt,
			w.version, w.createdAt, w.updatedAt, w.lastActivity)
		return true
	})
	s.jobs.Scan(func(j jobRec) bool {
		fmt.Fprintf(b, "job %q/%q/%q at=%d md=%s\n", j.ns, j.wg, j.id, j.completedAt, mdString(j.md))
		return true
	})
	s.barriers.Scan(func(x barRec) bool {
		fmt.Fprintf(b, "bar %q/%q desc=%q md=%s expected=%d arrived=%d gen=%d keep=%d v=%d c=%d u=%d act=%d\n",
			x.ns, x.name, x.desc, mdString(x.md), x.expected, x.arrived, x.generation, x.deleteInactive, x.version, x.createdAt, x.updatedAt, x.lastActivity)
		return true
	})
	s.arrivals.Scan(func(r arrivalRec) bool {
		fmt.Fprintf(b, "arrival %q/%q gen=%d seq=%d proc=%q at=%d md=%s\n", r.ns, r.bar, r.gen, r.seq, r.proc, r.arrivedAt, mdString(r.md))
		return true
	})
	s.timers.Scan(func(t timerKey) bool {
		fmt.Fprintf(b, "timer at=%d kind=%d %q/%q\n", t.at, t.kind, t.ns, t.name)
		return true
	})
	var arrived []string
	for k := range s.arrived {
		arrived = append(arrived, fmt.Sprintf("arrived %q/%q gen=%d proc=%q\n", k.ns, k.bar, k.gen, k.proc))
	}
	sort.Strings(arrived)
	b.WriteString(strings.Join(arrived, ""))
	var counts []string
	for ns, c := range s.waitCount {
		counts = append(counts, fmt.Sprintf("waitcount %q wgs=%d bars=%d\n", ns, c.waitGroups, c.barriers))
	}
	sort.Strings(counts)
	b.WriteString(strings.Join(counts, ""))
}
