package fsm

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	fsmpb "github.com/grackle-coord/grackle/proto/grackle/fsm/v1"
	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
)

// API.md, "Wait groups" and "Barriers": every rule of the two parts, as the
// state machine applies it (fsm/waits.go, waits_read.go).

// ---- command builders ----

func cWG(ns, name string, counter int64) *fsmpb.Command {
	return cWGFull(ns, name, "", counter, 0, 0, nil)
}

func cWGFull(ns, name, desc string, counter, expiresAt, keep int64, m map[string]string) *fsmpb.Command {
	return &fsmpb.Command{Op: &fsmpb.Command_CreateWaitGroup{CreateWaitGroup: &fsmpb.CreateWaitGroup{NamespaceName: ns, Name: name,
		Description: desc, Counter: counter, ExpiresAt: expiresAt, DeleteAfterFinishedSeconds: keep, Metadata: m}}}
}

func cWGUpdate(ns, name, desc string, counter, expiresAt, keep int64, m map[string]string, ver int64) *fsmpb.Command {
	return &fsmpb.Command{Op: &fsmpb.Command_UpdateWaitGroup{UpdateWaitGroup: &fsmpb.UpdateWaitGroup{NamespaceName: ns, Name: name,
		Description: desc, Counter: counter, ExpiresAt: expiresAt, DeleteAfterFinishedSeconds: keep, Metadata: m, ExpectedVersion: ver}}}
}

func cWGDelete(ns, name string) *fsmpb.Command {
	return &fsmpb.Command{Op: &fsmpb.Command_DeleteWaitGroup{DeleteWaitGroup: &fsmpb.DeleteWaitGroup{NamespaceName: ns, Name: name}}}
}

// job is one completion; kv is its metadata.
func job(id string, kv ...string) *fsmpb.JobCompletion {
	j := &fsmpb.JobCompletion{JobId: id}
	if len(kv) > 0 {
		j.Metadata = md(kv...)
	}
	return j
}

func cJobs(ns, name string, jobs ...*fsmpb.JobCompletion) *fsmpb.Command {
	return &fsmpb.Command{Op: &fsmpb.Command_CompleteJobs{CompleteJobs: &fsmpb.CompleteJobs{NamespaceName: ns, Name: name, Jobs: jobs}}}
}

// cDone completes jobs without metadata.
func cDone(ns, name string, ids ...string) *fsmpb.Command {
	var js []*fsmpb.JobCompletion
	for _, id := range ids {
		js = append(js, job(id))
	}
	return cJobs(ns, name, js...)
}

func cBar(ns, name string, expected int64) *fsmpb.Command {
	return cBarFull(ns, name, "", expected, 0, nil)
}

func cBarFull(ns, name, desc string, expected, keep int64, m map[string]string) *fsmpb.Command {
	return &fsmpb.Command{Op: &fsmpb.Command_CreateBarrier{CreateBarrier: &fsmpb.CreateBarrier{NamespaceName: ns, Name: name,
		Description: desc, ExpectedProcesses: expected, DeleteInactiveAfterSeconds: keep, Metadata: m}}}
}

func cBarUpdate(ns, name, desc string, expected, keep int64, m map[string]string, ver int64) *fsmpb.Command {
	return &fsmpb.Command{Op: &fsmpb.Command_UpdateBarrier{UpdateBarrier: &fsmpb.UpdateBarrier{NamespaceName: ns, Name: name,
		Description: desc, ExpectedProcesses: expected, DeleteInactiveAfterSeconds: keep, Metadata: m, ExpectedVersion: ver}}}
}

func cBarDelete(ns, name string) *fsmpb.Command {
	return &fsmpb.Command{Op: &fsmpb.Command_DeleteBarrier{DeleteBarrier: &fsmpb.DeleteBarrier{NamespaceName: ns, Name: name}}}
}

func cArrive(ns, bar, proc string, gen int64) *fsmpb.Command {
	return cArriveMD(ns, bar, proc, gen, nil)
}

func cArriveMD(ns, bar, proc string, gen int64, m map[string]string) *fsmpb.Command {
	return &fsmpb.Command{Op: &fsmpb.Command_ArriveAtBarrier{ArriveAtBarrier: &fsmpb.ArriveAtBarrier{NamespaceName: ns, Name: bar,
		ProcessId: proc, ExpectedGeneration: gen, Metadata: m}}}
}

func cTimers(max int32) *fsmpb.Command {
	return &fsmpb.Command{Op: &fsmpb.Command_ExpireTimers{ExpireTimers: &fsmpb.ExpireTimers{Max: max}}}
}

// ---- harness helpers ----

// same applies a command that must succeed and change nothing at all (a
// retry); like fails, it moves the clock first so a timestamp write shows.
func (h *harness) same(c *fsmpb.Command) *Result {
	h.t.Helper()
	h.advance(1_000_000)
	return h.sameAt(h.now, c)
}

// sameAt is same at exactly the leader's now `at`.
func (h *harness) sameAt(at int64, c *fsmpb.Command) *Result {
	h.t.Helper()
	before := dumpState(h.f)
	h.now = at
	r := h.ok(c)
	if after := dumpState(h.f); after != before {
		h.t.Fatalf("%s changed the state:\n--- before\n%s--- after\n%s", opName(c), before, after)
	}
	return r
}

// failsAt is fails at exactly the leader's now `at` (fails moves the clock
// by a millisecond first, too much for a test of a deadline's edge).
func (h *harness) failsAt(at int64, c *fsmpb.Command, code Code, substrs ...string) *Result {
	h.t.Helper()
	before := dumpState(h.f)
	h.now = at
	r := h.apply(c)
	expectErr(h.t, r.Err, code, substrs...)
	if after := dumpState(h.f); after != before {
		h.t.Fatalf("%s failed with %v but changed the state:\n--- before\n%s--- after\n%s", opName(c), r.Err, before, after)
	}
	return r
}

func (h *harness) wg(ns, name string) *pb.WaitGroup {
	h.t.Helper()
	w, err := h.f.GetWaitGroup(ns, name, h.now)
	if err != nil {
		h.t.Fatalf("GetWaitGroup %s/%s: %v", ns, name, err)
	}
	return w
}

func (h *harness) bar(ns, name string) *pb.Barrier {
	h.t.Helper()
	b, err := h.f.GetBarrier(ns, name)
	if err != nil {
		h.t.Fatalf("GetBarrier %s/%s: %v", ns, name, err)
	}
	return b
}

// jobs lists a group's completed jobs (one page of up to 250).
func (h *harness) jobs(ns, name string) []*pb.WaitGroupJob {
	h.t.Helper()
	p, err := h.f.ListWaitGroupCompletedJobs(ns, name, 250, "", h.now)
	if err != nil {
		h.t.Fatalf("ListWaitGroupCompletedJobs %s/%s: %v", ns, name, err)
	}
	if p.Next != "" {
		h.t.Fatalf("more than 250 jobs in %s/%s", ns, name)
	}
	return p.Items
}

func jobIDs(js []*pb.WaitGroupJob) []string {
	var out []string
	for _, j := range js {
		out = append(out, j.JobId)
	}
	return out
}

// participants lists a generation's participants (0: the current one) and
// the generation listed.
func (h *harness) participants(ns, name string, gen int64) ([]*pb.BarrierParticipant, int64) {
	h.t.Helper()
	p, g, err := h.f.ListBarrierParticipants(ns, name, gen, 250, "")
	if err != nil {
		h.t.Fatalf("ListBarrierParticipants %s/%s gen %d: %v", ns, name, gen, err)
	}
	return p.Items, g
}

func procsOf(ps []*pb.BarrierParticipant) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.ProcessId)
	}
	return out
}

// expectReason checks an error's code, reason and ErrorInfo metadata (kv).
func expectReason(t testing.TB, err error, code Code, reason string, kv ...string) {
	t.Helper()
	fe, ok := err.(*Error)
	if !ok || fe == nil {
		t.Fatalf("want %v %s, got %v", code, reason, err)
	}
	if fe.Code != code || fe.Reason != reason {
		t.Fatalf("want %v %s, got %v (reason %q)", code, reason, fe, fe.Reason)
	}
	for i := 0; i+1 < len(kv); i += 2 {
		if fe.Meta[kv[i]] != kv[i+1] {
			t.Fatalf("error %v: meta %v, want %s=%s", fe, fe.Meta, kv[i], kv[i+1])
		}
	}
}

func wgKey(ns, name string) WaitKey   { return WaitKey{KindWaitGroup, ns, name} }
func barKeyW(ns, name string) WaitKey { return WaitKey{KindBarrier, ns, name} }

func expectWoken(t testing.TB, r *Result, want ...WaitKey) {
	t.Helper()
	if len(want) == 0 && len(r.Woken) == 0 {
		return
	}
	if !reflect.DeepEqual(r.Woken, want) {
		t.Fatalf("Woken %v, want %v", r.Woken, want)
	}
}

func expectNextTimer(t testing.TB, f *FSM, want int64) {
	t.Helper()
	at, ok := f.NextTimer()
	if want == 0 {
		if ok {
			t.Fatalf("NextTimer %d, want none", at)
		}
		return
	}
	if !ok || at != want {
		t.Fatalf("NextTimer %d (%v), want %d", at, ok, want)
	}
}

