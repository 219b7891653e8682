package check

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/grackle-coord/grackle/apierr"
	"github.com/grackle-coord/grackle/jepsen/history"
)

// The wait-group checker (docs/API.md, Wait groups; rules in DESIGN.md,
// Wait groups and barriers). Per group, from its ops (wg_*):
//
//   - wg-early-complete: COMPLETED is never observed (a view, a wait's
//     outcome, a refusal naming the status) before `counter` distinct
//     job_ids had been sent: jobs of completions invoked before the
//     observation's answer, any outcome but a certain failure (a completion
//     whose outcome is unknown may have applied). wg-completed-short: a
//     jobs read sent after COMPLETED was observed lists fewer than
//     `counter` jobs.
//   - wg-phantom: no view counts more jobs, and no jobs read lists a job,
//     than the completions sent before its answer could have completed;
//     never more than `counter`.
//   - wg-lost-completion: a read sent after a completion was acknowledged
//     counts it (completed_jobs >= the distinct jobs acknowledged before
//     the read was sent) and a jobs read lists it.
//   - wg-regressed: a read sent after another was answered never shows
//     fewer completed jobs, nor ACTIVE after a finished status.
//   - wg-finished-twice: a group is never seen both COMPLETED and EXPIRED
//     (nor with two finished_at).
//   - wg-early-expire: EXPIRED only for a group with an expires_at, and
//     with finished_at >= expires_at (the leader's timestamps, never the
//     client's clock).
//   - wg-late-completion: no job is accepted after expires_at at the
//     leader's now: an accepted completion's last_activity_at, a listed
//     job's completed_at and a COMPLETED group's finished_at are <=
//     expires_at; wg-accepted-after-finish: no completion with new jobs
//     sent after a finished status was observed is accepted.
//   - wg-inconsistent: a view agrees with itself (COMPLETED iff
//     completed_jobs == counter; a wait's outcome is its view's status).

// Checker names of the wait-group and barrier checkers.
const (
	NameWaitGroups = "waitgroup"
	NameBarriers   = "barrier"
)

func isWaitGroupKind(k string) bool {
	switch k {
	case history.WGCreate, history.WGComplete, history.WGGet, history.WGWait, history.WGJobs:
		return true
	}
	return false
}

func isBarrierKind(k string) bool {
	switch k {
	case history.BarrierCreate, history.BarrierArrive, history.BarrierWait, history.BarrierGet, history.BarrierParticipants:
		return true
	}
	return false
}

// wgObs is one observation of a group: a view (status and count), a
// status alone (a refusal), or a jobs listing.
type wgObs struct {
	op        *history.Op
	status    string // "" when unknown (a listing)
	completed int64  // -1 when unknown; a truncated listing: a lower bound
	lower     bool   // completed is only a lower bound (truncated listing)
	view      *history.WaitGroupView
}

// firstTimes maps keys (job ids, process ids) to the earliest time they
// were sent (or acknowledged), with the op that did it.
type firstTimes struct {
	at map[string]time.Duration
	by map[string]*history.Op
	ts []time.Duration // sorted, for counting
}

func newFirstTimes() *firstTimes {
	return &firstTimes{at: map[string]time.Duration{}, by: map[string]*history.Op{}}
}

func (f *firstTimes) note(key string, t time.Duration, o *history.Op) {
	if old, ok := f.at[key]; ok && old <= t {
		return
	}
	f.at[key] = t
	f.by[key] = o
}

func (f *firstTimes) seal() {
	f.ts = f.ts[:0]
	for _, t := range f.at {
		f.ts = append(f.ts, t)
	}
	sort.Slice(f.ts, func(i, j int) bool { return f.ts[i] < f.ts[j] })
}

// upTo counts the keys first seen at or before t.
func (f *firstTimes) upTo(t time.Duration) int64 {
	return int64(sort.Search(len(f.ts), func(i int) bool { return f.ts[i] > t }))
}

// before counts the keys first seen strictly before t.
func (f *firstTimes) before(t time.Duration) int64 {
	return int64(sort.Search(len(f.ts), func(i int) bool { return f.ts[i] >= t }))
}

