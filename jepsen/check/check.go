// Package check holds the checkers of the fault-injection suite. Each one
// reads a run's history (package history) and returns a Result: "ok",
// "anomaly" with the anomalies found (each with the smallest sub-history
// that shows it), or "unknown" when the checker could not decide.
//
// The checkers follow docs/FAULTS.md:
//
//   - Linearizability: porcupine over a sequential semaphore model, time
//     taken out (workload "linear": leases never expire).
//   - Safety: the weights of holds that are certainly held, by the
//     client's conservative clock, never exceed the permits.
//   - Fencing: fencing tokens increase in grant order; a holder that was
//     certainly current never has a fenced write rejected.
//   - LostWrites: after healing, acknowledged holds whose lease is still
//     certainly alive are listed by reads; acknowledged leases are found.
//   - Liveness: the cluster serves again within a bound after healing.
//   - Access: no call of a client with every right is refused by TLS or
//     access control (runs with -secure; trivially ok without).
//   - Locks (locks*.go): no two conflicting holds certainly held at once,
//     fencing tokens increase, reads agree with acknowledged grants and
//     releases, no grant overtakes a conflicting waiter (conflict-FIFO).
//   - Wait groups and barriers (waitgroups.go, barriers.go): never
//     COMPLETED (tripped, released) before enough distinct jobs (arrivals)
//     were sent, no acknowledged completion (arrival) lost, EXPIRED only
//     after expires_at by the leader's clock, generations only increase.
package check

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/grackle-coord/grackle/jepsen/history"
)

// Verdicts (Result.Valid).
const (
	Valid   = "ok"
	Invalid = "anomaly"
	Unknown = "unknown"
)

// Checker names (Result.Name).
const (
	NameLinearizability = "linearizability"
	NameSafety          = "safety"
	NameFencing         = "fencing"
	NameLostWrites      = "lost-writes"
	NameLiveness        = "liveness"
	NameAccess          = "access"
	// The lock checkers' names are in locks.go.
)

// Result is one checker's verdict.
type Result struct {
	Name string `json:"name"`
	// Valid is "ok", "anomaly" or "unknown".
	Valid string `json:"valid"`
	// Skipped is set when the checker did not apply to this history (Valid
	// is then "unknown" and Notes say why); Overall ignores such results.
	Skipped   bool      `json:"skipped,omitempty"`
	Anomalies []Anomaly `json:"anomalies,omitempty"`
	// Stats are counters of what the checker looked at (and anomalies it
	// found beyond the ones listed, under "anomalies_not_listed").
	Stats map[string]int64 `json:"stats,omitempty"`
	// Notes explain judgment calls, unknown verdicts and limits hit.
	Notes   []string      `json:"notes,omitempty"`
	Elapsed time.Duration `json:"elapsed_ns"`
}

// Anomaly is one violation with the operations that show it.
type Anomaly struct {
	Kind        string `json:"kind"`
	Description string `json:"description"`
	// Ops is the minimal sub-history that shows the anomaly, by invoke time.
	Ops []history.Op `json:"ops"`
}

// Options of All.
type Options struct {
	// LinearizabilityTimeout bounds porcupine's search over all
	// partitions (0: 60s). When it runs out the verdict is "unknown".
	LinearizabilityTimeout time.Duration
	// MinimizeTimeout bounds the search for the smallest non-linearizable
	// prefix once a violation is found (0: the LinearizabilityTimeout).
	MinimizeTimeout time.Duration
	// VisualizationPath, when set, receives porcupine's HTML visualization
	// of the failing partitions (written only on a violation).
	VisualizationPath string
	// LinearPrefix restricts the linearizability check to semaphores with
	// this name prefix (the "linear" workload). Empty: the history's
	// Meta["linear_prefix"]; if that is empty too, every semaphore.
	LinearPrefix string
	// LivenessBound is how soon after healing the cluster must serve again
	// (0: 30s).
	LivenessBound time.Duration
	// MaxAnomalies caps the anomalies listed per checker (0: 25); the rest
	// are counted in Stats["anomalies_not_listed"].
	MaxAnomalies int
}

func (o Options) withDefaults() Options {
	if o.LinearizabilityTimeout <= 0 {
		o.LinearizabilityTimeout = 60 * time.Second
	}
	if o.MinimizeTimeout <= 0 {
		o.MinimizeTimeout = o.LinearizabilityTimeout
	}
	if o.LivenessBound <= 0 {
		o.LivenessBound = 30 * time.Second
	}
	if o.MaxAnomalies <= 0 {
		o.MaxAnomalies = defaultMaxAnomalies
	}
	return o
}

const defaultMaxAnomalies = 25