var (
	wgActive    = pb.WaitGroupStatus_WAIT_GROUP_STATUS_ACTIVE
	wgCompleted = pb.WaitGroupStatus_WAIT_GROUP_STATUS_COMPLETED
	wgExpired   = pb.WaitGroupStatus_WAIT_GROUP_STATUS_EXPIRED
)

// ---- wait groups ----

func TestWaitGroupCreateGet(t *testing.T) {
	h := newHarness(t)
	h.fails(cWG("ns", "g", 1), CodeNotFound, "ns")
	h.ok(cNS("ns"))
	exp := h.now + 60*sec
	r := h.ok(cWGFull("ns", "batch-1", "tonight", 3, exp, 600, md("owner", "ops")))
	w := r.WaitGroup
	want := &pb.WaitGroup{Name: "batch-1", Description: "tonight", Counter: 3, Status: wgActive, ExpiresAt: exp,
		DeleteAfterFinishedSeconds: 600, Metadata: md("owner", "ops"), Version: 1, CreatedAt: h.now, UpdatedAt: h.now, LastActivityAt: h.now}
	if !proto.Equal(w, want) {
		t.Fatalf("create returned %v, want %v", w, want)
	}
	expectWoken(t, r)
	expectNextTimer(t, h.f, exp)
	h.advance(sec)
	if g := h.wg("ns", "batch-1"); !proto.Equal(g, want) {
		t.Fatalf("get %v, want %v", g, want)
	}
	// Views are copies; the command's map is not aliased either.
	g := h.wg("ns", "batch-1")
	g.Metadata["owner"] = "mallory"
	if h.wg("ns", "batch-1").Metadata["owner"] != "ops" {
		t.Fatal("a returned view aliases the stored metadata")
	}
	m := md("k", "v")
	h.ok(cWGFull("ns", "other", "", 1, 0, 0, m))
	m["k"] = "changed"
	if h.wg("ns", "other").Metadata["k"] != "v" {
		t.Fatal("the command's metadata is aliased into the state")
	}
	p, err := h.f.ListWaitGroups("ns", 0, "", h.now)
	if err != nil || len(p.Items) != 2 || p.Items[0].Name != "batch-1" || p.Items[1].Name != "other" || !proto.Equal(p.Items[0], want) {
		t.Fatalf("list: %v %v", p.Items, err)
	}
	h.fails(cWG("ns", "batch-1", 1), CodeAlreadyExists, "batch-1")
	// Missing things.
	_, err = h.f.GetWaitGroup("ns", "missing", h.now)
	expectReason(t, err, CodeNotFound, ReasonWaitGroupNotFound)
	_, err = h.f.ListWaitGroupCompletedJobs("ns", "missing", 0, "", h.now)
	expectReason(t, err, CodeNotFound, ReasonWaitGroupNotFound)
	_, err = h.f.GetWaitGroup("nope", "batch-1", h.now)
	expectReason(t, err, CodeNotFound, ReasonNamespaceNotFound)
	_, err = h.f.ListWaitGroups("nope", 0, "", h.now)
	expectReason(t, err, CodeNotFound, ReasonNamespaceNotFound)
	if ws := h.f.WaitGroupWait("ns", "missing", h.now); ws.Err == nil {
		t.Fatalf("wait state of a missing group: %+v", ws)
	} else {
		expectReason(t, ws.Err, CodeNotFound, ReasonWaitGroupNotFound)
	}
	for _, c := range []*fsmpb.Command{cDone("ns", "missing", "a"), cWGUpdate("ns", "missing", "", 1, 0, 0, nil, 1)} {
		r := h.fails(c, CodeNotFound, "missing")
		expectReason(t, r.Err, CodeNotFound, ReasonWaitGroupNotFound)
	}
	for _, c := range []*fsmpb.Command{cDone("nope", "g", "a"), cWGUpdate("nope", "g", "", 1, 0, 0, nil, 1), cWGDelete("nope", "g")} {
		r := h.fails(c, CodeNotFound, "nope")
		expectReason(t, r.Err, CodeNotFound, ReasonNamespaceNotFound)
	}
}

// Bad input: InvalidArgument naming the field, and nothing changes.
func TestWaitGroupBadInput(t *testing.T) {
	h := newHarness(t)
	h.ok(cNS("ns"))
	h.ok(cWG("ns", "g", 5))
	max := h.f.Limits().MaxWaitGroupCounter
	long := strings.Repeat("a", 129)
	many := map[string]string{}
	for i := 0; i < 33; i++ {
		many[fmt.Sprint("k", i)] = "v"
	}
	// fails applies one millisecond after h.now: that is the command's now.
	next := func() int64 { return h.now + 1_000_000 }
	for _, c := range []struct {
		cmd   func() *fsmpb.Command
		field string
	}{
		{func() *fsmpb.Command { return cWG("ns", "x", 0) }, "counter"},
		{func() *fsmpb.Command { return cWG("ns", "x", -1) }, "counter"},
		{func() *fsmpb.Command { return cWG("ns", "x", max+1) }, "counter"},
		{func() *fsmpb.Command { return cWGFull("ns", "x", "", 1, next(), 0, nil) }, "expires_at"},
		{func() *fsmpb.Command { return cWGFull("ns", "x", "", 1, next()-sec, 0, nil) }, "expires_at"},
		{func() *fsmpb.Command { return cWGFull("ns", "x", "", 1, -1, 0, nil) }, "expires_at"},
		{func() *fsmpb.Command { return cWGFull("ns", "x", "", 1, 0, MaxKeepSeconds+1, nil) }, "delete_after_finished_seconds"},
		{func() *fsmpb.Command { return cWGFull("ns", "x", "", 1, 0, -1, nil) }, "delete_after_finished_seconds"},
		{func() *fsmpb.Command {
			return cWGFull("ns", "x", strings.Repeat("d", MaxDescriptionBytes+1), 1, 0, 0, nil)
		}, "description"},
		{func() *fsmpb.Command { return cWGFull("ns", "x", "", 1, 0, 0, many) }, "metadata"},
		{func() *fsmpb.Command { return cWG("ns", "", 1) }, "wait_group_name"},
		{func() *fsmpb.Command { return cWG("ns", "a b", 1) }, "wait_group_name"},
		{func() *fsmpb.Command { return cWG("ns", "a/b", 1) }, "wait_group_name"},
		{func() *fsmpb.Command { return cWG("ns", "é", 1) }, "wait_group_name"},
		{func() *fsmpb.Command { return cWG("ns", long, 1) }, "wait_group_name"},
		{func() *fsmpb.Command { return cWG("n s", "x", 1) }, "namespace_name"},
		// Updates: the same fields, and expected_version.
		{func() *fsmpb.Command { return cWGUpdate("ns", "g", "", 0, 0, 0, nil, 1) }, "counter"},
		{func() *fsmpb.Command { return cWGUpdate("ns", "g", "", max+1, 0, 0, nil, 1) }, "counter"},
		{func() *fsmpb.Command { return cWGUpdate("ns", "g", "", 5, next(), 0, nil, 1) }, "expires_at"},
		{func() *fsmpb.Command { return cWGUpdate("ns", "g", "", 5, 0, MaxKeepSeconds+1, nil, 1) }, "delete_after_finished_seconds"},
		{func() *fsmpb.Command { return cWGUpdate("ns", "g", "", 5, 0, 0, many, 1) }, "metadata"},
		{func() *fsmpb.Command { return cWGUpdate("ns", "g", "", 5, 0, 0, nil, 0) }, "expected_version"},
		{func() *fsmpb.Command { return cWGUpdate("ns", "a b", "", 5, 0, 0, nil, 1) }, "wait_group_name"},
		// Completions: 1..MaxJobsPerCall jobs, job ids like names.
		{func() *fsmpb.Command { return cDone("ns", "g") }, "jobs"},
		{func() *fsmpb.Command { return cDone("ns", "g", "ok", "") }, "jobs[1].job_id"},
		{func() *fsmpb.Command { return cDone("ns", "g", "a b") }, "jobs[0].job_id"},
		{func() *fsmpb.Command { return cDone("ns", "g", "a/b") }, "jobs[0].job_id"},
		{func() *fsmpb.Command { return cDone("ns", "g", "ok", "x", long) }, "jobs[2].job_id"},
		{func() *fsmpb.Command { return cJobs("ns", "g", &fsmpb.JobCompletion{JobId: "ok", Metadata: many}) }, "jobs[0].metadata"},
		{func() *fsmpb.Command { return cDone("ns", "a b", "ok") }, "wait_group_name"},
		{func() *fsmpb.Command { return cWGDelete("ns", "a b") }, "wait_group_name"},
	} {
		h.fails(c.cmd(), CodeInvalidArgument, c.field)
	}
	// 101 jobs (one past MaxJobsPerCall), on a group whose counter has room.
	h.ok(cWG("ns", "big", max))
	var ids []string
	for i := 0; i <= 100; i++ {
		ids = append(ids, fmt.Sprintf("job-%03d", i))
	}
	h.fails(cDone("ns", "big", ids...), CodeInvalidArgument, "jobs", "101")
	if w := h.wg("ns", "big"); w.CompletedJobs != 0 || len(h.jobs("ns", "big")) != 0 {
		t.Fatalf("a refused batch completed jobs: %v", w)
	}
	// The boundaries are accepted.
	if r := h.ok(cDone("ns", "big", ids[:100]...)); r.NewJobs != 100 {
		t.Fatalf("100 jobs: %d new", r.NewJobs)
	}
	h.ok(cDone("ns", "big", strings.Repeat("j", 128), "-_09azAZ"))
	h.ok(cWGFull("ns", strings.Repeat("w", 128), "", 1, h.now+1, MaxKeepSeconds, nil)) // expires_at one nanosecond after now
}