// opsUpTo are the ops that first sent each key at or before t (at most
// max of them, earliest first).
func (f *firstTimes) opsUpTo(t time.Duration, max int) []*history.Op {
	type kv struct {
		t time.Duration
		o *history.Op
	}
	var xs []kv
	for k, at := range f.at {
		if at <= t {
			xs = append(xs, kv{at, f.by[k]})
		}
	}
	sort.Slice(xs, func(i, j int) bool { return xs[i].t < xs[j].t })
	var out []*history.Op
	seen := map[*history.Op]bool{}
	for _, x := range xs {
		if len(out) >= max {
			break
		}
		if !seen[x.o] {
			seen[x.o] = true
			out = append(out, x.o)
		}
	}
	return out
}

type wgGroup struct {
	key       string
	counter   int64 // 0: unknown
	expiresAt int64 // 0: never
	create    *history.Op
	ops       []*history.Op
	sent      *firstTimes // job -> earliest invoke of a completion that may have applied it
	acked     *firstTimes // job -> earliest acknowledgement
	obs       []wgObs
}

func wgKey(o *history.Op) string { return semKey(o.Namespace, o.WaitGroup) }

// WaitGroups checks the wait-group rules on a history.
func WaitGroups(h *history.History) Result { return waitGroups(h, 0) }

func waitGroups(h *history.History, maxAnoms int) Result {
	t0 := time.Now()
	r := Result{Name: NameWaitGroups, Stats: map[string]int64{}}
	ops := h.Sorted()
	groups := map[string]*wgGroup{}
	var order []string
	for i := range ops {
		o := &ops[i]
		if !isWaitGroupKind(o.Kind) {
			continue
		}
		k := wgKey(o)
		g := groups[k]
		if g == nil {
			g = &wgGroup{key: k, sent: newFirstTimes(), acked: newFirstTimes()}
			groups[k] = g
			order = append(order, k)
		}
		g.ops = append(g.ops, o)
	}
	if len(groups) == 0 {
		r.Valid = Valid
		r.Notes = append(r.Notes, "no wait-group operations in this history")
		r.Elapsed = time.Since(t0)
		return r
	}
	an := newAnomalies(maxAnoms)
	for _, k := range order {
		checkWaitGroup(groups[k], an, r.Stats)
	}
	r.Stats["groups"] = int64(len(groups))
	an.fill(&r)
	r.Elapsed = time.Since(t0)
	return r
}

func wgOps(ops ...*history.Op) []history.Op { return collect(ops...) }