// All runs every checker.
func All(h *history.History, opts Options) []Result {
	opts = opts.withDefaults()
	results := []Result{
		LinearizabilityWith(h, LinOptions{
			Timeout:           opts.LinearizabilityTimeout,
			MinimizeTimeout:   opts.MinimizeTimeout,
			VisualizationPath: opts.VisualizationPath,
			Prefix:            opts.LinearPrefix,
			MaxAnomalies:      opts.MaxAnomalies,
		}),
		safety(h, opts.MaxAnomalies),
		fencing(h, opts.MaxAnomalies),
		lostWrites(h, opts.MaxAnomalies),
		Liveness(h, opts.LivenessBound),
		access(h, opts.MaxAnomalies),
	}
	lx := newLockIx(h)
	return append(results,
		lockSafety(h, lx, opts.MaxAnomalies),
		lockFencing(h, lx, opts.MaxAnomalies),
		lockLost(h, lx, opts.MaxAnomalies),
		lockFIFO(h, lx, opts.MaxAnomalies),
		waitGroups(h, opts.MaxAnomalies),
		barriers(h, opts.MaxAnomalies),
	)
}

// Overall folds verdicts: "anomaly" if any checker found one, else
// "unknown" if any could not decide, else "ok". Skipped results are ignored.
func Overall(results []Result) string {
	v := Valid
	for _, r := range results {
		if r.Skipped {
			continue
		}
		switch r.Valid {
		case Invalid:
			return Invalid
		case Unknown:
			v = Unknown
		}
	}
	return v
}

// ---- shared helpers ----

// inf is the open end of an indeterminate op.
const inf = time.Duration(math.MaxInt64)

// end is when op certainly completed: +inf for an indeterminate op.
func end(o *history.Op) time.Duration {
	if o.Outcome == history.Info {
		return inf
	}
	if o.Complete < o.Invoke {
		return o.Invoke
	}
	return o.Complete
}

// precedes: a completed before b was invoked, so a took effect (if at
// all) before b did.
func precedes(a, b *history.Op) bool {
	return a.Outcome != history.Info && end(a) < b.Invoke
}

func granted(o *history.Op) bool {
	return o.Kind == history.Acquire && o.Outcome == history.OK && o.AcquireOutcome == history.Acquired
}

// semKey names a semaphore across namespaces.
func semKey(ns, sem string) string {
	if ns == "" {
		return sem
	}
	return ns + "/" + sem
}

func opSem(o *history.Op) string { return semKey(o.Namespace, o.Semaphore) }

// isLockKind: an op of the lock workload.
func isLockKind(kind string) bool {
	switch kind {
	case history.LockCreateLease, history.LockRefresh, history.LockRevoke, history.LockAcquire,
		history.LockRelease, history.GetLock, history.ListLocks, history.LockWaiters:
		return true
	}
	return false
}

// opObject names what an op is about, for people: "semaphore ns/s",
// "lock ns/a/b", or the namespace.
func opObject(o *history.Op) string {
	switch {
	case isLockKind(o.Kind) && (o.Lock != "" || o.Kind == history.ListLocks):
		return "lock " + semKey(o.Namespace, o.Lock)
	case o.Semaphore != "":
		return "semaphore " + opSem(o)
	case isWaitGroupKind(o.Kind):
		return "wait group " + wgKey(o)
	case isBarrierKind(o.Kind):
		return "barrier " + barrierKey(o)
	}
	return "namespace " + o.Namespace
}

// permitsOf looks a semaphore's permits up by name (or ns/name).
func permitsOf(h *history.History, ns, sem string) (int64, bool) {
	if p, ok := h.Permits[semKey(ns, sem)]; ok {
		return p, true
	}
	p, ok := h.Permits[sem]
	return p, ok
}

func ttlOf(o *history.Op) time.Duration { return time.Duration(o.TTL) * time.Second }

// sortOps orders ops by invoke time, then id, dropping duplicates (by id).
func sortOps(ops []history.Op) []history.Op {
	sort.SliceStable(ops, func(i, j int) bool {
		if ops[i].Invoke != ops[j].Invoke {
			return ops[i].Invoke < ops[j].Invoke
		}
		return ops[i].ID < ops[j].ID
	})
	out := ops[:0]
	seen := map[int]bool{}
	for _, o := range ops {
		if o.ID != 0 && seen[o.ID] {
			continue
		}
		seen[o.ID] = true
		out = append(out, o)
	}
	return out
}

func collect(ops ...*history.Op) []history.Op {
	var out []history.Op
	for _, o := range ops {
		if o != nil {
			out = append(out, *o)
		}
	}
	return sortOps(out)
}