// Completion is idempotent per job_id: a retried batch succeeds (also
// once the group is COMPLETED), a job twice in one batch counts once, the
// first metadata stays.
func TestWaitGroupCompleteIdempotent(t *testing.T) {
	h := newHarness(t)
	h.ok(cNS("ns"))
	h.ok(cWG("ns", "g", 4))
	h.advance(sec)
	t1 := h.now
	r := h.ok(cJobs("ns", "g", job("a", "try", "1"), job("b", "try", "1"), job("a", "try", "2")))
	if r.NewJobs != 2 || r.WaitGroup.CompletedJobs != 2 || r.WaitGroup.Status != wgActive || r.WaitGroup.LastActivityAt != t1 {
		t.Fatalf("first batch: new %d, %v", r.NewJobs, r.WaitGroup)
	}
	expectWoken(t, r)
	js := h.jobs("ns", "g")
	if !reflect.DeepEqual(jobIDs(js), []string{"a", "b"}) || js[0].Metadata["try"] != "1" || js[0].CompletedAt != t1 {
		t.Fatalf("jobs %v", js)
	}
	// The same batch again: success, nothing changes (not last_activity_at).
	r = h.same(cJobs("ns", "g", job("a", "try", "3"), job("b", "try", "3"), job("a", "try", "4")))
	if r.NewJobs != 0 || r.WaitGroup.CompletedJobs != 2 || r.WaitGroup.LastActivityAt != t1 {
		t.Fatalf("retry: new %d, %v", r.NewJobs, r.WaitGroup)
	}
	// Old and new together: only the new counts, the old keeps its metadata
	// and completed_at.
	h.advance(sec)
	t2 := h.now
	r = h.ok(cJobs("ns", "g", job("b", "try", "5"), job("c", "try", "5")))
	if r.NewJobs != 1 || r.WaitGroup.CompletedJobs != 3 || r.WaitGroup.LastActivityAt != t2 {
		t.Fatalf("mixed batch: new %d, %v", r.NewJobs, r.WaitGroup)
	}
	js = h.jobs("ns", "g")
	if !reflect.DeepEqual(jobIDs(js), []string{"a", "b", "c"}) || js[1].Metadata["try"] != "1" || js[1].CompletedAt != t1 ||
		js[2].Metadata["try"] != "5" || js[2].CompletedAt != t2 {
		t.Fatalf("jobs after a mixed batch: %v", js)
	}
	// The last job completes the group; a retry of that batch (or of any
	// completed jobs) afterwards succeeds with the state as it is.
	h.advance(sec)
	r = h.ok(cDone("ns", "g", "c", "d"))
	if r.NewJobs != 1 || r.WaitGroup.Status != wgCompleted {
		t.Fatalf("completing batch: %v", r.WaitGroup)
	}
	done := r.WaitGroup
	for _, ids := range [][]string{{"c", "d"}, {"a", "b", "c", "d"}, {"b"}, {"d", "d"}} {
		r = h.same(cDone("ns", "g", ids...))
		if r.NewJobs != 0 || !proto.Equal(r.WaitGroup, done) {
			t.Fatalf("retry %v after completion: %v", ids, r.WaitGroup)
		}
		expectWoken(t, r)
	}
	// A new job (alone or beside completed ones) is refused: not active.
	for _, ids := range [][]string{{"e"}, {"a", "e"}} {
		r = h.fails(cDone("ns", "g", ids...), CodeFailedPrecondition, "completed")
		expectReason(t, r.Err, CodeFailedPrecondition, ReasonWaitGroupNotActive, MetaStatus, "WAIT_GROUP_STATUS_COMPLETED")
	}
}

// All or none: a batch whose new jobs would pass counter changes nothing.
func TestWaitGroupAllOrNone(t *testing.T) {
	h := newHarness(t)
	h.ok(cNS("ns"))
	h.ok(cWG("ns", "g", 5))
	h.ok(cDone("ns", "g", "a", "b", "c"))
	before := h.jobs("ns", "g")
	// c is done already; d, e, f are three new jobs for two places.
	h.fails(cDone("ns", "g", "c", "d", "e", "f"), CodeInvalidArgument, "too many jobs")
	if w := h.wg("ns", "g"); w.CompletedJobs != 3 || w.Status != wgActive {
		t.Fatalf("after a refused batch: %v", w)
	}
	if after := h.jobs("ns", "g"); !reflect.DeepEqual(jobIDs(after), jobIDs(before)) {
		t.Fatalf("a refused batch completed some jobs: %v", jobIDs(after))
	}
	// Counting is after deduplication: d twice, e and the done c fit.
	r := h.ok(cDone("ns", "g", "d", "c", "d", "e"))
	if r.NewJobs != 2 || r.WaitGroup.Status != wgCompleted || r.WaitGroup.CompletedJobs != 5 {
		t.Fatalf("a batch that fits exactly: new %d, %v", r.NewJobs, r.WaitGroup)
	}
}

// Reaching counter sets COMPLETED and finished_at in that commit, whose
// result wakes the group's waiters.
func TestWaitGroupCompletesInItsCommit(t *testing.T) {
	h := newHarness(t)
	h.ok(cNS("ns"))
	h.ok(cWG("ns", "g", 3))
	h.ok(cWG("ns", "other", 3))
	expectWoken(t, h.ok(cDone("ns", "g", "a")))
	expectWoken(t, h.ok(cDone("ns", "other", "a", "b")))
	if ws := h.f.WaitGroupWait("ns", "g", h.now); ws.Err != nil || ws.Done || ws.WaitGroup.Status != wgActive {
		t.Fatalf("wait state before: %+v", ws)
	}
	h.advance(sec)
	fin := h.now
	r := h.ok(cDone("ns", "g", "b", "c"))
	if w := r.WaitGroup; w.Status != wgCompleted || w.FinishedAt != fin || w.CompletedJobs != 3 || w.LastActivityAt != fin {
		t.Fatalf("completing commit returned %v", w)
	}
	expectWoken(t, r, wgKey("ns", "g"))
	h.advance(3600 * sec)
	if w := h.wg("ns", "g"); w.Status != wgCompleted || w.FinishedAt != fin {
		t.Fatalf("stored %v", w)
	}
	if ws := h.f.WaitGroupWait("ns", "g", h.now); !ws.Done || ws.WaitGroup.Status != wgCompleted {
		t.Fatalf("wait state after: %+v", ws)
	}
	expectNextTimer(t, h.f, 0) // no expiry, kept until deleted
}

