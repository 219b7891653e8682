package check

import (
	"testing"

	"github.com/grackle-coord/grackle/apierr"
	"github.com/grackle-coord/grackle/jepsen/history"
)

// Builders of hand-written wait-group and barrier histories (times in
// milliseconds, as hb; leader timestamps are plain numbers).

func wv(status string, completed, counter int64) *history.WaitGroupView {
	return &history.WaitGroupView{Status: status, Completed: completed, Counter: counter}
}

func (b *hb) wgCreate(p int, wg string, counter, expiresAt int64, inv, comp float64) int {
	v := wv(history.WGActive, 0, counter)
	v.ExpiresAt = expiresAt
	return b.add(history.Op{Process: p, Kind: history.WGCreate, WaitGroup: wg, Counter: counter, ExpiresAt: expiresAt, WG: v}, inv, comp)
}

// wgDone completes jobs; outcome "" (ok, with the view), Info or Fail.
func (b *hb) wgDone(p int, wg string, jobs []string, inv, comp float64, outcome string, v *history.WaitGroupView, newly int64) int {
	o := history.Op{Process: p, Kind: history.WGComplete, WaitGroup: wg, Jobs: jobs, Outcome: outcome}
	if outcome == "" {
		o.WG, o.Newly = v, newly
	} else if outcome == history.Fail {
		o.Code = "InvalidArgument"
	}
	return b.add(o, inv, comp)
}

// wgRefused: a completion refused WAIT_GROUP_NOT_ACTIVE naming status.
func (b *hb) wgRefused(p int, wg string, jobs []string, inv, comp float64, status string) int {
	return b.add(history.Op{Process: p, Kind: history.WGComplete, WaitGroup: wg, Jobs: jobs, Outcome: history.Fail,
		Code: "FailedPrecondition", Reason: apierr.WaitGroupNotActive, ErrStatus: status}, inv, comp)
}

func (b *hb) wgGet(p int, wg string, inv, comp float64, v *history.WaitGroupView) int {
	return b.add(history.Op{Process: p, Kind: history.WGGet, WaitGroup: wg, WG: v}, inv, comp)
}

func (b *hb) wgWait(p int, wg string, inv, comp float64, outcome string, v *history.WaitGroupView) int {
	return b.add(history.Op{Process: p, Kind: history.WGWait, WaitGroup: wg, Timeout: 1, WaitOutcome: outcome, WG: v}, inv, comp)
}

func (b *hb) wgJobs(p int, wg string, inv, comp float64, ids ...string) int {
	o := history.Op{Process: p, Kind: history.WGJobs, WaitGroup: wg}
	for _, id := range ids {
		o.Listed = append(o.Listed, history.WaitGroupJob{ID: id})
	}
	return b.add(o, inv, comp)
}

func finishedView(status string, completed, counter, expiresAt, finishedAt int64) *history.WaitGroupView {
	v := wv(status, completed, counter)
	v.ExpiresAt, v.FinishedAt = expiresAt, finishedAt
	return v
}

func activeView(completed, counter, expiresAt, lastActivity int64) *history.WaitGroupView {
	v := wv(history.WGActive, completed, counter)
	v.ExpiresAt, v.LastActivity = expiresAt, lastActivity
	return v
}

func wgOK(t *testing.T, h *history.History) {
	t.Helper()
	if r := WaitGroups(h); r.Valid != Valid {
		t.Errorf("%s: %s, want ok\n%s", r.Name, r.Valid, dump(r))
	}
}

func jobs(ids ...string) []string { return ids }

