package check

import (
	"fmt"
	"runtime"
	"sort"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/grackle-coord/grackle/jepsen/history"
)

// The linearizability checker (docs/FAULTS.md, Linearizability with time taken out). Time is taken out:
// in the "linear" workload every lease outlives the run, so a semaphore is
// a plain sequential object:
//
//	state:    permits (constant, carried by every input) and the holders,
//	          lease -> weight, sorted by lease (canonical, so equal states
//	          compare equal and hash alike)
//	acquire   ACQUIRED: legal iff sum(other holders) + w <= permits; the
//	          lease then holds w (a re-acquire replaces its old weight)
//	acquire   UNAVAILABLE / TIMED_OUT: legal, no change (the FIFO queue is
//	          not modelled)
//	acquire   indeterminate: acquires w if it fits, else no change; that it
//	          did not happen at all is the linearization at the open end
//	release   removes the lease's hold (legal always)
//	revoke    removes the lease's hold on this semaphore (one op per
//	          semaphore: the op's Semaphore, or when empty every semaphore
//	          the lease ever acquired) and deletes the lease (see linStep)
//	get       legal iff active_holds == sum of weights and holders_count ==
//	          number of holders
//	holders   legal iff the listed lease -> weight set is exactly the state
//	acquire or revoke answered NotFound: legal iff the lease was revoked
//	          (leases do not expire in this workload, and nothing else
//	          deletes one)
//
// Failed ops (Outcome Fail) change nothing, so they are left out, except
// that an acquire or revoke answered NotFound is kept as the evidence that
// its lease is gone; indeterminate reads are left out too. Indeterminate
// mutations get a return time past the end of their partition
// (porcupine's open end), or the answer time of the revoke that deleted
// their lease (see porcOps). create_lease, refresh and fence_write are not
// part of this model.
//
// The history is partitioned by semaphore (Model.Partition) and each
// partition is checked on its own, in parallel, under one deadline.

// LinOptions configure LinearizabilityWith.
type LinOptions struct {
	// Timeout bounds the check of all partitions (<= 0: no bound).
	Timeout time.Duration
	// MinimizeTimeout bounds the search for a minimal sub-history after a
	// violation (<= 0: Timeout, or 60s when Timeout is unbounded).
	MinimizeTimeout time.Duration
	// VisualizationPath: where to write porcupine's HTML visualization of
	// the failing partitions ("" = none).
	VisualizationPath string
	// Prefix restricts the check to semaphores whose name starts with it
	// ("" = the history's Meta["linear_prefix"], or every semaphore).
	Prefix string
	// MaxAnomalies caps the anomalies listed (0: 25).
	MaxAnomalies int
}

// Linearizability checks the history with porcupine (see LinOptions for
// the defaults: semaphores of Meta["linear_prefix"], no visualization).
func Linearizability(h *history.History, timeout time.Duration) Result {
	return LinearizabilityWith(h, LinOptions{Timeout: timeout})
}