// The leader's now decides a completion racing the expiry: at
// expires_at-1 it is accepted, at expires_at refused; reads at or after
// expires_at show EXPIRED (finished at expires_at) before ExpireTimers
// applies, which then stores that and wakes the waiters.
func TestWaitGroupExpiryRacesCompletion(t *testing.T) {
	h := newHarness(t)
	h.ok(cNS("ns"))
	T := h.now + 10*sec
	h.ok(cWGFull("ns", "g", "", 3, T, 0, nil))
	h.ok(cWGFull("ns", "just", "", 2, T, 0, nil))
	expectNextTimer(t, h.f, T)
	// Early ExpireTimers: nothing is due.
	expectWoken(t, h.sameAt(T-sec, cTimers(0)))

	h.now = T - 1
	if r := h.ok(cDone("ns", "g", "a")); r.NewJobs != 1 || r.WaitGroup.Status != wgActive {
		t.Fatalf("completion at expires_at-1: %v", r.WaitGroup)
	}
	r := h.ok(cDone("ns", "just", "a", "b"))
	if r.WaitGroup.Status != wgCompleted || r.WaitGroup.FinishedAt != T-1 {
		t.Fatalf("completed just in time: %v", r.WaitGroup)
	}
	expectNextTimer(t, h.f, T) // only g's expiry is left

	// A read whose now is ahead of every applied command does not judge
	// the expiry: a completion stamped before expires_at may still apply
	// after it (the leader stamps commands before they commit), and a read
	// that said EXPIRED would then be contradicted by a COMPLETED group.
	h.ok(cWGFull("ns", "late", "", 1, T, 0, nil))
	for _, at := range []int64{T, T + 5*sec} {
		if w, _ := h.f.GetWaitGroup("ns", "late", at); w.Status != wgActive {
			t.Fatalf("read at +%d ahead of the applied commands: %v, want ACTIVE", at-T, w)
		}
		if ws := h.f.WaitGroupWait("ns", "late", at); ws.Done {
			t.Fatalf("wait state at +%d ahead of the applied commands: %+v, want not done", at-T, ws)
		}
	}
	if r := h.ok(cDone("ns", "late", "a")); r.WaitGroup.Status != wgCompleted || r.WaitGroup.FinishedAt != T-1 {
		t.Fatalf("completion stamped before expires_at, applied after a later read: %v", r.WaitGroup)
	}
	// Once a command has applied at expires_at, reads judge it there.
	h.now = T
	h.ok(cNS("later"))

	// Reads: ACTIVE before, EXPIRED at and after expires_at.
	if w, _ := h.f.GetWaitGroup("ns", "g", T-1); w.Status != wgActive || w.FinishedAt != 0 {
		t.Fatalf("read at expires_at-1: %v", w)
	}
	for _, at := range []int64{T, T + 5*sec} {
		w, err := h.f.GetWaitGroup("ns", "g", at)
		if err != nil || w.Status != wgExpired || w.FinishedAt != T || w.CompletedJobs != 1 {
			t.Fatalf("read at +%d: %v %v", at-T, w, err)
		}
		w, _ = h.f.GetWaitGroup("ns", "g", at)
		if w.Status != wgExpired || w.FinishedAt != T {
			t.Fatalf("view at +%d: %v", at-T, w)
		}
		p, _ := h.f.ListWaitGroups("ns", 0, "", at)
		if p.Items[0].Name != "g" || p.Items[0].Status != wgExpired || p.Items[0].FinishedAt != T || p.Items[1].Status != wgCompleted {
			t.Fatalf("list at +%d: %v", at-T, p.Items)
		}
		if ws := h.f.WaitGroupWait("ns", "g", at); !ws.Done || ws.WaitGroup.Status != wgExpired {
			t.Fatalf("wait state at +%d: %+v", at-T, ws)
		}
		if js, err := h.f.ListWaitGroupCompletedJobs("ns", "g", 0, "", at); err != nil || len(js.Items) != 1 {
			t.Fatalf("jobs at +%d: %v %v", at-T, js.Items, err)
		}
	}
	if !strings.Contains(dumpFiltered(h.f, `wg "ns"/"g"`), "WAIT_GROUP_STATUS_ACTIVE") {
		t.Fatal("a read stored the expiry")
	}

	// A completion at now == expires_at is refused and changes nothing.
	r = h.failsAt(T, cDone("ns", "g", "b"), CodeFailedPrecondition, "expired")
	expectReason(t, r.Err, CodeFailedPrecondition, ReasonWaitGroupNotActive, MetaStatus, "WAIT_GROUP_STATUS_EXPIRED")
	r = h.failsAt(T, cWGUpdate("ns", "g", "", 5, T, 0, nil, 1), CodeFailedPrecondition, "expired")
	expectReason(t, r.Err, CodeFailedPrecondition, ReasonWaitGroupNotActive)
	// A retry of a job completed before the expiry succeeds and shows it.
	r = h.sameAt(T, cDone("ns", "g", "a"))
	if r.WaitGroup.Status != wgExpired || r.WaitGroup.FinishedAt != T || r.NewJobs != 0 {
		t.Fatalf("retry at expires_at: %v", r.WaitGroup)
	}

	// ExpireTimers, applied a little late, stores EXPIRED as of expires_at
	// and wakes g's waiters; the group completed in time is not touched.
	h.now = T + 2*sec
	r = h.ok(cTimers(0))
	expectWoken(t, r, wgKey("ns", "g"))
	if w := h.wg("ns", "g"); w.Status != wgExpired || w.FinishedAt != T || w.CompletedJobs != 1 {
		t.Fatalf("after ExpireTimers: %v", w)
	}
	if !strings.Contains(dumpFiltered(h.f, `wg "ns"/"g"`), "WAIT_GROUP_STATUS_EXPIRED") {
		t.Fatal("ExpireTimers did not store the expiry")
	}
	if w := h.wg("ns", "just"); w.Status != wgCompleted || w.FinishedAt != T-1 {
		t.Fatalf("the group completed in time: %v", w)
	}
	expectNextTimer(t, h.f, 0)
	expectWoken(t, h.same(cTimers(0)))
	// New jobs on the EXPIRED group: refused; a retry: fine.
	r = h.fails(cDone("ns", "g", "a", "z"), CodeFailedPrecondition, "expired")
	expectReason(t, r.Err, CodeFailedPrecondition, ReasonWaitGroupNotActive, MetaStatus, "WAIT_GROUP_STATUS_EXPIRED")
	h.same(cDone("ns", "g", "a"))
}

func TestWaitGroupUpdate(t *testing.T) {
	h := newHarness(t)
	h.ok(cNS("ns"))
	c0 := h.now
	h.ok(cWGFull("ns", "g", "d1", 5, h.now+100*sec, 60, md("a", "1")))
	h.advance(sec)
	h.ok(cDone("ns", "g", "j1", "j2"))
	act := h.now
	h.advance(sec)
	exp2 := h.now + 200*sec
	r := h.ok(cWGUpdate("ns", "g", "d2", 4, exp2, 0, md("b", "2"), 1))
	want := &pb.WaitGroup{Name: "g", Description: "d2", Counter: 4, CompletedJobs: 2, Status: wgActive, ExpiresAt: exp2,
		Metadata: md("b", "2"), Version: 2, CreatedAt: c0, UpdatedAt: h.now, LastActivityAt: act}
	if !proto.Equal(r.WaitGroup, want) || !proto.Equal(h.wg("ns", "g"), want) {
		t.Fatalf("update returned %v, want %v", r.WaitGroup, want)
	}
	expectWoken(t, r)
	expectNextTimer(t, h.f, exp2)
	// Versions: older, newer, none.
	for _, v := range []int64{1, 3, 100} {
		h.fails(cWGUpdate("ns", "g", "x", 4, exp2, 0, nil, v), CodeInvalidArgument, "version mismatch")
	}
	// A changed expires_at must be in the future; an unchanged one is
	// fine (it is, while the group is active).
	h.fails(cWGUpdate("ns", "g", "x", 4, h.now, 0, nil, 2), CodeInvalidArgument, "expires_at")
	// counter below completed_jobs: FailedPrecondition.
	h.fails(cWGUpdate("ns", "g", "x", 1, exp2, 0, nil, 2), CodeFailedPrecondition, "counter")
	// Raising counter and clearing expires_at: still active, no timer.
	r = h.ok(cWGUpdate("ns", "g", "", 10, 0, 0, nil, 2))
	if r.WaitGroup.Status != wgActive || r.WaitGroup.Counter != 10 || r.WaitGroup.Version != 3 {
		t.Fatalf("raise: %v", r.WaitGroup)
	}
	expectNextTimer(t, h.f, 0)
	// counter equal to completed_jobs: the group completes in this update.
	h.advance(sec)
	r = h.ok(cWGUpdate("ns", "g", "", 2, 0, 30, nil, 3))
	if w := r.WaitGroup; w.Status != wgCompleted || w.FinishedAt != h.now || w.Version != 4 || w.LastActivityAt != act {
		t.Fatalf("completing update: %v", w)
	}
	expectWoken(t, r, wgKey("ns", "g"))
	expectNextTimer(t, h.f, h.now+30*sec)
	// Only an ACTIVE group can be updated.
	r = h.fails(cWGUpdate("ns", "g", "", 10, 0, 0, nil, 4), CodeFailedPrecondition, "completed")
	expectReason(t, r.Err, CodeFailedPrecondition, ReasonWaitGroupNotActive, MetaStatus, "WAIT_GROUP_STATUS_COMPLETED")
	h.ok(cWGFull("ns", "e", "", 2, h.now+sec, 0, nil))
	h.advance(sec)
	r = h.fails(cWGUpdate("ns", "e", "", 2, 0, 0, nil, 1), CodeFailedPrecondition, "expired")
	expectReason(t, r.Err, CodeFailedPrecondition, ReasonWaitGroupNotActive, MetaStatus, "WAIT_GROUP_STATUS_EXPIRED")
	h.ok(cTimers(0))
	h.fails(cWGUpdate("ns", "e", "", 2, 0, 0, nil, 1), CodeFailedPrecondition, "expired")
}

// A finished group is deleted delete_after_finished_seconds after
// finished_at (by ExpireTimers), not before; 0 keeps it.
func TestWaitGroupDeleteAfterFinished(t *testing.T) {
	h := newHarness(t)
	h.ok(cNS("ns"))
	h.ok(cWGFull("ns", "g", "", 2, 0, 10, nil))
	h.ok(cWGFull("ns", "keep", "", 1, 0, 0, nil))
	expectNextTimer(t, h.f, 0) // an active group without expires_at has no timer
	h.advance(sec)
	F := h.now
	h.ok(cDone("ns", "g", "a", "b"))
	h.ok(cDone("ns", "keep", "a"))
	expectNextTimer(t, h.f, F+10*sec)
	expectWoken(t, h.sameAt(F+10*sec-1, cTimers(0)))
	h.now = F + 10*sec
	r := h.ok(cTimers(0))
	expectWoken(t, r, wgKey("ns", "g"))
	_, err := h.f.GetWaitGroup("ns", "g", h.now)
	expectReason(t, err, CodeNotFound, ReasonWaitGroupNotFound)
	if strings.Contains(dumpState(h.f), `"ns"/"g"`) {
		t.Fatalf("records of the deleted group remain:\n%s", dumpState(h.f))
	}
	expectNextTimer(t, h.f, 0)
	h.advance(31 * 24 * 3600 * sec)
	expectWoken(t, h.same(cTimers(0)))
	if w := h.wg("ns", "keep"); w.Status != wgCompleted {
		t.Fatalf("kept group: %v", w)
	}

	// An expired group: deleted that long after its expires_at. Expiry and
	// deletion are two steps, each in an ExpireTimers of its own.
	E := h.now + 5*sec
	h.ok(cWGFull("ns", "e", "", 2, E, 3, nil))
	h.ok(cDone("ns", "e", "a"))
	h.now = E + 10*sec
	r = h.ok(cTimers(0))
	expectWoken(t, r, wgKey("ns", "e"))
	if w := h.wg("ns", "e"); w.Status != wgExpired || w.FinishedAt != E {
		t.Fatalf("expired: %v", w)
	}
	expectNextTimer(t, h.f, E+3*sec)
	expectWoken(t, h.ok(cTimers(0)), wgKey("ns", "e"))
	if _, err := h.f.GetWaitGroup("ns", "e", h.now); err == nil {
		t.Fatal("the expired group was not deleted")
	}
	expectNextTimer(t, h.f, 0)

	// ExpireTimers with max applies the earliest due changes only.
	h.ok(cWGFull("ns", "x1", "", 1, h.now+2*sec, 0, nil))
	h.ok(cWGFull("ns", "x2", "", 1, h.now+1*sec, 0, nil))
	h.ok(cWGFull("ns", "x3", "", 1, h.now+3*sec, 0, nil))
	h.advance(5 * sec)
	expectWoken(t, h.ok(cTimers(1)), wgKey("ns", "x2"))
	expectWoken(t, h.ok(cTimers(0)), wgKey("ns", "x1"), wgKey("ns", "x3"))
}