// A legal history: retries, a completion of unknown outcome that made
// the count, the batch that completes the group retried afterwards, a
// refusal after it, a wait, and a group that expires.
func TestWaitGroupLegal(t *testing.T) {
	b := newHB(nil)
	b.wgCreate(1, "g", 3, 0, 0, 5)
	b.wgDone(1, "g", jobs("a"), 10, 20, "", activeView(1, 3, 0, 100), 1)
	b.wgDone(2, "g", jobs("b"), 12, 0, history.Info, nil, 0)
	b.wgDone(3, "g", jobs("a", "a"), 22, 30, "", activeView(1, 3, 0, 100), 0)
	b.wgGet(4, "g", 31, 35, activeView(2, 3, 0, 110)) // b applied after all
	b.wgWait(5, "g", 32, 70, history.WaitCompleted, finishedView(history.WGCompleted, 3, 3, 0, 200))
	b.wgDone(3, "g", jobs("c"), 40, 60, "", finishedView(history.WGCompleted, 3, 3, 0, 200), 1)
	b.wgDone(3, "g", jobs("c", "a"), 61, 65, "", finishedView(history.WGCompleted, 3, 3, 0, 200), 0) // retried after it completed
	b.wgRefused(1, "g", jobs("d"), 66, 68, history.WGCompleted)
	b.wgJobs(4, "g", 70, 75, "a", "b", "c")
	b.wgGet(4, "g", 80, 85, finishedView(history.WGCompleted, 3, 3, 0, 200))

	// Expiring: expires_at 1000 (leader's time).
	b.wgCreate(1, "x", 4, 1000, 100, 105)
	b.wgDone(1, "x", jobs("a", "b"), 110, 120, "", activeView(2, 4, 1000, 990), 2)
	b.wgDone(2, "x", jobs("c"), 115, 0, history.Info, nil, 0) // may apply before or after expiry: refused, or counted
	b.wgWait(3, "x", 110, 200, history.WaitExpired, finishedView(history.WGExpired, 2, 4, 1000, 1000))
	b.wgRefused(1, "x", jobs("d"), 210, 215, history.WGExpired)
	b.wgDone(1, "x", jobs("a"), 220, 225, "", finishedView(history.WGExpired, 2, 4, 1000, 1000), 0) // an acknowledged job retried
	b.wgJobs(4, "x", 230, 235, "a", "b")
	wgOK(t, b.h)
	b.h.ServedAgainAt = ms(1)
	allOK(t, b.h)
}

func TestWaitGroupEarlyComplete(t *testing.T) {
	// The server completes the group at the second job of three.
	b := newHB(nil)
	b.wgCreate(1, "g", 3, 0, 0, 5)
	b.wgDone(1, "g", jobs("a"), 10, 20, "", activeView(1, 3, 0, 100), 1)
	early := b.wgDone(2, "g", jobs("b"), 21, 30, "", finishedView(history.WGCompleted, 2, 3, 0, 110), 1)
	last := b.wgDone(3, "g", jobs("c"), 40, 45, history.Fail, nil, 0)
	r := WaitGroups(b.h)
	a := expect(t, r, Invalid, "wg-early-complete")
	if !hasOps(a, early) || hasOps(a, last) {
		t.Errorf("anomaly ops: %v", a.Ops)
	}
	expect(t, r, Invalid, "wg-inconsistent")

	// A read shows it COMPLETED (3 of 3) before the third job was sent;
	// the one that was sent and failed for certain does not count.
	b = newHB(nil)
	b.wgCreate(1, "g", 3, 0, 0, 5)
	b.wgDone(1, "g", jobs("a", "b"), 10, 20, "", activeView(2, 3, 0, 100), 2)
	b.wgDone(2, "g", jobs("c", "d", "e"), 21, 25, history.Fail, nil, 0) // too many jobs
	b.wgGet(3, "g", 30, 40, finishedView(history.WGCompleted, 3, 3, 0, 110))
	b.wgDone(2, "g", jobs("c"), 41, 45, "", finishedView(history.WGCompleted, 3, 3, 0, 110), 0)
	r = WaitGroups(b.h)
	expect(t, r, Invalid, "wg-early-complete")
	expect(t, r, Invalid, "wg-phantom")

	// A wait's outcome alone (no view) counts as an observation.
	b = newHB(nil)
	b.wgCreate(1, "g", 2, 0, 0, 5)
	b.wgDone(1, "g", jobs("a"), 10, 20, "", activeView(1, 2, 0, 100), 1)
	b.wgWait(3, "g", 15, 30, history.WaitCompleted, nil)
	expect(t, WaitGroups(b.h), Invalid, "wg-early-complete")

	// The same with the second job in flight (unknown outcome): legal.
	b = newHB(nil)
	b.wgCreate(1, "g", 2, 0, 0, 5)
	b.wgDone(1, "g", jobs("a"), 10, 20, "", activeView(1, 2, 0, 100), 1)
	b.wgDone(2, "g", jobs("b"), 25, 0, history.Info, nil, 0)
	b.wgWait(3, "g", 15, 30, history.WaitCompleted, finishedView(history.WGCompleted, 2, 2, 0, 120))
	b.wgJobs(3, "g", 31, 35, "a", "b")
	wgOK(t, b.h)
}