// anomalies accumulates a checker's findings up to a cap.
type anomalies struct {
	max     int
	list    []Anomaly
	dropped int64
	kinds   map[string]int64
}

func newAnomalies(max int) *anomalies {
	if max <= 0 {
		max = defaultMaxAnomalies
	}
	return &anomalies{max: max, kinds: map[string]int64{}}
}

func (a *anomalies) add(kind, desc string, ops []history.Op) {
	a.kinds[kind]++
	if len(a.list) >= a.max {
		a.dropped++
		return
	}
	a.list = append(a.list, Anomaly{Kind: kind, Description: desc, Ops: ops})
}

func (a *anomalies) fill(r *Result) {
	r.Anomalies = a.list
	if r.Stats == nil {
		r.Stats = map[string]int64{}
	}
	for k, n := range a.kinds {
		r.Stats["anomaly:"+k] = n
	}
	if a.dropped > 0 {
		r.Stats["anomalies_not_listed"] = a.dropped
	}
	if len(a.list) > 0 {
		r.Valid = Invalid
	} else if r.Valid == "" {
		r.Valid = Valid
	}
}

// secs formats a run time as seconds with microseconds.
func secs(d time.Duration) string {
	if d == inf {
		return "∞"
	}
	return fmt.Sprintf("%.6fs", d.Seconds())
}

func shortLease(l string) string {
	if len(l) > 14 {
		return l[:11] + "…"
	}
	return l
}

// FormatOp renders an op on one line, e.g.
//
//	#12 p3 acquire jepsen/lin-0 lease=ls_abc w=2 [1.234500s → 1.240000s] ok ACQUIRED token=57
func FormatOp(o history.Op) string {
	var b strings.Builder
	fmt.Fprintf(&b, "#%d p%d %s", o.ID, o.Process, o.Kind)
	if isLockKind(o.Kind) {
		if o.Lock != "" || o.Kind == history.ListLocks {
			fmt.Fprintf(&b, " %s", semKey(o.Namespace, o.Lock))
		} else if o.Namespace != "" {
			fmt.Fprintf(&b, " %s", o.Namespace)
		}
	} else if isWaitGroupKind(o.Kind) {
		fmt.Fprintf(&b, " %s", wgKey(&o))
	} else if isBarrierKind(o.Kind) {
		fmt.Fprintf(&b, " %s", barrierKey(&o))
	} else if o.Semaphore != "" {
		fmt.Fprintf(&b, " %s", semKey(o.Namespace, o.Semaphore))
	} else if o.Namespace != "" {
		fmt.Fprintf(&b, " %s", o.Namespace)
	}
	if o.Lease != "" {
		fmt.Fprintf(&b, " lease=%s", o.Lease)
	}
	switch o.Kind {
	case history.Acquire:
		fmt.Fprintf(&b, " w=%d timeout=%ds", o.Weight, o.Timeout)
	case history.CreateLease, history.Refresh, history.LockCreateLease, history.LockRefresh:
		fmt.Fprintf(&b, " ttl=%ds", o.TTL)
	case history.LockAcquire:
		fmt.Fprintf(&b, " %s timeout=%ds", modeName(o.Exclusive), o.Timeout)
	case history.WGCreate:
		fmt.Fprintf(&b, " counter=%d expires_at=%d", o.Counter, o.ExpiresAt)
	case history.WGComplete:
		fmt.Fprintf(&b, " jobs=%v", o.Jobs)
	case history.WGWait, history.BarrierWait:
		if o.Kind == history.BarrierWait {
			fmt.Fprintf(&b, " gen=%d", o.Generation)
		}
		fmt.Fprintf(&b, " timeout=%ds", o.Timeout)
	case history.BarrierCreate:
		fmt.Fprintf(&b, " expected=%d", o.Expected)
	case history.BarrierArrive:
		fmt.Fprintf(&b, " process=%s gen=%d", o.BarrierProcess, o.Generation)
	case history.BarrierParticipants:
		fmt.Fprintf(&b, " gen=%d", o.Generation)
	}
	if o.Outcome == history.Info {
		fmt.Fprintf(&b, " [%s → open]", secs(o.Invoke))
	} else {
		fmt.Fprintf(&b, " [%s → %s]", secs(o.Invoke), secs(o.Complete))
	}
	fmt.Fprintf(&b, " %s", o.Outcome)
	if o.Node != "" {
		fmt.Fprintf(&b, " via=%s", o.Node)
	}
	if o.Outcome == history.OK {
		switch o.Kind {
		case history.Acquire:
			fmt.Fprintf(&b, " %s", o.AcquireOutcome)
			if o.AcquireOutcome == history.Acquired {
				fmt.Fprintf(&b, " token=%d", o.Token)
			}
		case history.GetSemaphore:
			fmt.Fprintf(&b, " active_holds=%d holders_count=%d", o.ActiveHolds, o.HoldersCount)
		case history.ListHolders:
			parts := make([]string, 0, len(o.Holders))
			for _, x := range o.Holders {
				parts = append(parts, fmt.Sprintf("%s:w%d:t%d", x.Lease, x.Weight, x.Token))
			}
			fmt.Fprintf(&b, " holders=[%s]", strings.Join(parts, " "))
		case history.FenceWrite:
			fmt.Fprintf(&b, " token=%d accepted=%v", o.Token, o.Accepted)
		case history.LockAcquire:
			fmt.Fprintf(&b, " %s", o.AcquireOutcome)
			if o.AcquireOutcome == history.Acquired {
				fmt.Fprintf(&b, " token=%d", o.Token)
			} else if o.Contention != "" {
				fmt.Fprintf(&b, " reason=%s blocking=%v", o.Contention, o.Blocking)
			}
		case history.LockRelease:
			fmt.Fprintf(&b, " released=%v", o.Released)
		case history.GetLock, history.ListLocks:
			parts := []string{}
			for _, l := range o.Locks {
				hs := make([]string, 0, len(l.Holders))
				for _, x := range l.Holders {
					hs = append(hs, fmt.Sprintf("%s:%s:t%d", x.Lease, modeName(x.Exclusive)[:2], x.Token))
				}
				parts = append(parts, fmt.Sprintf("%s{%s}", l.Name, strings.Join(hs, " ")))
			}
			fmt.Fprintf(&b, " locks=[%s]", strings.Join(parts, " "))
			if o.Truncated {
				b.WriteString(" truncated")
			}
		case history.LockWaiters:
			parts := make([]string, 0, len(o.Waiters))
			for _, x := range o.Waiters {
				p := fmt.Sprintf("%d:%s:%s", x.Position, x.Lease, modeName(x.Exclusive)[:2])
				if x.Upgrade {
					p += ":upgrade"
				}
				parts = append(parts, p)
			}
			fmt.Fprintf(&b, " waiters=[%s]", strings.Join(parts, " "))
		}
	}
	if o.Outcome == history.OK {
		formatWaitResult(&b, o)
	}
	if o.ErrStatus != "" {
		fmt.Fprintf(&b, " status=%s", o.ErrStatus)
	}
	if o.CurrentGeneration != 0 {
		fmt.Fprintf(&b, " current_gen=%d", o.CurrentGeneration)
	}
	if o.Error != "" {
		fmt.Fprintf(&b, " error=%q", o.Error)
	}
	return b.String()
}