func TestWaitGroupDelete(t *testing.T) {
	h := newHarness(t)
	h.ok(cNS("ns"))
	h.ok(cWGFull("ns", "g", "", 3, h.now+60*sec, 0, nil))
	h.ok(cDone("ns", "g", "a", "b"))
	r := h.ok(cWGDelete("ns", "g"))
	if !r.Existed {
		t.Fatal("Existed false for a deleted group")
	}
	expectWoken(t, r, wgKey("ns", "g"))
	_, err := h.f.GetWaitGroup("ns", "g", h.now)
	expectReason(t, err, CodeNotFound, ReasonWaitGroupNotFound)
	expectNextTimer(t, h.f, 0)
	if ws := h.f.WaitGroupWait("ns", "g", h.now); ws.Err == nil {
		t.Fatalf("wait state of a deleted group: %+v", ws)
	}
	// Deleting a missing group is not an error, and changes nothing.
	r = h.same(cWGDelete("ns", "g"))
	if r.Existed {
		t.Fatal("Existed true for a missing group")
	}
	expectWoken(t, r)
	// A group of the same name starts empty: the old jobs count again.
	h.ok(cWG("ns", "g", 3))
	if js := h.jobs("ns", "g"); len(js) != 0 {
		t.Fatalf("old jobs leaked into a new group: %v", js)
	}
	if r := h.ok(cDone("ns", "g", "a")); r.NewJobs != 1 || r.WaitGroup.CompletedJobs != 1 {
		t.Fatalf("a job of the old group: %v", r.WaitGroup)
	}
}

// ---- barriers ----

func TestBarrierCreateGet(t *testing.T) {
	h := newHarness(t)
	h.fails(cBar("ns", "b", 1), CodeNotFound, "ns")
	h.ok(cNS("ns"))
	r := h.ok(cBarFull("ns", "b", "phase 1", 3, 600, md("k", "v")))
	want := &pb.Barrier{Name: "b", Description: "phase 1", ExpectedProcesses: 3, Generation: 1, DeleteInactiveAfterSeconds: 600,
		Metadata: md("k", "v"), Version: 1, CreatedAt: h.now, UpdatedAt: h.now, LastActivityAt: h.now}
	if !proto.Equal(r.Barrier, want) {
		t.Fatalf("create returned %v, want %v", r.Barrier, want)
	}
	expectNextTimer(t, h.f, h.now+600*sec)
	h.advance(sec)
	if b := h.bar("ns", "b"); !proto.Equal(b, want) {
		t.Fatalf("get %v", b)
	}
	h.ok(cBar("ns", "a", 1))
	p, err := h.f.ListBarriers("ns", 0, "")
	if err != nil || len(p.Items) != 2 || p.Items[0].Name != "a" || !proto.Equal(p.Items[1], want) {
		t.Fatalf("list: %v %v", p.Items, err)
	}
	h.fails(cBar("ns", "b", 1), CodeAlreadyExists, "b")
	_, err = h.f.GetBarrier("ns", "missing")
	expectReason(t, err, CodeNotFound, ReasonBarrierNotFound)
	_, _, err = h.f.ListBarrierParticipants("ns", "missing", 0, 0, "")
	expectReason(t, err, CodeNotFound, ReasonBarrierNotFound)
	_, err = h.f.ListBarriers("nope", 0, "")
	expectReason(t, err, CodeNotFound, ReasonNamespaceNotFound)
	if ws := h.f.BarrierWait("ns", "missing", 1); ws.Err == nil {
		t.Fatalf("wait state of a missing barrier: %+v", ws)
	} else {
		expectReason(t, ws.Err, CodeNotFound, ReasonBarrierNotFound)
	}
	for _, c := range []*fsmpb.Command{cArrive("ns", "missing", "p", 1), cBarUpdate("ns", "missing", "", 1, 0, nil, 1)} {
		r := h.fails(c, CodeNotFound, "missing")
		expectReason(t, r.Err, CodeNotFound, ReasonBarrierNotFound)
	}
	for _, c := range []*fsmpb.Command{cArrive("nope", "b", "p", 1), cBarUpdate("nope", "b", "", 1, 0, nil, 1), cBarDelete("nope", "b")} {
		r := h.fails(c, CodeNotFound, "nope")
		expectReason(t, r.Err, CodeNotFound, ReasonNamespaceNotFound)
	}
}

func TestBarrierBadInput(t *testing.T) {
	h := newHarness(t)
	h.ok(cNS("ns"))
	h.ok(cBar("ns", "b", 3))
	max := h.f.Limits().MaxBarrierProcesses
	many := map[string]string{}
	for i := 0; i < 33; i++ {
		many[fmt.Sprint("k", i)] = "v"
	}
	for _, c := range []struct {
		cmd   *fsmpb.Command
		field string
	}{
		{cBar("ns", "x", 0), "expected_processes"},
		{cBar("ns", "x", -3), "expected_processes"},
		{cBar("ns", "x", max+1), "expected_processes"},
		{cBarFull("ns", "x", "", 1, MaxKeepSeconds+1, nil), "delete_inactive_after_seconds"},
		{cBarFull("ns", "x", "", 1, -1, nil), "delete_inactive_after_seconds"},
		{cBarFull("ns", "x", "", 1, 0, many), "metadata"},
		{cBarFull("ns", "x", strings.Repeat("d", MaxDescriptionBytes+1), 1, 0, nil), "description"},
		{cBar("ns", "a b", 1), "barrier_name"},
		{cBar("ns", "", 1), "barrier_name"},
		{cBar("n/s", "x", 1), "namespace_name"},
		{cBarUpdate("ns", "b", "", 0, 0, nil, 1), "expected_processes"},
		{cBarUpdate("ns", "b", "", max+1, 0, nil, 1), "expected_processes"},
		{cBarUpdate("ns", "b", "", 3, MaxKeepSeconds+1, nil, 1), "delete_inactive_after_seconds"},
		{cBarUpdate("ns", "b", "", 3, 0, nil, 0), "expected_version"},
		{cArrive("ns", "b", "p", 0), "expected_generation"},
		{cArrive("ns", "b", "p", -1), "expected_generation"},
		{cArrive("ns", "b", "", 1), "process_id"},
		{cArrive("ns", "b", strings.Repeat("p", 129), 1), "process_id"},
		{cArrive("ns", "b", "p\x01", 1), "process_id"},
		{cArrive("ns", "b", "p\xff", 1), "process_id"},
		{cArriveMD("ns", "b", "p", 1, many), "metadata"},
		{cArrive("ns", "b/c", "p", 1), "barrier_name"},
		{cBarDelete("ns", "b c"), "barrier_name"},
	} {
		h.fails(c.cmd, CodeInvalidArgument, c.field)
	}
	// The boundaries are accepted; a process id is printable UTF-8.
	h.ok(cBarFull("ns", strings.Repeat("b", 128), "", max, MaxKeepSeconds, nil))
	h.ok(cArrive("ns", "b", "host-1:pid 42/é", 1))
	h.ok(cArrive("ns", "b", strings.Repeat("p", 128), 1))
	_, _, err := h.f.ListBarrierParticipants("ns", "b", -1, 0, "")
	expectCode(t, err, CodeInvalidArgument, "generation")
}

