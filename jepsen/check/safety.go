package check

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/grackle-coord/grackle/jepsen/history"
)

// Safety checks docs/FAULTS.md, Safety with time: per semaphore, at no instant do the
// weights of certainly-held holds (see holds.go for the exact rule) sum
// above the semaphore's permits. It uses every semaphore of the history,
// whatever the workload.
func Safety(h *history.History) Result { return safety(h, 0) }

func safety(h *history.History, maxAnoms int) Result {
	t0 := time.Now()
	r := Result{Name: NameSafety, Stats: map[string]int64{}}
	an := newAnomalies(maxAnoms)
	ix := newIndex(h)
	for _, sem := range ix.sems {
		nsn := ix.semNS[sem]
		permits, ok := permitsOf(h, nsn[0], nsn[1])
		if !ok {
			r.Notes = append(r.Notes, fmt.Sprintf("semaphore %s: permits unknown (not in History.Permits); not checked", sem))
			continue
		}
		r.Stats["semaphores"]++
		checkSem(ix, sem, permits, an, r.Stats)
	}
	an.fill(&r)
	r.Elapsed = time.Since(t0)
	return r
}

type holdRef struct {
	lease string
	sp    span
}

func checkSem(ix *index, sem string, permits int64, an *anomalies, stats map[string]int64) {
	type event struct {
		t   time.Duration
		add bool
		ref int
	}
	var refs []holdRef
	var evs []event
	grantsSeen := map[*history.Op]bool{}
	for _, lease := range ix.leasesOn(sem) {
		for _, a := range ix.leases[lease].bySem[sem].acquires {
			if granted(a) {
				stats["grants"]++
			}
		}
		for _, sp := range ix.holdSpans(sem, lease) {
			if !grantsSeen[sp.grant] {
				grantsSeen[sp.grant] = true
				stats["grants_certainly_held"]++
			}
			refs = append(refs, holdRef{lease, sp})
			evs = append(evs, event{sp.s, true, len(refs) - 1}, event{sp.e, false, len(refs) - 1})
		}
	}
	// Half-open spans: at equal times, ends go before starts.
	sort.SliceStable(evs, func(i, j int) bool {
		if evs[i].t != evs[j].t {
			return evs[i].t < evs[j].t
		}
		return !evs[i].add && evs[j].add
	})
	active := map[int]bool{}
	var sum int64
	var over bool
	var overFrom time.Duration
	var peak int64
	involved := map[int]bool{}
	for i := 0; i < len(evs); {
		t := evs[i].t
		for ; i < len(evs) && evs[i].t == t; i++ {
			e := evs[i]
			if e.add {
				active[e.ref] = true
				sum += refs[e.ref].sp.w
			} else {
				delete(active, e.ref)
				sum -= refs[e.ref].sp.w
			}
		}
		switch {
		case sum > permits:
			if !over {
				over, overFrom, peak = true, t, 0
				involved = map[int]bool{}
			}
			for k := range active {
				involved[k] = true
			}
			peak = max(peak, sum)
		case over:
			over = false
			reportOverlap(sem, permits, overFrom, t, peak, refs, involved, an)
		}
	}
	if over { // cannot happen: every span ends (expiry or release)
		reportOverlap(sem, permits, overFrom, inf, peak, refs, involved, an)
	}
}

func reportOverlap(sem string, permits int64, from, to time.Duration, peak int64, refs []holdRef, involved map[int]bool, an *anomalies) {
	idx := make([]int, 0, len(involved))
	for k := range involved {
		idx = append(idx, k)
	}
	sort.Slice(idx, func(i, j int) bool { return refs[idx[i]].sp.s < refs[idx[j]].sp.s })
	var ops []*history.Op
	var parts []string
	seen := map[*history.Op]bool{}
	for _, k := range idx {
		h := refs[k]
		if seen[h.sp.grant] {
			continue
		}
		seen[h.sp.grant] = true
		ops = append(ops, h.sp.grant, h.sp.basis)
		parts = append(parts, fmt.Sprintf("lease %s weight %d certainly held %s..%s (grant #%d, token %d; lease alive by #%d %s sent at %s ttl %ds)",
			h.lease, h.sp.w, secs(h.sp.s), secs(h.sp.e), h.sp.grant.ID, h.sp.grant.Token, h.sp.basis.ID, h.sp.basis.Kind, secs(h.sp.basis.Invoke), h.sp.basis.TTL))
	}
	an.add("double-grant", fmt.Sprintf("semaphore %s (permits %d): certainly-held weight reaches %d from %s to %s: %s",
		sem, permits, peak, secs(from), secs(to), strings.Join(parts, "; ")), collect(ops...))
}