func checkWaitGroup(g *wgGroup, an *anomalies, stats map[string]int64) {
	// The group's counter and expires_at: as asked at creation (the
	// workload never updates a group), else as the first view showed.
	for _, o := range g.ops {
		if o.Kind == history.WGCreate && o.Outcome != history.Fail && g.create == nil {
			g.create = o
			g.counter, g.expiresAt = o.Counter, o.ExpiresAt
			if o.WG != nil {
				g.counter, g.expiresAt = o.WG.Counter, o.WG.ExpiresAt
			}
		}
	}
	if g.create == nil {
		for _, o := range g.ops {
			if o.Outcome == history.OK && o.WG != nil {
				g.counter, g.expiresAt = o.WG.Counter, o.WG.ExpiresAt
				break
			}
		}
	}
	if g.counter <= 0 {
		stats["groups_never_created"]++
		return
	}

	// Jobs sent and acknowledged; observations.
	for _, o := range g.ops {
		switch o.Kind {
		case history.WGComplete:
			stats["completions"]++
			if o.Outcome != history.Fail {
				for _, j := range o.Jobs {
					g.sent.note(j, o.Invoke, o)
				}
			}
			if o.Outcome == history.OK {
				stats["completions_acked"]++
				for _, j := range o.Jobs {
					g.acked.note(j, o.Complete, o)
				}
			}
			if o.Outcome == history.Fail && o.Reason == apierr.WaitGroupNotActive && o.ErrStatus != "" {
				g.obs = append(g.obs, wgObs{op: o, status: o.ErrStatus, completed: -1})
			}
		case history.WGJobs:
			if o.Outcome == history.OK {
				g.obs = append(g.obs, wgObs{op: o, completed: int64(len(o.Listed)), lower: o.Truncated})
			}
		}
		switch {
		case o.Outcome == history.OK && o.WG != nil:
			g.obs = append(g.obs, wgObs{op: o, status: o.WG.Status, completed: o.WG.Completed, view: o.WG})
		case o.Outcome == history.OK && o.Kind == history.WGWait && o.WaitOutcome == history.WaitCompleted:
			g.obs = append(g.obs, wgObs{op: o, status: history.WGCompleted, completed: -1})
		case o.Outcome == history.OK && o.Kind == history.WGWait && o.WaitOutcome == history.WaitExpired:
			g.obs = append(g.obs, wgObs{op: o, status: history.WGExpired, completed: -1})
		}
	}
	g.sent.seal()
	g.acked.seal()
	stats["observations"] += int64(len(g.obs))

	// The earliest observation of each finished status.
	var firstDone *wgObs
	finished := map[string]*wgObs{}
	finishedAt := map[int64]*wgObs{}
	for i := range g.obs {
		ob := &g.obs[i]
		if ob.status == history.WGCompleted || ob.status == history.WGExpired {
			if f := finished[ob.status]; f == nil || ob.op.Complete < f.op.Complete {
				finished[ob.status] = ob
			}
			if firstDone == nil || ob.op.Complete < firstDone.op.Complete {
				firstDone = ob
			}
			if ob.view != nil && ob.view.FinishedAt != 0 {
				if finishedAt[ob.view.FinishedAt] == nil {
					finishedAt[ob.view.FinishedAt] = ob
				}
			}
		}
	}
	if finished[history.WGCompleted] != nil {
		stats["groups_completed"]++
	}
	if finished[history.WGExpired] != nil {
		stats["groups_expired"]++
	}
	c, e := finished[history.WGCompleted], finished[history.WGExpired]
	if c != nil && e != nil {
		an.add("wg-finished-twice", fmt.Sprintf("wait group %s was observed COMPLETED (op #%d, answered %s) and EXPIRED (op #%d, answered %s)",
			g.key, c.op.ID, secs(c.op.Complete), e.op.ID, secs(e.op.Complete)), wgOps(c.op, e.op))
	}
	if len(finishedAt) > 1 {
		var xs []*history.Op
		var ts []string
		for t, ob := range finishedAt {
			xs = append(xs, ob.op)
			ts = append(ts, fmt.Sprint(t))
		}
		sort.Strings(ts)
		an.add("wg-finished-twice", fmt.Sprintf("wait group %s was observed with %d different finished_at (%s)", g.key, len(finishedAt), strings.Join(ts, ", ")), wgOps(xs...))
	}

	// Observations completed, by answer time, for the real-time order.
	byAnswer := make([]*wgObs, 0, len(g.obs))
	for i := range g.obs {
		byAnswer = append(byAnswer, &g.obs[i])
	}
	sort.Slice(byAnswer, func(i, j int) bool { return byAnswer[i].op.Complete < byAnswer[j].op.Complete })

	for i := range g.obs {
		ob := &g.obs[i]
		o := ob.op
		at := o.Complete
		sent := g.sent.upTo(at)

		// COMPLETED before counter jobs were sent.
		if ob.status == history.WGCompleted {
			stats["completed_observations"]++
			if sent < g.counter {
				xs := append(g.sent.opsUpTo(at, 20), o)
				an.add("wg-early-complete", fmt.Sprintf("wait group %s (counter %d) observed COMPLETED by %s #%d answered at %s, when only %d distinct job_ids had been sent (completions invoked before that answer, not certainly failed)",
					g.key, g.counter, o.Kind, o.ID, secs(at), sent), wgOps(xs...))
			}
		}
		// A count or listing beyond what was sent, or beyond counter.
		if ob.completed >= 0 { // a truncated listing's count is a lower bound: too many is too many
			if ob.completed > sent {
				xs := append(g.sent.opsUpTo(at, 20), o)
				an.add("wg-phantom", fmt.Sprintf("wait group %s: %s #%d answered at %s shows %d completed jobs, but only %d distinct job_ids had been sent by then",
					g.key, o.Kind, o.ID, secs(at), ob.completed, sent), wgOps(xs...))
			}
			if ob.completed > g.counter {
				an.add("wg-phantom", fmt.Sprintf("wait group %s: %s #%d shows %d completed jobs, more than its counter %d", g.key, o.Kind, o.ID, ob.completed, g.counter), wgOps(o))
			}
		}
		if o.Kind == history.WGJobs {
			for _, j := range o.Listed {
				if t, ok := g.sent.at[j.ID]; !ok || t > at {
					an.add("wg-phantom", fmt.Sprintf("wait group %s: jobs read #%d answered at %s lists job %q, which no completion sent before that answer carried",
						g.key, o.ID, secs(at), j.ID), wgOps(o))
				}
				if g.expiresAt != 0 && j.CompletedAt > g.expiresAt {
					an.add("wg-late-completion", fmt.Sprintf("wait group %s: job %q completed at %d (leader's time), after expires_at %d (jobs read #%d)",
						g.key, j.ID, j.CompletedAt, g.expiresAt, o.ID), wgOps(o))
				}
			}
		}

		// Acknowledged completions are counted and listed.
		inv := o.Invoke
		if acked := g.acked.before(inv); ob.completed >= 0 && !ob.lower && ob.completed < acked {
			xs := append(g.acked.opsUpTo(inv-1, 20), o)
			an.add("wg-lost-completion", fmt.Sprintf("wait group %s: %s #%d sent at %s shows %d completed jobs, but %d distinct jobs had been acknowledged before it was sent",
				g.key, o.Kind, o.ID, secs(inv), ob.completed, acked), wgOps(xs...))
		}
		if o.Kind == history.WGJobs {
			listed := map[string]bool{}
			last := ""
			for _, j := range o.Listed {
				listed[j.ID] = true
				if j.ID > last {
					last = j.ID
				}
			}
			for j, t := range g.acked.at {
				if t >= inv || listed[j] || (o.Truncated && j > last) {
					continue
				}
				stats["lost_jobs"]++
				an.add("wg-lost-completion", fmt.Sprintf("wait group %s: job %q was acknowledged (op #%d, answered %s) before jobs read #%d was sent (%s), which does not list it",
					g.key, j, g.acked.by[j].ID, secs(t), o.ID, secs(inv)), wgOps(g.acked.by[j], o))
			}
			if !o.Truncated && firstDone != nil && firstDone.status == history.WGCompleted && firstDone.op.Complete < inv && int64(len(o.Listed)) < g.counter {
				an.add("wg-completed-short", fmt.Sprintf("wait group %s (counter %d) was observed COMPLETED (op #%d, answered %s) before jobs read #%d was sent, which lists only %d jobs",
					g.key, g.counter, firstDone.op.ID, secs(firstDone.op.Complete), o.ID, len(o.Listed)), wgOps(firstDone.op, o))
			}
		}

		// Real-time order: never fewer jobs, never ACTIVE after finished.
		for _, p := range byAnswer {
			if p.op.Complete >= inv {
				break
			}
			if p == ob {
				continue
			}
			if p.completed >= 0 && ob.completed >= 0 && !ob.lower && p.completed > ob.completed {
				an.add("wg-regressed", fmt.Sprintf("wait group %s: %s #%d sent at %s shows %d completed jobs, after %s #%d had shown %d (answered %s)",
					g.key, o.Kind, o.ID, secs(inv), ob.completed, p.op.Kind, p.op.ID, p.completed, secs(p.op.Complete)), wgOps(p.op, o))
				break
			}
			if ob.status == history.WGActive && (p.status == history.WGCompleted || p.status == history.WGExpired) {
				an.add("wg-regressed", fmt.Sprintf("wait group %s: %s #%d sent at %s shows ACTIVE, after %s #%d had shown %s (answered %s)",
					g.key, o.Kind, o.ID, secs(inv), p.op.Kind, p.op.ID, p.status, secs(p.op.Complete)), wgOps(p.op, o))
				break
			}
		}

		// The view against itself.
		if v := ob.view; v != nil {
			switch {
			case v.Status == history.WGCompleted && v.Completed != v.Counter:
				an.add("wg-inconsistent", fmt.Sprintf("wait group %s: %s #%d shows COMPLETED with %d of %d jobs", g.key, o.Kind, o.ID, v.Completed, v.Counter), wgOps(o))
			case v.Status != history.WGCompleted && v.Completed >= v.Counter:
				an.add("wg-inconsistent", fmt.Sprintf("wait group %s: %s #%d shows %s with %d of %d jobs", g.key, o.Kind, o.ID, v.Status, v.Completed, v.Counter), wgOps(o))
			case v.Counter != g.counter:
				an.add("wg-inconsistent", fmt.Sprintf("wait group %s: %s #%d shows counter %d, created with %d", g.key, o.Kind, o.ID, v.Counter, g.counter), wgOps(o))
			}
			if o.Kind == history.WGWait {
				want := map[string]string{history.WaitCompleted: history.WGCompleted, history.WaitExpired: history.WGExpired}[o.WaitOutcome]
				if want != "" && v.Status != want {
					an.add("wg-inconsistent", fmt.Sprintf("wait group %s: wait #%d answered %s with the group %s", g.key, o.ID, o.WaitOutcome, v.Status), wgOps(o))
				}
			}
			// Expiry against the leader's clock.
			if v.Status == history.WGExpired {
				switch {
				case g.expiresAt == 0:
					an.add("wg-early-expire", fmt.Sprintf("wait group %s never expires (expires_at 0) but %s #%d shows it EXPIRED", g.key, o.Kind, o.ID), wgOps(o))
				case v.FinishedAt != 0 && v.FinishedAt < g.expiresAt:
					an.add("wg-early-expire", fmt.Sprintf("wait group %s: %s #%d shows it EXPIRED at %d (leader's finished_at), %s before its expires_at %d",
						g.key, o.Kind, o.ID, v.FinishedAt, time.Duration(g.expiresAt-v.FinishedAt), g.expiresAt), wgOps(o))
				}
			}
			if g.expiresAt != 0 {
				if v.Status == history.WGCompleted && v.FinishedAt > g.expiresAt {
					an.add("wg-late-completion", fmt.Sprintf("wait group %s: %s #%d shows it COMPLETED at %d (leader's finished_at), %s after its expires_at %d",
						g.key, o.Kind, o.ID, v.FinishedAt, time.Duration(v.FinishedAt-g.expiresAt), g.expiresAt), wgOps(o))
				}
				if o.Kind == history.WGComplete && o.Newly > 0 && v.LastActivity > g.expiresAt {
					an.add("wg-late-completion", fmt.Sprintf("wait group %s: completion #%d was accepted (%d new jobs) at %d (leader's last_activity_at), %s after its expires_at %d",
						g.key, o.ID, o.Newly, v.LastActivity, time.Duration(v.LastActivity-g.expiresAt), g.expiresAt), wgOps(o))
				}
			}
		} else if ob.status == history.WGExpired && g.expiresAt == 0 {
			an.add("wg-early-expire", fmt.Sprintf("wait group %s never expires (expires_at 0) but %s #%d names it EXPIRED", g.key, o.Kind, o.ID), wgOps(o))
		}
	}

	// No new jobs accepted once a finished status was observed.
	if firstDone != nil {
		for _, o := range g.ops {
			if o.Kind == history.WGComplete && o.Outcome == history.OK && o.Newly > 0 && o.Invoke > firstDone.op.Complete {
				an.add("wg-accepted-after-finish", fmt.Sprintf("wait group %s: completion #%d sent at %s was accepted with %d new jobs, after %s #%d had shown the group %s (answered %s)",
					g.key, o.ID, secs(o.Invoke), o.Newly, firstDone.op.Kind, firstDone.op.ID, firstDone.status, secs(firstDone.op.Complete)), wgOps(firstDone.op, o))
			}
		}
	}
}