// Arrivals count once per (generation, process); the last trips the
// barrier in its own commit; retries at the current and the previous
// generation succeed and change nothing; any other generation is
// GENERATION_MISMATCH naming the current one.
func TestBarrierArrivals(t *testing.T) {
	h := newHarness(t)
	h.ok(cNS("ns"))
	h.ok(cBar("ns", "b", 3))
	h.advance(sec)
	a1 := h.now
	r := h.ok(cArriveMD("ns", "b", "p1", 1, md("host", "x")))
	if b := r.Barrier; r.AllArrived || b.ArrivedProcesses != 1 || b.Generation != 1 || b.LastActivityAt != a1 {
		t.Fatalf("first arrival: %v %v", r.AllArrived, b)
	}
	expectWoken(t, r)
	// A retry at the current generation: nothing changes (not the metadata,
	// not last_activity_at).
	r = h.same(cArriveMD("ns", "b", "p1", 1, md("host", "y")))
	if r.AllArrived || r.Barrier.ArrivedProcesses != 1 || r.Barrier.LastActivityAt != a1 {
		t.Fatalf("retry: %v %v", r.AllArrived, r.Barrier)
	}
	if ps, _ := h.participants("ns", "b", 0); len(ps) != 1 || ps[0].Metadata["host"] != "x" || ps[0].ArrivedAt != a1 {
		t.Fatalf("participants after a retry: %v", ps)
	}
	h.ok(cArrive("ns", "b", "p2", 1))
	if ws := h.f.BarrierWait("ns", "b", 1); ws.Err != nil || ws.Done {
		t.Fatalf("wait state before the trip: %+v", ws)
	}
	// The last arrival trips it in its own commit.
	h.advance(sec)
	trip := h.now
	r = h.ok(cArrive("ns", "b", "p3", 1))
	if b := r.Barrier; !r.AllArrived || b.ArrivedProcesses != 0 || b.Generation != 2 || b.LastActivityAt != trip {
		t.Fatalf("tripping arrival: %v %v", r.AllArrived, b)
	}
	expectWoken(t, r, barKeyW("ns", "b"))
	if ws := h.f.BarrierWait("ns", "b", 1); !ws.Done {
		t.Fatalf("wait state of generation 1 after the trip: %+v", ws)
	}
	if ws := h.f.BarrierWait("ns", "b", 2); ws.Done || ws.Err != nil {
		t.Fatalf("wait state of generation 2: %+v", ws)
	}
	ws := h.f.BarrierWait("ns", "b", 3)
	expectReason(t, ws.Err, CodeFailedPrecondition, ReasonGenerationMismatch, MetaCurrentGeneration, "2")
	// Retries of counted arrivals at the previous generation: all_arrived,
	// nothing changes.
	for _, p := range []string{"p1", "p2", "p3"} {
		r = h.same(cArrive("ns", "b", p, 1))
		if !r.AllArrived || r.Barrier.Generation != 2 || r.Barrier.ArrivedProcesses != 0 {
			t.Fatalf("retry of %s after the trip: %v %v", p, r.AllArrived, r.Barrier)
		}
		expectWoken(t, r)
	}
	// A process that did not arrive at generation 1, and generations that
	// are neither current nor previous.
	for _, c := range []struct {
		proc string
		gen  int64
	}{{"p4", 1}, {"p1", 3}, {"p1", 100}} {
		r = h.fails(cArrive("ns", "b", c.proc, c.gen), CodeFailedPrecondition, "generation")
		expectReason(t, r.Err, CodeFailedPrecondition, ReasonGenerationMismatch, MetaCurrentGeneration, "2")
	}
	// Generation 2: the same processes count again.
	h.advance(sec)
	r = h.ok(cArrive("ns", "b", "p1", 2))
	if r.AllArrived || r.Barrier.ArrivedProcesses != 1 || r.Barrier.LastActivityAt != h.now {
		t.Fatalf("arrival at generation 2: %v", r.Barrier)
	}
	if r = h.same(cArrive("ns", "b", "p1", 2)); r.AllArrived {
		t.Fatal("a retry at the current generation says all arrived")
	}
	// p1 counted at generation 1 and 2: a retry at 1 still says tripped.
	if r = h.same(cArrive("ns", "b", "p1", 1)); !r.AllArrived {
		t.Fatal("a retry at the previous generation does not say all arrived")
	}
	h.ok(cArrive("ns", "b", "p4", 2))
	r = h.ok(cArrive("ns", "b", "p2", 2))
	if !r.AllArrived || r.Barrier.Generation != 3 {
		t.Fatalf("second trip: %v", r.Barrier)
	}
	// Generation 1 is two back now: GENERATION_MISMATCH, even for p1.
	r = h.fails(cArrive("ns", "b", "p1", 1), CodeFailedPrecondition, "generation")
	expectReason(t, r.Err, CodeFailedPrecondition, ReasonGenerationMismatch, MetaCurrentGeneration, "3")
	if r = h.same(cArrive("ns", "b", "p4", 2)); !r.AllArrived {
		t.Fatal("retry at generation 2 after its trip")
	}
	// One expected process: every arrival trips on its own.
	h.ok(cBar("ns", "solo", 1))
	for g := int64(1); g <= 3; g++ {
		r = h.ok(cArrive("ns", "solo", "p", g))
		if !r.AllArrived || r.Barrier.Generation != g+1 {
			t.Fatalf("solo generation %d: %v", g, r.Barrier)
		}
		expectWoken(t, r, barKeyW("ns", "solo"))
	}
}

// ListBarrierParticipants: one generation (0 = the current one), in
// arrival order; the current and the previous generation are kept.
func TestBarrierParticipants(t *testing.T) {
	h := newHarness(t)
	h.ok(cNS("ns"))
	h.ok(cBar("ns", "b", 30))
	h.ok(cBar("ns", "c", 5)) // another barrier's arrivals must not show
	h.ok(cArrive("ns", "c", "a", 1))
	var order []string
	var at []int64
	for i, p := range []string{"z", "a", "m"} {
		h.advance(sec)
		h.ok(cArriveMD("ns", "b", p, 1, md("i", fmt.Sprint(i))))
		order, at = append(order, p), append(at, h.now)
	}
	for i := 0; i < 22; i++ {
		p := fmt.Sprintf("p-%02d", 21-i)
		h.ok(cArrive("ns", "b", p, 1))
		order = append(order, p)
	}
	for _, gen := range []int64{0, 1} {
		ps, g := h.participants("ns", "b", gen)
		if g != 1 || !reflect.DeepEqual(procsOf(ps), order) {
			t.Fatalf("generation %d listed as %d: %v", gen, g, procsOf(ps))
		}
		for i := 0; i < 3; i++ {
			if ps[i].Generation != 1 || ps[i].ArrivedAt != at[i] || ps[i].Metadata["i"] != fmt.Sprint(i) {
				t.Fatalf("participant %d: %v", i, ps[i])
			}
		}
	}
	// Paging keeps arrival order across 25 arrivals (numbers past 9).
	checkPaging(t, "participants", participantLister(h.f, "ns", "b", 0), order, 4)
	checkPaging(t, "participants", participantLister(h.f, "ns", "b", 1), order, 7)
	_, _, err := h.f.ListBarrierParticipants("ns", "b", 2, 0, "")
	expectReason(t, err, CodeFailedPrecondition, ReasonGenerationMismatch, MetaCurrentGeneration, "1")

	// The trip: generation 2 is empty, generation 1 is kept.
	for i := 0; i < 5; i++ {
		p := fmt.Sprintf("q-%d", i)
		h.ok(cArrive("ns", "b", p, 1))
		order = append(order, p)
	}
	if b := h.bar("ns", "b"); b.Generation != 2 {
		t.Fatalf("not tripped: %v", b)
	}
	if ps, g := h.participants("ns", "b", 0); g != 2 || len(ps) != 0 {
		t.Fatalf("current generation after the trip: %d %v", g, ps)
	}
	if ps, g := h.participants("ns", "b", 1); g != 1 || !reflect.DeepEqual(procsOf(ps), order) {
		t.Fatalf("previous generation: %d %v", g, procsOf(ps))
	}
	h.ok(cArrive("ns", "b", "y", 2))
	h.ok(cArrive("ns", "b", "x", 2))
	for _, gen := range []int64{0, 2} {
		if ps, g := h.participants("ns", "b", gen); g != 2 || !reflect.DeepEqual(procsOf(ps), []string{"y", "x"}) || ps[0].Generation != 2 {
			t.Fatalf("generation %d: %d %v", gen, g, ps)
		}
	}
	checkPaging(t, "previous generation", participantLister(h.f, "ns", "b", 1), order, 8)
	// An update trips generation 2; generation 1 is no longer kept.
	h.ok(cBarUpdate("ns", "b", "", 2, 0, nil, 1))
	if ps, g := h.participants("ns", "b", 2); g != 2 || !reflect.DeepEqual(procsOf(ps), []string{"y", "x"}) {
		t.Fatalf("generation 2 after its trip: %v", procsOf(ps))
	}
	if ps, g := h.participants("ns", "b", 0); g != 3 || len(ps) != 0 {
		t.Fatalf("generation 3: %d %v", g, ps)
	}
	for _, gen := range []int64{1, 4} {
		_, _, err := h.f.ListBarrierParticipants("ns", "b", gen, 0, "")
		expectReason(t, err, CodeFailedPrecondition, ReasonGenerationMismatch, MetaCurrentGeneration, "3")
	}
	if ps, _ := h.participants("ns", "c", 0); !reflect.DeepEqual(procsOf(ps), []string{"a"}) {
		t.Fatalf("the other barrier: %v", procsOf(ps))
	}
}

func participantLister(f *FSM, ns, bar string, gen int64) lister {
	return func(limit int32, token string) ([]string, string, string, error) {
		p, _, err := f.ListBarrierParticipants(ns, bar, gen, limit, token)
		return procsOf(p.Items), p.Next, p.Previous, err
	}
}

