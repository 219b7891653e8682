package check

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/grackle-coord/grackle/jepsen/history"
)

// Shrinking a failing partition to a small sub-history that still fails.

// minimal is the result of minimizing one failing partition.
type minimal struct {
	sem      string
	permits  int64
	total    int           // ops in the partition
	cut      time.Duration // the witness is the history truncated here
	witness  int           // ops in the witness
	culprits []*linOp      // ops answered at cut
	window   []*linOp      // the reported sub-history
	selfOK   bool          // porcupine confirmed the window alone is not linearizable
	exact    bool          // the cut is the earliest (binary search finished)
	state    string        // end state of porcupine's longest partial linearization of the window
	partial  int           // its length
}

// minimize finds the earliest cut at which the partition's truncation is
// not linearizable (binary search: truncations are monotone), then the
// ops that matter at that point: the op(s) answered at the cut, the ops
// concurrent with them, and per lease the mutations not superseded before
// them.
func minimize(part []*linOp, upper int, deadline time.Time) *minimal {
	m := &minimal{sem: part[0].in.sem, permits: part[0].in.permits, total: len(part)}
	ts := cuts(part)
	if len(ts) == 0 { // cannot be: an all-pending history is linearizable
		m.window = part
		return m
	}
	lo, hi := -1, len(ts)-1
	if upper >= 0 {
		hi = upper
	}
	m.exact = true
	for hi-lo > 1 {
		if time.Until(deadline) <= 0 {
			m.exact = false
			break
		}
		mid := (lo + hi) / 2
		if checkPorc(porcOps(part, ts[mid]), deadline) == porcupine.Illegal {
			hi = mid
		} else {
			lo = mid
		}
	}
	m.cut = ts[hi]
	witness := porcOps(part, m.cut)
	m.witness = len(witness)
	// The truncated ops, with their pending flag in the witness.
	pend := map[*linOp]bool{}
	pret := map[*linOp]time.Duration{}
	var wops []*linOp
	for _, w := range witness {
		lo := w.Metadata.(*linOp)
		wops = append(wops, lo)
		pend[lo] = w.Output.(linOutput).pending
		pret[lo] = time.Duration(w.Return)
	}
	wend := func(lo *linOp) time.Duration { return pret[lo] }
	for _, lo := range wops {
		if !pend[lo] && lo.ret == m.cut {
			m.culprits = append(m.culprits, lo)
		}
	}
	if len(m.culprits) == 0 { // cannot be: the cut is an answer time
		m.window = wops
		return m
	}
	// Relevant ops.
	in := map[*linOp]bool{}
	for _, c := range m.culprits {
		in[c] = true
		for _, lo := range wops {
			if lo.call <= c.ret && wend(lo) >= c.call {
				in[lo] = true // concurrent with the culprit
			}
		}
	}
	cInv := m.culprits[0].call
	for _, c := range m.culprits {
		cInv = min(cInv, c.call)
	}
	// Per lease: mutations not superseded before the culprit. X is
	// superseded when a determining mutation Y of the same lease (an
	// ACQUIRED acquire, a release or revoke that answered) followed X in
	// real time and preceded the culprit.
	byLease := map[string][]*linOp{}
	for _, lo := range wops {
		if lo.in.kind == lAcquire || lo.in.kind == lRelease || lo.in.kind == lRevoke {
			if lo.in.kind == lAcquire && !pend[lo] && lo.out.outcome != history.Acquired {
				continue // no change
			}
			byLease[lo.in.lease] = append(byLease[lo.in.lease], lo)
		}
	}
	for _, muts := range byLease {
		gone := false // revoked before the culprit: holds nothing at its point
		for _, y := range muts {
			if y.in.kind == lRevoke && !pend[y] && y.ret < cInv {
				gone = true
			}
		}
		if gone {
			continue
		}
		for _, x := range muts {
			if x.call > cInv {
				continue
			}
			superseded := false
			for _, y := range muts {
				if y != x && !pend[y] && wend(x) < y.call && y.ret < cInv {
					superseded = true
					break
				}
			}
			if !superseded {
				in[x] = true
			}
		}
	}
	var w1 []*linOp
	for _, lo := range wops {
		if in[lo] {
			w1 = append(w1, lo)
		}
	}
	m.window = w1
	if time.Until(deadline) > 0 && checkPorc(porcOps(w1, m.cut), deadline) == porcupine.Illegal {
		m.selfOK = true
	} else if time.Until(deadline) > 0 {
		// Widen to every witness op that overlaps the window's time span.
		start := w1[0].call
		var w2 []*linOp
		for _, lo := range wops {
			if wend(lo) >= start {
				w2 = append(w2, lo)
			}
		}
		if len(w2) > len(w1) && checkPorc(porcOps(w2, m.cut), deadline) == porcupine.Illegal {
			m.window, m.selfOK = w2, true
		}
	}
	// Porcupine's longest partial linearization of the window, for the
	// description.
	if len(m.window) <= 400 && time.Until(deadline) > 0 {
		res, info := porcupine.CheckOperationsVerbose(linModel, porcOps(m.window, m.cut), min(time.Until(deadline), 10*time.Second))
		if res == porcupine.Illegal {
			best := []porcupine.Operation(nil)
			for _, p := range info.PartialLinearizationsOperations() {
				for _, seq := range p {
					if len(seq) > len(best) {
						best = seq
					}
				}
			}
			var s interface{} = newState(nil, 0)
			for _, op := range best {
				_, s = linStep(s, op.Input, op.Output)
			}
			m.partial = len(best)
			m.state = describeHolders(s.(*linState).holders)
		}
	}
	return m
}

