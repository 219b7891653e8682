package check

import (
	"fmt"
	"sort"
	"time"

	"github.com/grackle-coord/grackle/jepsen/history"
)

// Fencing checks docs/FAULTS.md, Fencing:
//
//   - token-order: on one semaphore, an ACQUIRED answer B invoked after
//     another ACQUIRED answer A completed must carry a larger token
//     (grant order is completion order for non-overlapping acquires).
//   - duplicate-token: two ACQUIRED answers on one semaphore with the same
//     token from different leases.
//   - token-order-global / duplicate-token-global: the same across
//     semaphores (docs/API.md, Fencing tokens: the token is the Raft index of the granting
//     entry, strictly increasing across the whole cluster).
//   - missing-token: an ACQUIRED answer without a token.
//   - rejected-current-holder: a fenced write rejected by the register
//     although, by the conservative clock of Safety, its writer still
//     certainly held the grant whose token it wrote when it sent the write.
func Fencing(h *history.History) Result { return fencing(h, 0) }

func fencing(h *history.History, maxAnoms int) Result {
	t0 := time.Now()
	r := Result{Name: NameFencing, Stats: map[string]int64{}}
	an := newAnomalies(maxAnoms)
	ix := newIndex(h)

	bySem := map[string][]*history.Op{}
	var all []*history.Op
	for i := range ix.ops {
		o := &ix.ops[i]
		if !granted(o) {
			continue
		}
		r.Stats["grants"]++
		if o.Token == 0 {
			an.add("missing-token", fmt.Sprintf("ACQUIRED answer #%d on %s has no fencing token", o.ID, opSem(o)), collect(o))
			continue
		}
		bySem[opSem(o)] = append(bySem[opSem(o)], o)
		all = append(all, o)
	}
	for _, sem := range ix.sems {
		tokenOrder(bySem[sem], false, "token-order", "semaphore "+sem, an)
		duplicates(bySem[sem], false, "duplicate-token", an)
	}
	tokenOrder(all, true, "token-order-global", "the cluster", an)
	duplicates(all, true, "duplicate-token-global", an)

	// Rejected fenced writes.
	for i := range ix.ops {
		fw := &ix.ops[i]
		if fw.Kind != history.FenceWrite || fw.Outcome != history.OK {
			continue
		}
		r.Stats["fence_writes"]++
		if fw.Accepted {
			continue
		}
		r.Stats["fence_writes_rejected"]++
		if fw.Lease == "" {
			continue
		}
		sp, ok := ix.holdAt(opSem(fw), fw.Lease, fw.Invoke)
		if !ok || sp.grant.Token != fw.Token {
			continue // not certainly current: rejecting it is the register's job
		}
		// The write that raised the register above this token, and its grant.
		var higher *history.Op
		for j := range ix.ops {
			o := &ix.ops[j]
			if o.Kind == history.FenceWrite && o.Accepted && opSem(o) == opSem(fw) && o.Token > fw.Token && o.Invoke <= end(fw) {
				if higher == nil || o.Token > higher.Token {
					higher = o
				}
			}
		}
		ops := []*history.Op{sp.grant, sp.basis, fw}
		desc := fmt.Sprintf("fenced write #%d on %s with token %d rejected at %s while lease %s certainly held the grant #%d (certain until %s)",
			fw.ID, opSem(fw), fw.Token, secs(fw.Invoke), fw.Lease, sp.grant.ID, secs(sp.e))
		if higher != nil {
			ops = append(ops, higher)
			desc += fmt.Sprintf("; the register had accepted token %d (write #%d by lease %s)", higher.Token, higher.ID, higher.Lease)
			for _, g := range bySem[opSem(fw)] {
				if g.Token == higher.Token {
					ops = append(ops, g)
				}
			}
		}
		an.add("rejected-current-holder", desc, collect(ops...))
	}
	an.fill(&r)
	r.Elapsed = time.Since(t0)
	return r
}

// tokenOrder flags every grant B with a token not above the largest token
// of the grants that completed before B was invoked. With global, only
// pairs on different semaphores are reported (the per-semaphore pass
// reports the others).
func tokenOrder(grants []*history.Op, global bool, kind, where string, an *anomalies) {
	byEnd := append([]*history.Op(nil), grants...)
	sort.SliceStable(byEnd, func(i, j int) bool { return end(byEnd[i]) < end(byEnd[j]) })
	byInv := append([]*history.Op(nil), grants...)
	sort.SliceStable(byInv, func(i, j int) bool { return byInv[i].Invoke < byInv[j].Invoke })
	var best *history.Op // largest token among those completed so far
	k := 0
	for _, b := range byInv {
		for ; k < len(byEnd) && end(byEnd[k]) < b.Invoke; k++ {
			if best == nil || byEnd[k].Token > best.Token {
				best = byEnd[k]
			}
		}
		if best != nil && b.Token <= best.Token && (!global || opSem(best) != opSem(b)) {
			an.add(kind, fmt.Sprintf("in %s, grant #%d (lease %s, %s) got token %d at %s, but grant #%d (lease %s, %s) had already completed at %s with token %d",
				where, b.ID, b.Lease, opSem(b), b.Token, secs(b.Complete), best.ID, best.Lease, opSem(best), secs(best.Complete), best.Token), collect(best, b))
		}
	}
}

// duplicates flags equal tokens given to different leases (acrossSems:
// to different semaphores or leases).
func duplicates(grants []*history.Op, acrossSems bool, kind string, an *anomalies) {
	byTok := map[uint64][]*history.Op{}
	var toks []uint64
	for _, g := range grants {
		if len(byTok[g.Token]) == 0 {
			toks = append(toks, g.Token)
		}
		byTok[g.Token] = append(byTok[g.Token], g)
	}
	sort.Slice(toks, func(i, j int) bool { return toks[i] < toks[j] })
	for _, t := range toks {
		gs := byTok[t]
		for i := 1; i < len(gs); i++ {
			a, b := gs[0], gs[i]
			differ := a.Lease != b.Lease
			if acrossSems {
				differ = opSem(a) != opSem(b)
			}
			if differ {
				an.add(kind, fmt.Sprintf("token %d given to grant #%d (lease %s, %s) and grant #%d (lease %s, %s)",
					t, a.ID, a.Lease, opSem(a), b.ID, b.Lease, opSem(b)), collect(a, b))
			}
		}
	}
}