func TestBarrierUpdate(t *testing.T) {
	h := newHarness(t)
	h.ok(cNS("ns"))
	c0 := h.now
	h.ok(cBarFull("ns", "b", "d1", 4, 0, md("a", "1")))
	h.advance(sec)
	h.ok(cArrive("ns", "b", "p1", 1))
	h.ok(cArrive("ns", "b", "p2", 1))
	act := h.now
	h.advance(sec)
	r := h.ok(cBarUpdate("ns", "b", "d2", 5, 60, md("b", "2"), 1))
	want := &pb.Barrier{Name: "b", Description: "d2", ExpectedProcesses: 5, ArrivedProcesses: 2, Generation: 1, DeleteInactiveAfterSeconds: 60,
		Metadata: md("b", "2"), Version: 2, CreatedAt: c0, UpdatedAt: h.now, LastActivityAt: act}
	if r.AllArrived || !proto.Equal(r.Barrier, want) || !proto.Equal(h.bar("ns", "b"), want) {
		t.Fatalf("update returned %v %v, want %v", r.AllArrived, r.Barrier, want)
	}
	expectWoken(t, r)
	expectNextTimer(t, h.f, act+60*sec) // counted from the last arrival, not the update
	for _, v := range []int64{1, 3} {
		h.fails(cBarUpdate("ns", "b", "", 5, 0, nil, v), CodeInvalidArgument, "version mismatch")
	}
	// Below the arrivals: FailedPrecondition.
	h.fails(cBarUpdate("ns", "b", "", 1, 0, nil, 2), CodeFailedPrecondition, "expected_processes")
	// Equal: the barrier trips in this update.
	h.advance(sec)
	r = h.ok(cBarUpdate("ns", "b", "", 2, 0, nil, 2))
	if b := r.Barrier; !r.AllArrived || b.Generation != 2 || b.ArrivedProcesses != 0 || b.ExpectedProcesses != 2 || b.Version != 3 || b.LastActivityAt != act {
		t.Fatalf("tripping update: %v %v", r.AllArrived, b)
	}
	expectWoken(t, r, barKeyW("ns", "b"))
	expectNextTimer(t, h.f, 0)
	// The tripped generation is the previous one: its arrivals retry fine.
	if r := h.same(cArrive("ns", "b", "p2", 1)); !r.AllArrived {
		t.Fatal("retry after a tripping update")
	}
	if ps, _ := h.participants("ns", "b", 1); !reflect.DeepEqual(procsOf(ps), []string{"p1", "p2"}) {
		t.Fatalf("tripped generation: %v", procsOf(ps))
	}
	// No arrivals: lowering to 1 does not trip.
	r = h.ok(cBarUpdate("ns", "b", "", 1, 0, nil, 3))
	if r.AllArrived || r.Barrier.Generation != 2 {
		t.Fatalf("update without arrivals: %v", r.Barrier)
	}
	expectWoken(t, r)
}

// A barrier with no counted arrival for delete_inactive_after_seconds is
// deleted (by ExpireTimers); an arrival postpones it, a retry or an
// update does not.
func TestBarrierDeleteInactive(t *testing.T) {
	h := newHarness(t)
	h.ok(cNS("ns"))
	C := h.now
	h.ok(cBarFull("ns", "b", "", 3, 10, nil))
	h.ok(cBarFull("ns", "forever", "", 3, 0, nil))
	expectNextTimer(t, h.f, C+10*sec)
	h.now = C + 5*sec
	h.ok(cArrive("ns", "b", "p1", 1))
	expectNextTimer(t, h.f, C+15*sec)
	h.now = C + 6*sec
	h.same(cArrive("ns", "b", "p1", 1))
	h.ok(cBarUpdate("ns", "b", "x", 3, 10, nil, 1))
	expectNextTimer(t, h.f, C+15*sec)
	expectWoken(t, h.sameAt(C+10*sec, cTimers(0)))
	expectWoken(t, h.sameAt(C+15*sec-1, cTimers(0)))
	h.now = C + 15*sec
	r := h.ok(cTimers(0))
	expectWoken(t, r, barKeyW("ns", "b"))
	_, err := h.f.GetBarrier("ns", "b")
	expectReason(t, err, CodeNotFound, ReasonBarrierNotFound)
	if strings.Contains(dumpState(h.f), `"ns"/"b"`) {
		t.Fatalf("records of the deleted barrier remain:\n%s", dumpState(h.f))
	}
	expectNextTimer(t, h.f, 0)
	h.advance(31 * 24 * 3600 * sec)
	h.same(cTimers(0))
	h.bar("ns", "forever")

	// A tripping arrival is activity too.
	h.ok(cBarFull("ns", "t", "", 1, 10, nil))
	h.advance(8 * sec)
	h.ok(cArrive("ns", "t", "p", 1))
	expectNextTimer(t, h.f, h.now+10*sec)
}

func TestBarrierDelete(t *testing.T) {
	h := newHarness(t)
	h.ok(cNS("ns"))
	h.ok(cBarFull("ns", "b", "", 3, 60, nil))
	h.ok(cArrive("ns", "b", "p1", 1))
	r := h.ok(cBarDelete("ns", "b"))
	if !r.Existed {
		t.Fatal("Existed false")
	}
	expectWoken(t, r, barKeyW("ns", "b"))
	expectNextTimer(t, h.f, 0)
	if ws := h.f.BarrierWait("ns", "b", 1); ws.Err == nil {
		t.Fatalf("wait state of a deleted barrier: %+v", ws)
	}
	r = h.same(cBarDelete("ns", "b"))
	if r.Existed {
		t.Fatal("Existed true for a missing barrier")
	}
	expectWoken(t, r)
	// A new barrier of the same name starts at generation 1, empty; the old
	// arrival is forgotten (it counts again).
	r = h.ok(cBar("ns", "b", 3))
	if r.Barrier.Generation != 1 || r.Barrier.ArrivedProcesses != 0 {
		t.Fatalf("recreated: %v", r.Barrier)
	}
	if r := h.ok(cArrive("ns", "b", "p1", 1)); r.Barrier.ArrivedProcesses != 1 {
		t.Fatalf("arrival at the recreated barrier: %v", r.Barrier)
	}
}

// ---- limits, namespaces ----

func TestWaitLimits(t *testing.T) {
	h := newHarness(t)
	l := DefaultLimits()
	l.MaxWaitGroupsPerNamespace, l.MaxBarriersPerNamespace = 2, 2
	l.MaxWaitGroupCounter, l.MaxBarrierProcesses, l.MaxJobsPerCall = 5, 3, 4
	h.ok(cLimits(l))
	if h.f.Limits() != l {
		t.Fatalf("limits %+v", h.f.Limits())
	}
	h.ok(cNS("a"))
	h.ok(cNS("b"))
	h.ok(cWG("a", "g1", 5))
	h.ok(cWGFull("a", "g2", "", 1, 0, 1, nil))
	h.fails(cWG("a", "g3", 1), CodeResourceExhausted, "wait groups", "2")
	h.fails(cWG("a", "g1", 1), CodeAlreadyExists) // existence is reported first
	h.ok(cWG("b", "g1", 1))                       // per namespace
	h.ok(cBar("a", "b1", 3))
	h.ok(cBar("a", "b2", 1))
	h.fails(cBar("a", "b3", 1), CodeResourceExhausted, "barriers", "2")
	h.ok(cBar("b", "b1", 1))
	if c := h.f.st.waitCount; c["a"] != (waitCounts{2, 2}) || c["b"] != (waitCounts{1, 1}) {
		t.Fatalf("counts %v", c)
	}
	// The other limits.
	h.fails(cWG("b", "x", 6), CodeInvalidArgument, "counter", "5")
	h.fails(cWGUpdate("a", "g1", "", 6, 0, 0, nil, 1), CodeInvalidArgument, "counter")
	h.fails(cDone("a", "g1", "1", "2", "3", "4", "5"), CodeInvalidArgument, "jobs", "4")
	h.ok(cDone("a", "g1", "1", "2", "3", "4"))
	h.fails(cBar("b", "x", 4), CodeInvalidArgument, "expected_processes", "3")
	h.fails(cBarUpdate("a", "b1", "", 4, 0, nil, 1), CodeInvalidArgument, "expected_processes")
	// A deletion makes room: DeleteWaitGroup, DeleteBarrier, and a timer's.
	h.ok(cWGDelete("a", "g1"))
	h.ok(cWG("a", "g3", 1))
	h.ok(cBarDelete("a", "b1"))
	h.ok(cBar("a", "b3", 1))
	h.ok(cDone("a", "g2", "x"))
	h.advance(sec)
	expectWoken(t, h.ok(cTimers(0)), wgKey("a", "g2"))
	h.ok(cWG("a", "g4", 1))
	h.fails(cWG("a", "g5", 1), CodeResourceExhausted, "wait groups")
	// Setting the limits validates the new fields.
	for _, f := range []struct {
		field string
		set   func(*Limits)
	}{
		{"max_wait_groups_per_namespace", func(l *Limits) { l.MaxWaitGroupsPerNamespace = -1 }},
		{"max_barriers_per_namespace", func(l *Limits) { l.MaxBarriersPerNamespace = -1 }},
		{"max_wait_group_counter", func(l *Limits) { l.MaxWaitGroupCounter = -1 }},
		{"max_barrier_processes", func(l *Limits) { l.MaxBarrierProcesses = -1 }},
		{"max_jobs_per_call", func(l *Limits) { l.MaxJobsPerCall = -1 }},
	} {
		bad := l
		f.set(&bad)
		h.fails(cLimits(bad), CodeInvalidArgument, f.field)
	}
	// 0 (a leader that predates them): the defaults.
	zero := l
	zero.MaxWaitGroupsPerNamespace, zero.MaxBarriersPerNamespace, zero.MaxWaitGroupCounter, zero.MaxBarrierProcesses, zero.MaxJobsPerCall = 0, 0, 0, 0, 0
	h.ok(cLimits(zero))
	d := DefaultLimits()
	if got := h.f.Limits(); got.MaxWaitGroupsPerNamespace != d.MaxWaitGroupsPerNamespace || got.MaxJobsPerCall != 100 ||
		got.MaxWaitGroupCounter != 1_000_000 || got.MaxBarrierProcesses != 100_000 || got.MaxBarriersPerNamespace != 1_000_000 {
		t.Fatalf("limits left at 0: %+v", got)
	}
}