// LinearizabilityWith is Linearizability with options.
func LinearizabilityWith(h *history.History, o LinOptions) Result {
	t0 := time.Now()
	r := Result{Name: NameLinearizability, Stats: map[string]int64{}}
	prefix := o.Prefix
	if prefix == "" && h.Meta != nil {
		prefix = h.Meta["linear_prefix"]
	}
	if prefix != "" {
		r.Notes = append(r.Notes, fmt.Sprintf("semaphores with prefix %q (the linear workload)", prefix))
	}
	ops := buildLinOps(h, prefix, &r)
	porc := make([]porcupine.Operation, len(ops))
	for i, lo := range ops {
		porc[i] = porcupine.Operation{Input: lo.in, Metadata: lo}
	}
	var parts [][]*linOp
	for _, p := range linModel.Partition(porc) {
		part := make([]*linOp, len(p))
		for i, x := range p {
			part[i] = x.Metadata.(*linOp)
		}
		parts = append(parts, part)
	}
	sort.Slice(parts, func(i, j int) bool { return parts[i][0].in.sem < parts[j][0].in.sem })
	r.Stats["partitions"] = int64(len(parts))
	r.Stats["ops"] = int64(len(ops))
	for _, lo := range ops {
		if lo.out.pending {
			r.Stats["indeterminate_ops"]++
		}
	}
	if len(parts) == 0 {
		r.Valid = Unknown
		r.Skipped = true
		r.Notes = append(r.Notes, "no semaphore operations in scope: nothing to check")
		r.Elapsed = time.Since(t0)
		return r
	}

	// Check every partition, in parallel, under one deadline.
	var deadline time.Time
	if o.Timeout > 0 {
		deadline = t0.Add(o.Timeout)
	}
	verdicts := make([]porcupine.CheckResult, len(parts))
	var wg sync.WaitGroup
	sem := make(chan struct{}, max(1, runtime.GOMAXPROCS(0)))
	for i := range parts {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			verdicts[i] = checkPorc(porcOps(parts[i], -1), deadline)
		}(i)
	}
	wg.Wait()

	// The search budget after a violation (or a timeout).
	mbudget := o.MinimizeTimeout
	if mbudget <= 0 {
		mbudget = o.Timeout
	}
	if mbudget <= 0 {
		mbudget = 60 * time.Second
	}
	mdeadline := time.Now().Add(mbudget)

	// A partition that timed out may still have a short prefix that is
	// provably not linearizable (truncations are sound): probe a few.
	upper := make([]int, len(parts)) // index of a cut known illegal, or -1
	for i, v := range verdicts {
		upper[i] = -1
		if v != porcupine.Unknown {
			continue
		}
		if k := probePrefixes(parts[i], mdeadline); k >= 0 {
			verdicts[i], upper[i] = porcupine.Illegal, k
			r.Notes = append(r.Notes, fmt.Sprintf("semaphore %s: the whole check timed out (%d ops), but a prefix is not linearizable", parts[i][0].in.sem, len(parts[i])))
		} else {
			r.Notes = append(r.Notes, fmt.Sprintf("semaphore %s: porcupine timed out (%d ops): unknown", parts[i][0].in.sem, len(parts[i])))
		}
	}
	var illegal []int
	for i, v := range verdicts {
		if v == porcupine.Illegal {
			illegal = append(illegal, i)
		}
	}
	r.Valid = verdictOf(verdicts)
	r.Stats["partitions_unknown"] = int64(countOf(verdicts, porcupine.Unknown))
	r.Stats["partitions_illegal"] = int64(len(illegal))

	// Minimal sub-histories of the failing partitions.
	an := newAnomalies(o.MaxAnomalies)
	var vis []porcupine.Operation
	for _, i := range illegal {
		m := minimize(parts[i], upper[i], mdeadline)
		an.add("not-linearizable", m.describe(), m.subHistory())
		vis = append(vis, m.visual()...)
	}
	an.fill(&r)
	if o.VisualizationPath != "" && len(vis) > 0 {
		if err := visualize(h, vis, o.VisualizationPath); err != nil {
			r.Notes = append(r.Notes, "visualization: "+err.Error())
		} else {
			r.Notes = append(r.Notes, "porcupine visualization: "+o.VisualizationPath)
		}
	}
	r.Elapsed = time.Since(t0)
	return r
}

func countOf(vs []porcupine.CheckResult, v porcupine.CheckResult) int {
	n := 0
	for _, x := range vs {
		if x == v {
			n++
		}
	}
	return n
}

// verdictOf folds porcupine's per-partition results: any Illegal is an
// anomaly, else any Unknown (timeout) is unknown, else ok.
func verdictOf(vs []porcupine.CheckResult) string {
	switch {
	case countOf(vs, porcupine.Illegal) > 0:
		return Invalid
	case countOf(vs, porcupine.Unknown) > 0:
		return Unknown
	}
	return Valid
}

// checkPorc runs porcupine until the deadline (zero: none).
func checkPorc(ops []porcupine.Operation, deadline time.Time) porcupine.CheckResult {
	if len(ops) == 0 {
		return porcupine.Ok
	}
	if deadline.IsZero() {
		return porcupine.CheckOperationsTimeout(linModel, ops, 0)
	}
	left := time.Until(deadline)
	if left <= 0 {
		return porcupine.Unknown
	}
	return porcupine.CheckOperationsTimeout(linModel, ops, left)
}