func TestWaitGroupCompletedShort(t *testing.T) {
	b := newHB(nil)
	b.wgCreate(1, "g", 3, 0, 0, 5)
	b.wgDone(1, "g", jobs("a", "b", "c"), 10, 0, history.Info, nil, 0)
	b.wgGet(3, "g", 30, 40, finishedView(history.WGCompleted, 3, 3, 0, 110))
	b.wgJobs(3, "g", 50, 55, "a", "b")
	expect(t, WaitGroups(b.h), Invalid, "wg-completed-short")
}

func TestWaitGroupLost(t *testing.T) {
	b := newHB(nil)
	b.wgCreate(1, "g", 5, 0, 0, 5)
	b.wgDone(1, "g", jobs("a", "b"), 10, 20, "", activeView(2, 5, 0, 100), 2)
	get := b.wgGet(2, "g", 30, 35, activeView(1, 5, 0, 100))
	list := b.wgJobs(2, "g", 40, 45, "a")
	r := WaitGroups(b.h)
	a := expect(t, r, Invalid, "wg-lost-completion")
	if !hasOps(a, get) {
		t.Errorf("first lost anomaly: %v", a.Ops)
	}
	found := false
	for _, a := range r.Anomalies {
		if a.Kind == "wg-lost-completion" && hasOps(&a, list) {
			found = true
		}
	}
	if !found {
		t.Errorf("the jobs read that misses b is not flagged\n%s", dump(r))
	}

	// Concurrent with the acknowledgement, the read may miss it; a
	// truncated listing is only checked up to its last job.
	b = newHB(nil)
	b.wgCreate(1, "g", 5, 0, 0, 5)
	b.wgDone(1, "g", jobs("a", "z"), 10, 20, "", activeView(2, 5, 0, 100), 2)
	b.wgGet(2, "g", 15, 35, activeView(0, 5, 0, 100))
	o := b.wgJobs(2, "g", 40, 45, "a")
	b.h.Ops[o-1].Truncated = true
	wgOK(t, b.h)
}

func TestWaitGroupRegressed(t *testing.T) {
	b := newHB(nil)
	b.wgCreate(1, "g", 5, 0, 0, 5)
	b.wgDone(1, "g", jobs("a", "b"), 10, 0, history.Info, nil, 0)
	b.wgGet(2, "g", 20, 25, activeView(2, 5, 0, 100))
	b.wgGet(3, "g", 30, 35, activeView(1, 5, 0, 100))
	expect(t, WaitGroups(b.h), Invalid, "wg-regressed")

	b = newHB(nil)
	b.wgCreate(1, "g", 5, 100, 0, 5)
	b.wgGet(2, "g", 20, 25, finishedView(history.WGExpired, 0, 5, 100, 100))
	b.wgGet(3, "g", 30, 35, activeView(0, 5, 100, 50))
	expect(t, WaitGroups(b.h), Invalid, "wg-regressed")
}

func TestWaitGroupFinishedTwice(t *testing.T) {
	b := newHB(nil)
	b.wgCreate(1, "g", 1, 1000, 0, 5)
	b.wgDone(1, "g", jobs("a"), 10, 0, history.Info, nil, 0)
	b.wgGet(2, "g", 20, 25, finishedView(history.WGCompleted, 1, 1, 1000, 900))
	b.wgRefused(3, "g", jobs("b"), 30, 35, history.WGExpired)
	expect(t, WaitGroups(b.h), Invalid, "wg-finished-twice")
}

func TestWaitGroupEarlyExpire(t *testing.T) {
	b := newHB(nil)
	b.wgCreate(1, "g", 3, 1000, 0, 5)
	b.wgGet(2, "g", 20, 25, finishedView(history.WGExpired, 0, 3, 1000, 999))
	expect(t, WaitGroups(b.h), Invalid, "wg-early-expire")

	b = newHB(nil)
	b.wgCreate(1, "g", 3, 0, 0, 5)
	b.wgRefused(3, "g", jobs("b"), 30, 35, history.WGExpired)
	expect(t, WaitGroups(b.h), Invalid, "wg-early-expire")
}