// DeleteNamespace deletes its wait groups and barriers (with their jobs,
// arrivals and timers), wakes their waiters, and touches nothing else.
func TestWaitsDeleteNamespace(t *testing.T) {
	h := newHarness(t)
	for i, ns := range []string{"a", "b"} {
		h.ok(cNS(ns))
		h.ok(cWGFull(ns, "g2", "", 3, h.now+int64(100+i)*sec, 0, nil))
		h.ok(cDone(ns, "g2", "j1", "j2"))
		h.ok(cWGFull(ns, "g1", "", 1, 0, 1000, nil))
		h.ok(cDone(ns, "g1", "j1"))
		h.ok(cBarFull(ns, "b2", "", 3, int64(200+i), nil))
		h.ok(cArrive(ns, "b2", "p1", 1))
		h.ok(cBar(ns, "b1", 1))
		h.ok(cArrive(ns, "b1", "p1", 1))
		h.ok(cArrive(ns, "b1", "p1", 2))
	}
	beforeB := dumpFiltered(h.f, `"b"`)
	r := h.ok(cNSDelete("a"))
	expectWoken(t, r, wgKey("a", "g1"), wgKey("a", "g2"), barKeyW("a", "b1"), barKeyW("a", "b2"))
	if strings.Contains(dumpState(h.f), `"a"`) {
		t.Fatalf("records of namespace a remain:\n%s", dumpState(h.f))
	}
	if after := dumpFiltered(h.f, `"b"`); after != beforeB {
		t.Fatalf("deleting a touched b:\n%s\n%s", beforeB, after)
	}
	if _, ok := h.f.st.waitCount["a"]; ok {
		t.Fatal("namespace a still counted")
	}
	at, _ := h.f.NextTimer()
	if w := h.wg("b", "g2"); at != w.ExpiresAt {
		t.Fatalf("next timer %d, b's first is %d", at, w.ExpiresAt)
	}
	_, err := h.f.GetWaitGroup("a", "g1", h.now)
	expectReason(t, err, CodeNotFound, ReasonNamespaceNotFound)
	// A namespace of the same name starts empty.
	h.ok(cNS("a"))
	if p, _ := h.f.ListWaitGroups("a", 0, "", h.now); len(p.Items) != 0 {
		t.Fatalf("wait groups leaked: %v", p.Items)
	}
	if p, _ := h.f.ListBarriers("a", 0, ""); len(p.Items) != 0 {
		t.Fatalf("barriers leaked: %v", p.Items)
	}
	h.ok(cBar("a", "b1", 2))
	if r := h.ok(cArrive("a", "b1", "p1", 1)); r.Barrier.ArrivedProcesses != 1 || r.Barrier.Generation != 1 {
		t.Fatalf("arrival in the new namespace: %v", r.Barrier)
	}
	// The per-namespace limits count from zero again.
	l := h.f.Limits()
	l.MaxWaitGroupsPerNamespace = 2
	h.ok(cLimits(l))
	h.ok(cWG("a", "x", 1))
	h.ok(cWG("a", "y", 1))
	h.fails(cWG("a", "z", 1), CodeResourceExhausted)
	// An empty namespace's delete wakes nothing.
	h.ok(cNS("c"))
	expectWoken(t, h.ok(cNSDelete("c")))
}

// Paging of the wait-group, job and barrier lists.
func TestWaitsPaging(t *testing.T) {
	h := newHarness(t)
	h.ok(cNS("ns"))
	var wgs, bars, ids []string
	for i := 0; i < 13; i++ {
		n := fmt.Sprintf("w%02d", 12-i)
		h.ok(cWG("ns", n, 50))
		wgs = append([]string{n}, wgs...)
		b := fmt.Sprintf("b%02d", i)
		h.ok(cBar("ns", b, 2))
		bars = append(bars, b)
	}
	for i := 0; i < 6; i++ {
		var batch []string
		for j := 0; j < 4; j++ {
			batch = append(batch, fmt.Sprintf("job-%02d", (i*7+j*5)%24))
		}
		h.ok(cDone("ns", "w03", batch...))
	}
	for _, j := range h.jobs("ns", "w03") {
		ids = append(ids, j.JobId)
	}
	if len(ids) < 10 || !sortedStrings(ids) {
		t.Fatalf("jobs not in job_id order: %v", ids)
	}
	checkPaging(t, "wait groups", func(limit int32, token string) ([]string, string, string, error) {
		p, err := h.f.ListWaitGroups("ns", limit, token, h.now)
		var ks []string
		for _, w := range p.Items {
			ks = append(ks, w.Name)
		}
		return ks, p.Next, p.Previous, err
	}, wgs, 5)
	checkPaging(t, "jobs", func(limit int32, token string) ([]string, string, string, error) {
		p, err := h.f.ListWaitGroupCompletedJobs("ns", "w03", limit, token, h.now)
		return jobIDs(p.Items), p.Next, p.Previous, err
	}, ids, 3)
	checkPaging(t, "barriers", func(limit int32, token string) ([]string, string, string, error) {
		p, err := h.f.ListBarriers("ns", limit, token)
		var ks []string
		for _, b := range p.Items {
			ks = append(ks, b.Name)
		}
		return ks, p.Next, p.Previous, err
	}, bars, 4)
	// A token of one list is refused by another.
	p, _ := h.f.ListWaitGroups("ns", 2, "", h.now)
	_, _, err := h.f.ListBarrierParticipants("ns", "b00", 0, 2, p.Next)
	expectCode(t, err, CodeInvalidArgument, "pagination_token")
	_, err = h.f.ListWaitGroupCompletedJobs("ns", "w03", 2, p.Next, h.now)
	expectCode(t, err, CodeInvalidArgument, "pagination_token")
}

func sortedStrings(s []string) bool {
	for i := 1; i < len(s); i++ {
		if s[i-1] >= s[i] {
			return false
		}
	}
	return true
}

// Wait commands packed in a Batch entry apply as entries of their own.
func TestWaitsInBatch(t *testing.T) {
	h := newHarness(t)
	h.ok(cNS("ns"))
	var packed [][]byte
	for _, c := range []*fsmpb.Command{cWG("ns", "g", 2), cDone("ns", "g", "a"), cDone("ns", "g", "a", "b"), cDone("ns", "g", "c"),
		cBar("ns", "b", 2), cArrive("ns", "b", "p", 1), cArrive("ns", "b", "q", 1), cArrive("ns", "b", "p", 1), cArrive("ns", "b", "x", 1)} {
		c.Now = h.now
		packed = append(packed, mustEncode(t, c))
	}
	r := h.ok(&fsmpb.Command{Op: &fsmpb.Command_Batch{Batch: &fsmpb.Batch{Commands: packed}}})
	rs := r.Batch
	if rs[2].NewJobs != 1 || rs[2].WaitGroup.Status != wgCompleted || len(rs[2].Woken) != 1 || rs[3].Err == nil || rs[3].Err.Reason != ReasonWaitGroupNotActive {
		t.Fatalf("wait group in a batch: %v / %v", resultString(rs[2]), resultString(rs[3]))
	}
	if !rs[6].AllArrived || len(rs[6].Woken) != 1 || !rs[7].AllArrived || rs[8].Err == nil || rs[8].Err.Reason != ReasonGenerationMismatch {
		t.Fatalf("barrier in a batch: %v / %v / %v", resultString(rs[6]), resultString(rs[7]), resultString(rs[8]))
	}
	if len(r.Woken) != 0 {
		t.Fatalf("the batch entry's own result wakes %v", r.Woken)
	}
}

// The leader's expiry loop looks next at the earlier of a lease expiry and
// a wait timer (NextDeadline), both moved by every apply.
func TestNextDeadlineCoversWaitTimers(t *testing.T) {
	h := newHarness(t)
	h.ok(cNS("ns"))
	h.ok(cLease("ns", lid(1), "p", 60))
	lease := h.now + 60*sec
	if at, ok := h.f.NextDeadline(); !ok || at != lease {
		t.Fatalf("NextDeadline %d %v, want the lease's %d", at, ok, lease)
	}
	h.ok(cWGFull("ns", "g", "", 1, h.now+10*sec, 0, nil))
	if at, ok := h.f.NextDeadline(); !ok || at != h.now+10*sec {
		t.Fatalf("NextDeadline %d %v, want the wait group's expiry", at, ok)
	}
	h.ok(cDone("ns", "g", "a"))
	if at, _ := h.f.NextDeadline(); at != lease {
		t.Fatalf("NextDeadline %d after the group completed, want %d", at, lease)
	}
	h.ok(cBarFull("ns", "b", "", 2, 5, nil))
	if at, _ := h.f.NextDeadline(); at != h.now+5*sec {
		t.Fatalf("NextDeadline %d, want the barrier's deletion", at)
	}
}
