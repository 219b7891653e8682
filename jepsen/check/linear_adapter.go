package check

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/grackle-coord/grackle/jepsen/history"
)

// From the recorded history to porcupine operations.

// buildLinOps turns the history into model operations for the semaphores
// in scope.
func buildLinOps(h *history.History, prefix string, r *Result) []*linOp {
	inScope := func(sem string) bool { return strings.HasPrefix(sem, prefix) }
	ops := h.Sorted()
	// Semaphores each lease acquired (for revokes without a semaphore).
	leaseSems := map[string][]*history.Op{}
	for i := range ops {
		o := &ops[i]
		if o.Kind == history.Acquire && o.Lease != "" && o.Semaphore != "" {
			known := false
			for _, x := range leaseSems[o.Lease] {
				if opSem(x) == opSem(o) {
					known = true
				}
			}
			if !known {
				leaseSems[o.Lease] = append(leaseSems[o.Lease], o)
			}
		}
	}
	noPermits := map[string]bool{}
	var out []*linOp
	add := func(o *history.Op, ns, sem string, in linInput, out0 linOutput) {
		if !inScope(sem) {
			return
		}
		p, ok := permitsOf(h, ns, sem)
		if !ok {
			if !noPermits[semKey(ns, sem)] {
				noPermits[semKey(ns, sem)] = true
				r.Notes = append(r.Notes, fmt.Sprintf("semaphore %s: permits unknown; not checked", semKey(ns, sem)))
			}
			return
		}
		in.sem, in.permits = semKey(ns, sem), p
		out = append(out, &linOp{op: o, in: in, out: out0, call: o.Invoke, ret: end(o)})
	}
	for i := range ops {
		o := &ops[i]
		pending := o.Outcome == history.Info
		if o.Outcome == history.Fail {
			switch o.Kind {
			case history.Acquire, history.Revoke:
				if o.Lease != "" && isNotFound(o) {
					// The lease is gone (no expiry in this workload).
					r.Stats["lease_not_found"]++
					if o.Semaphore != "" {
						add(o, o.Namespace, o.Semaphore, linInput{kind: lGone, lease: o.Lease}, linOutput{})
					} else {
						for _, a := range leaseSems[o.Lease] {
							add(o, a.Namespace, a.Semaphore, linInput{kind: lGone, lease: o.Lease}, linOutput{})
						}
					}
					continue
				}
				r.Stats["failed_ops_skipped"]++
			case history.Release, history.GetSemaphore, history.ListHolders:
				r.Stats["failed_ops_skipped"]++
			}
			continue
		}
		switch o.Kind {
		case history.Acquire:
			out0 := linOutput{pending: pending, outcome: o.AcquireOutcome}
			if !pending {
				switch o.AcquireOutcome {
				case history.Acquired, history.Unavailable, history.TimedOut:
				default:
					out0.pending = true // an answer we cannot read: treat as unknown
					r.Stats["acquire_unknown_outcome"]++
				}
			}
			add(o, o.Namespace, o.Semaphore, linInput{kind: lAcquire, lease: o.Lease, weight: o.Weight}, out0)
		case history.Release:
			add(o, o.Namespace, o.Semaphore, linInput{kind: lRelease, lease: o.Lease}, linOutput{pending: pending})
		case history.Revoke:
			if o.Semaphore != "" {
				add(o, o.Namespace, o.Semaphore, linInput{kind: lRevoke, lease: o.Lease}, linOutput{pending: pending})
				continue
			}
			for _, a := range leaseSems[o.Lease] {
				add(o, a.Namespace, a.Semaphore, linInput{kind: lRevoke, lease: o.Lease}, linOutput{pending: pending})
			}
		case history.GetSemaphore:
			if pending {
				continue
			}
			add(o, o.Namespace, o.Semaphore, linInput{kind: lGet}, linOutput{holds: o.ActiveHolds, count: o.HoldersCount})
		case history.ListHolders:
			if pending {
				continue
			}
			hs := make([]leaseWeight, 0, len(o.Holders))
			for _, x := range o.Holders {
				hs = append(hs, leaseWeight{x.Lease, x.Weight})
			}
			sort.Slice(hs, func(i, j int) bool { return hs[i].lease < hs[j].lease })
			add(o, o.Namespace, o.Semaphore, linInput{kind: lHolders}, linOutput{holders: hs})
		}
	}
	return out
}

// porcOps renders ops for porcupine. With cut >= 0 the history is
// truncated soundly at time cut: ops invoked after cut are dropped, and
// ops answered after cut lose their answer (mutations become pending,
// reads and no-change acquires are dropped). If the truncated history is
// not linearizable, neither is the whole one, and truncations are
// monotone in cut.
func porcOps(ops []*linOp, cut time.Duration) []porcupine.Operation {
	type item struct {
		lo      *linOp
		out     linOutput
		pending bool
	}
	var items []item
	var last time.Duration
	for _, lo := range ops {
		if cut >= 0 && lo.call > cut {
			continue
		}
		it := item{lo: lo, out: lo.out, pending: lo.out.pending}
		if !it.pending && cut >= 0 && lo.ret > cut {
			switch {
			case lo.in.kind == lGet || lo.in.kind == lHolders || lo.in.kind == lGone:
				continue
			case lo.in.kind == lAcquire && lo.out.outcome != history.Acquired:
				continue
			}
			it.pending = true
			it.out = linOutput{pending: true}
		}
		last = max(last, lo.call)
		if !it.pending {
			last = max(last, lo.ret)
		}
		items = append(items, it)
	}
	// A lease is deleted by its first answered revoke R (or was, when an
	// acquire or revoke of it was answered NotFound): from then on its
	// indeterminate ops change nothing (linStep), so those invoked before
	// R answered are closed at R's answer (had one taken effect later, it
	// changed nothing and may as well sit right after R), and those
	// invoked after are dropped. This keeps porcupine from exploring every
	// subset of a dead lease's indeterminate ops to the end of the history.
	revokedAt := map[string]time.Duration{}
	definite := 0
	for _, it := range items {
		if !it.pending {
			definite++
			if it.lo.in.kind == lRevoke || it.lo.in.kind == lGone {
				if t, ok := revokedAt[it.lo.in.lease]; !ok || it.lo.ret < t {
					revokedAt[it.lo.in.lease] = it.lo.ret
				}
			}
		}
	}
	type classKey struct {
		kind   linKind
		lease  string
		weight int64
		ret    int64
	}
	classes := map[classKey][2]int{} // class id, members so far
	clients := map[int]int{}
	out := make([]porcupine.Operation, 0, len(items))
	for _, it := range items {
		in := it.lo.in
		in.definite = definite
		in.class = -1
		ret := int64(it.lo.ret)
		if it.pending {
			ret = int64(last) + 1
			if t, ok := revokedAt[in.lease]; ok {
				if it.lo.call > t {
					continue
				}
				ret = int64(t)
			}
			k := classKey{in.kind, in.lease, in.weight, ret}
			c, ok := classes[k]
			if !ok {
				c[0] = len(classes)
			}
			in.class, in.rank = c[0], c[1]
			c[1]++
			classes[k] = c
		}
		c, ok := clients[it.lo.op.Process]
		if !ok {
			c = len(clients)
			clients[it.lo.op.Process] = c
		}
		out = append(out, porcupine.Operation{ClientId: c, Input: in, Call: int64(it.lo.call),
			Output: it.out, Return: ret, Metadata: it.lo})
	}
	return out
}