// formatWaitResult renders what a wait-group or barrier answer showed.
func formatWaitResult(b *strings.Builder, o history.Op) {
	if o.WaitOutcome != "" {
		fmt.Fprintf(b, " %s", o.WaitOutcome)
	}
	if v := o.WG; v != nil {
		fmt.Fprintf(b, " wg{%s %d/%d", v.Status, v.Completed, v.Counter)
		if v.ExpiresAt != 0 {
			fmt.Fprintf(b, " expires_at=%d", v.ExpiresAt)
		}
		if v.FinishedAt != 0 {
			fmt.Fprintf(b, " finished_at=%d", v.FinishedAt)
		}
		if v.LastActivity != 0 {
			fmt.Fprintf(b, " last_activity_at=%d", v.LastActivity)
		}
		b.WriteString("}")
	}
	if o.Kind == history.WGComplete {
		fmt.Fprintf(b, " newly=%d", o.Newly)
	}
	if o.Kind == history.WGJobs {
		ids := make([]string, len(o.Listed))
		for i, j := range o.Listed {
			ids[i] = j.ID
		}
		fmt.Fprintf(b, " listed=[%s]", strings.Join(ids, " "))
		if o.Truncated {
			b.WriteString(" truncated")
		}
	}
	if v := o.B; v != nil {
		fmt.Fprintf(b, " barrier{gen=%d arrived=%d/%d}", v.Generation, v.Arrived, v.Expected)
	}
	if o.Kind == history.BarrierArrive {
		fmt.Fprintf(b, " all_arrived=%v", o.AllArrived)
	}
	if o.Kind == history.BarrierParticipants {
		ps := make([]string, len(o.Participants))
		for i, p := range o.Participants {
			ps[i] = p.Process
		}
		fmt.Fprintf(b, " listed_gen=%d participants=[%s]", o.ListedGeneration, strings.Join(ps, " "))
		if o.Truncated {
			b.WriteString(" truncated")
		}
	}
}
