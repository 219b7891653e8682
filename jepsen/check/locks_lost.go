package check

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/grackle-coord/grackle/jepsen/history"
)

// LockLost checks that lock reads (get_lock, list_locks) agree with the
// acknowledged operations:
//
//   - lost-lock-grant: a read invoked after the ACQUIRED answer of a hold
//     that was certainly held (holds.go's rule) over the read's whole
//     interval lists the lease on that lock, with a token >= the grant's,
//     and exclusive when the hold was certainly exclusive.
//   - lost-lock-release: a read lists lease L on lock X although an
//     acknowledged release of X by L, or revoke of L, completed before the
//     read was sent and every acquire of X by L that may have granted
//     (ACQUIRED or indeterminate) had completed before that release or
//     revoke was sent: nothing could have given L the lock again.
//   - phantom-lock-holder: a read lists lease L on lock X with a token that
//     no acquire of X by L sent before the read's answer could have
//     received (no ACQUIRED answer with that token, no indeterminate one).
//
// docs/FAULTS.md asks this of the reads after healing (HealedAt); every
// lock read is linearizable by the contract, so the rules hold for the
// reads during the run too, and the checker applies them to all (the
// description says which).
func LockLost(h *history.History) Result { return lockLost(h, newLockIx(h), 0) }

func lockLost(h *history.History, lx *lockIx, maxAnoms int) Result {
	t0 := time.Now()
	r := Result{Name: NameLockLost, Stats: map[string]int64{}}
	if skipNoLocks(&r, lx) {
		return r
	}
	an := newAnomalies(maxAnoms)
	r.Notes = append(r.Notes, fmt.Sprintf("every lock read checked; healed at %s", secs(h.HealedAt)))
	when := func(rd *history.Op) string {
		if h.HealedAt > 0 && rd.Invoke >= h.HealedAt {
			return "after healing"
		}
		return "during the run"
	}
	reportedGrant := map[*history.Op]bool{}
	for _, rd := range lx.reads {
		if rd.Outcome != history.OK {
			continue
		}
		r.Stats["reads"]++
		if h.HealedAt > 0 && rd.Invoke >= h.HealedAt {
			r.Stats["reads_after_heal"]++
		}
		views := map[string]*history.LockView{}
		last := ""
		for i := range rd.Locks {
			views[rd.Locks[i].Name] = &rd.Locks[i]
			last = max(last, rd.Locks[i].Name)
		}
		covered := func(name string) bool {
			switch rd.Kind {
			case history.GetLock:
				return name == rd.Lock
			case history.ListLocks:
				if rd.Lock != "" && name != rd.Lock && !strings.HasPrefix(name, rd.Lock+"/") {
					return false // neither the prefix nor a descendant of it
				}
				return !rd.Truncated || name <= last
			}
			return false
		}

		// Acknowledged grants still certainly held.
		for _, key := range lx.sems {
			nsn := lx.semNS[key]
			if nsn[0] != rd.Namespace || !covered(nsn[1]) {
				continue
			}
			v := views[nsn[1]]
			for _, lease := range lx.leasesOn(key) {
				sp, ok := lx.holdAt(key, lease, rd.Invoke)
				if !ok || sp.s >= rd.Invoke || sp.e <= end(rd) {
					continue // not certainly held over the read's whole interval
				}
				r.Stats["certain_holds_checked"]++
				var seen *history.LockHolder
				if v != nil {
					for k := range v.Holders {
						if v.Holders[k].Lease == lease {
							seen = &v.Holders[k]
						}
					}
				}
				var problem string
				switch {
				case seen == nil:
					problem = "does not list it"
				case seen.Token < sp.grant.Token:
					problem = fmt.Sprintf("lists it with the older token %d", seen.Token)
				case sp.w >= wExclusive && !seen.Exclusive:
					problem = "lists it shared"
				default:
					continue
				}
				r.Stats["lost_grant_reads"]++
				if reportedGrant[sp.grant] {
					continue
				}
				reportedGrant[sp.grant] = true
				an.add("lost-lock-grant", fmt.Sprintf("lease %s certainly held %s %s (grant #%d answered at %s, token %d) over read #%d [%s, %s] %s, but the read %s",
					lease, key, modeOf(sp.w), sp.grant.ID, secs(sp.grant.Complete), sp.grant.Token, rd.ID, secs(rd.Invoke), secs(end(rd)), when(rd), problem),
					lockOps(sp.grant, sp.basis, rd))
			}
		}

		// Holders that nothing acknowledged or possibly applied explains.
		for _, v := range rd.Locks {
			key := lockKey(rd.Namespace, v.Name)
			for _, x := range v.Holders {
				r.Stats["holders_explained"]++
				var acqs, rels, revs []*history.Op
				if l := lx.leases[x.Lease]; l != nil {
					revs = l.revokes
					if s := l.bySem[key]; s != nil {
						acqs, rels = s.acquires, s.releases
					}
				}
				var sources []*history.Op
				tokenOK := false
				for _, a := range acqs {
					if a.Invoke >= end(rd) || !(granted(a) || a.Outcome == history.Info) {
						continue
					}
					sources = append(sources, a)
					if a.Outcome == history.Info || a.Token == x.Token {
						tokenOK = true
					}
				}
				if !tokenOK {
					desc := fmt.Sprintf("read #%d %s lists lease %s %s on %s with token %d, but no acquire of that lock by that lease could have been granted that token",
						rd.ID, when(rd), x.Lease, modeName(x.Exclusive), key, x.Token)
					ops := append([]*history.Op{rd}, sources...)
					an.add("phantom-lock-holder", desc, lockOps(ops...))
					continue
				}
				// An acknowledged release or revoke after every possible grant.
				enders := append(append([]*history.Op(nil), rels...), revs...)
				sort.SliceStable(enders, func(i, j int) bool { return enders[i].Invoke < enders[j].Invoke })
				for _, m := range enders {
					if m.Outcome != history.OK || end(m) >= rd.Invoke {
						continue
					}
					after := false
					for _, a := range sources {
						if !precedes(a, m) {
							after = true
							break
						}
					}
					if after {
						continue
					}
					what := "release of it"
					if m.Kind == history.Revoke {
						what = "revoke of the lease"
					}
					ops := append([]*history.Op{m, rd}, sources...)
					an.add("lost-lock-release", fmt.Sprintf("read #%d %s lists lease %s %s on %s (token %d), but the acknowledged %s #%d [%s, %s] came after every acquire of it that may have been granted",
						rd.ID, when(rd), x.Lease, modeName(x.Exclusive), key, x.Token, what, m.ID, secs(m.Invoke), secs(end(m))), lockOps(ops...))
					break
				}
			}
		}
	}
	an.fill(&r)
	r.Elapsed = time.Since(t0)
	return r
}
