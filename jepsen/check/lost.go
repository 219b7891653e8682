package check

import (
	"fmt"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/grackle-coord/grackle/jepsen/history"
)

// KindGetLease is the op kind of a GetSemaphoreLease read, should a runner
// record one (history has no constant for it). LostWrites uses it.
const KindGetLease = "get_lease"

// LostWrites checks that no acknowledged operation is lost after healing:
//
//   - lost-grant: a holders read R answered OK after h.HealedAt, invoked
//     after the ACQUIRED answer of a hold that was certainly held (by
//     Safety's conservative rule: not released or revoked, not
//     re-acquired, lease certainly alive) over R's whole interval, must
//     list the lease with a token >= the acknowledged one and a weight >=
//     the certain weight.
//   - lost-grant-count: a get read in the same situation must count at
//     least the certain holds (active_holds >= their weights, holders_count
//     >= their number).
//   - lost-lease: a refresh (or get_lease) answered NotFound while the
//     lease was certainly alive by the conservative clock over its whole
//     interval and no revoke of it had been sent. This one applies at any
//     time, not only after healing: the clock rule is sound throughout.
func LostWrites(h *history.History) Result { return lostWrites(h, 0) }

func lostWrites(h *history.History, maxAnoms int) Result {
	t0 := time.Now()
	r := Result{Name: NameLostWrites, Stats: map[string]int64{}}
	an := newAnomalies(maxAnoms)
	ix := newIndex(h)
	r.Notes = append(r.Notes, fmt.Sprintf("reads after healing at %s", secs(h.HealedAt)))

	reported := map[*history.Op]bool{} // grants already reported
	for i := range ix.ops {
		rd := &ix.ops[i]
		if rd.Outcome != history.OK || rd.Semaphore == "" || end(rd) <= h.HealedAt {
			continue
		}
		if rd.Kind != history.ListHolders && rd.Kind != history.GetSemaphore {
			continue
		}
		sem := opSem(rd)
		if rd.Kind == history.ListHolders {
			r.Stats["holders_reads_after_heal"]++
		} else {
			r.Stats["get_reads_after_heal"]++
		}
		var sumW, count int64
		var certain []*history.Op
		for _, lease := range ix.leasesOn(sem) {
			sp, ok := ix.holdAt(sem, lease, rd.Invoke)
			if !ok || sp.s >= rd.Invoke || sp.e <= end(rd) {
				continue // not certainly held over the read's whole interval
			}
			r.Stats["certain_holds_checked"]++
			sumW += sp.w
			count++
			certain = append(certain, sp.grant, sp.basis)
			if rd.Kind != history.ListHolders {
				continue
			}
			var seen *history.Holder
			for k := range rd.Holders {
				if rd.Holders[k].Lease == lease {
					seen = &rd.Holders[k]
				}
			}
			var problem string
			switch {
			case seen == nil:
				problem = "does not list it"
			case seen.Token < sp.grant.Token:
				problem = fmt.Sprintf("lists it with the older token %d", seen.Token)
			case seen.Weight < sp.w:
				problem = fmt.Sprintf("lists it with weight %d", seen.Weight)
			default:
				continue
			}
			r.Stats["lost_grant_reads"]++
			if reported[sp.grant] {
				continue
			}
			reported[sp.grant] = true
			an.add("lost-grant", fmt.Sprintf("on %s, lease %s was certainly holding weight %d (grant #%d at %s, token %d) over read #%d [%s, %s] after healing at %s, but the read %s",
				sem, lease, sp.w, sp.grant.ID, secs(sp.grant.Complete), sp.grant.Token, rd.ID, secs(rd.Invoke), secs(end(rd)), secs(h.HealedAt), problem),
				collect(sp.grant, sp.basis, rd))
		}
		if rd.Kind == history.GetSemaphore && (rd.ActiveHolds < sumW || rd.HoldersCount < count) {
			ops := append(certain, rd)
			an.add("lost-grant-count", fmt.Sprintf("on %s, %d holds of total weight %d were certainly held over read #%d [%s, %s] after healing at %s, but it shows active_holds=%d holders_count=%d",
				sem, count, sumW, rd.ID, secs(rd.Invoke), secs(end(rd)), secs(h.HealedAt), rd.ActiveHolds, rd.HoldersCount), collect(ops...))
		}
	}

	// Leases reported missing while certainly alive.
	for i := range ix.ops {
		o := &ix.ops[i]
		if (o.Kind != history.Refresh && o.Kind != KindGetLease) || o.Lease == "" || o.Outcome != history.Fail || !isNotFound(o) {
			continue
		}
		r.Stats["lease_not_found_answers"]++
		sp, ok := spanAt(ix.aliveSpans(o.Lease), o.Invoke)
		if !ok || sp.s >= o.Invoke || sp.e <= end(o) {
			continue
		}
		revoked := false
		if l := ix.leases[o.Lease]; l != nil {
			for _, rv := range l.revokes {
				if rv.Invoke <= end(o) {
					revoked = true
				}
			}
		}
		if revoked {
			continue
		}
		an.add("lost-lease", fmt.Sprintf("%s #%d of lease %s answered NotFound at %s, but the lease was certainly alive until %s (%s #%d sent at %s, ttl %ds) and never revoked",
			o.Kind, o.ID, o.Lease, secs(end(o)), secs(sp.e), sp.basis.Kind, sp.basis.ID, secs(sp.basis.Invoke), sp.basis.TTL), collect(sp.basis, o))
	}
	an.fill(&r)
	r.Elapsed = time.Since(t0)
	return r
}

// isNotFound: the call was answered with gRPC code NotFound.
func isNotFound(o *history.Op) bool { return o.Code == codes.NotFound.String() }

// Liveness checks that a fresh client succeeded within bound after the
// final heal (h.ServedAgainAt - h.HealedAt <= bound). bound <= 0: 30s.
func Liveness(h *history.History, bound time.Duration) Result {
	if bound <= 0 {
		bound = 30 * time.Second
	}
	r := Result{Name: NameLiveness, Stats: map[string]int64{}}
	an := newAnomalies(1)
	// The first few ops sent after healing show what the clients saw.
	var after []history.Op
	for _, o := range h.Sorted() {
		if o.Invoke >= h.HealedAt && len(after) < 8 {
			after = append(after, o)
		}
	}
	switch {
	case h.ServedAgainAt == 0:
		an.add("not-served-again", fmt.Sprintf("no client succeeded after healing at %s (bound %s)", secs(h.HealedAt), bound), after)
	case h.ServedAgainAt-h.HealedAt > bound:
		an.add("served-late", fmt.Sprintf("healed at %s, first served again at %s: %s > bound %s",
			secs(h.HealedAt), secs(h.ServedAgainAt), h.ServedAgainAt-h.HealedAt, bound), after)
	default:
		r.Stats["recovery_ms"] = (h.ServedAgainAt - h.HealedAt).Milliseconds()
		r.Notes = append(r.Notes, fmt.Sprintf("served again %s after healing (bound %s)", (h.ServedAgainAt-h.HealedAt).Round(time.Millisecond), bound))
	}
	an.fill(&r)
	return r
}