func TestWaitGroupLateCompletion(t *testing.T) {
	b := newHB(nil)
	b.wgCreate(1, "g", 3, 1000, 0, 5)
	b.wgDone(1, "g", jobs("a"), 10, 20, "", activeView(1, 3, 1000, 1001), 1)
	expect(t, WaitGroups(b.h), Invalid, "wg-late-completion")

	b = newHB(nil)
	b.wgCreate(1, "g", 1, 1000, 0, 5)
	b.wgDone(1, "g", jobs("a"), 10, 20, "", finishedView(history.WGCompleted, 1, 1, 1000, 1200), 1)
	expect(t, WaitGroups(b.h), Invalid, "wg-late-completion")

	b = newHB(nil)
	b.wgCreate(1, "g", 3, 1000, 0, 5)
	b.wgDone(1, "g", jobs("a"), 10, 0, history.Info, nil, 0)
	o := b.wgJobs(2, "g", 30, 35, "a")
	b.h.Ops[o-1].Listed[0].CompletedAt = 1500
	expect(t, WaitGroups(b.h), Invalid, "wg-late-completion")

	// At expires_at exactly: tolerated either way.
	b = newHB(nil)
	b.wgCreate(1, "g", 3, 1000, 0, 5)
	b.wgDone(1, "g", jobs("a"), 10, 20, "", activeView(1, 3, 1000, 1000), 1)
	b.wgGet(2, "g", 30, 35, finishedView(history.WGExpired, 1, 3, 1000, 1000))
	wgOK(t, b.h)
}

func TestWaitGroupAcceptedAfterFinish(t *testing.T) {
	b := newHB(nil)
	b.wgCreate(1, "g", 3, 1000, 0, 5)
	b.wgGet(2, "g", 20, 25, finishedView(history.WGExpired, 0, 3, 1000, 1000))
	b.wgDone(1, "g", jobs("a"), 30, 40, "", finishedView(history.WGExpired, 1, 3, 1000, 1000), 1)
	expect(t, WaitGroups(b.h), Invalid, "wg-accepted-after-finish")
}

func TestWaitGroupPhantom(t *testing.T) {
	b := newHB(nil)
	b.wgCreate(1, "g", 3, 0, 0, 5)
	b.wgDone(1, "g", jobs("a"), 10, 20, "", activeView(1, 3, 0, 100), 1)
	b.wgJobs(2, "g", 30, 35, "a", "q")
	expect(t, WaitGroups(b.h), Invalid, "wg-phantom")

	b = newHB(nil)
	b.wgCreate(1, "g", 3, 0, 0, 5)
	b.wgDone(1, "g", jobs("a"), 10, 20, "", activeView(2, 3, 0, 100), 1) // counted twice
	expect(t, WaitGroups(b.h), Invalid, "wg-phantom")
}

func TestWaitGroupInconsistent(t *testing.T) {
	b := newHB(nil)
	b.wgCreate(1, "g", 2, 0, 0, 5)
	b.wgDone(1, "g", jobs("a", "b"), 10, 20, "", activeView(2, 2, 0, 100), 2)
	expect(t, WaitGroups(b.h), Invalid, "wg-inconsistent")

	b = newHB(nil)
	b.wgCreate(1, "g", 2, 0, 0, 5)
	b.wgDone(1, "g", jobs("a", "b"), 10, 20, "", finishedView(history.WGCompleted, 2, 2, 0, 100), 2)
	b.wgWait(3, "g", 15, 30, history.WaitExpired, finishedView(history.WGCompleted, 2, 2, 0, 100))
	expect(t, WaitGroups(b.h), Invalid, "wg-inconsistent")
}

func TestWaitGroupNoOps(t *testing.T) {
	b := newHB(nil)
	r := WaitGroups(b.h)
	if r.Valid != Valid || len(r.Notes) == 0 {
		t.Fatalf("empty history: %s %v", r.Valid, r.Notes)
	}
}