// cuts are the answer times of a partition's answered ops, sorted.
func cuts(part []*linOp) []time.Duration {
	var ts []time.Duration
	for _, lo := range part {
		if !lo.out.pending {
			ts = append(ts, lo.ret)
		}
	}
	sort.Slice(ts, func(i, j int) bool { return ts[i] < ts[j] })
	return dedupe(ts)
}

// probePrefixes checks growing prefixes (1/64, 1/32, ..., all of the cuts) of a
// partition whose whole check timed out, and returns the index of the
// first cut found not linearizable, or -1.
func probePrefixes(part []*linOp, deadline time.Time) int {
	ts := cuts(part)
	for frac := 64; frac >= 1; frac /= 2 {
		k := len(ts) / frac
		if k == 0 {
			continue
		}
		switch checkPorc(porcOps(part, ts[k-1]), deadline) {
		case porcupine.Illegal:
			return k - 1
		case porcupine.Unknown:
			return -1 // larger prefixes will not do better
		}
	}
	return -1
}

func dedupe(ts []time.Duration) []time.Duration {
	out := ts[:0]
	for i, t := range ts {
		if i == 0 || t != ts[i-1] {
			out = append(out, t)
		}
	}
	return out
}

func (m *minimal) subHistory() []history.Op {
	var ops []*history.Op
	for _, lo := range m.window {
		ops = append(ops, lo.op)
	}
	return collect(ops...)
}

func (m *minimal) describe() string {
	var b strings.Builder
	fmt.Fprintf(&b, "semaphore %s (permits %d) is not linearizable", m.sem, m.permits)
	if len(m.culprits) > 0 {
		ids := make([]string, len(m.culprits))
		for i, c := range m.culprits {
			ids[i] = fmt.Sprintf("#%d (%s)", c.op.ID, describeLinOp(c.in, c.out))
		}
		if m.exact {
			fmt.Fprintf(&b, ": its history up to %s is linearizable without the answer of %s and not with it",
				secs(m.cut), strings.Join(ids, ", "))
		} else {
			fmt.Fprintf(&b, ": its history up to %s (answer of %s) is not linearizable (search for an earlier point ran out of time)",
				secs(m.cut), strings.Join(ids, ", "))
		}
	}
	fmt.Fprintf(&b, " (witness: %d of the partition's %d ops, later answers cut off).", m.witness, m.total)
	if m.selfOK {
		fmt.Fprintf(&b, " The %d ops below are by themselves not linearizable (porcupine).", len(m.window))
	} else {
		fmt.Fprintf(&b, " The %d ops below are the culprit, the ops concurrent with it and each lease's last possible mutations; the full witness is needed to prove it.", len(m.window))
	}
	if m.state != "" {
		fmt.Fprintf(&b, " Porcupine's longest partial linearization of them (%d ops) ends in state %s.", m.partial, m.state)
	}
	return b.String()
}
