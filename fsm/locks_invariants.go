package fsm

import (
	"fmt"
	"maps"
)

// checkLocks verifies the lock tables against each other and every derived
// index (rebuilt from scratch and compared), and that no two holds
// conflict. It returns the held locks per namespace.
func (s *state) checkLocks() (map[string]int64, error) {
	perNS := map[string]int64{}
	var err error
	fail := func(format string, a ...any) bool {
		err = fmt.Errorf(format, a...)
		return false
	}
	s.locks.Scan(func(r lockRec) bool {
		live := s.lockIdx[LockKey{r.ns, r.name}]
		if live == nil || live.rec != r || len(live.holders) == 0 {
			return fail("lock %s/%s: record without live holders, or the index disagrees", r.ns, r.name)
		}
		perNS[r.ns]++
		return true
	})
	if err != nil {
		return nil, err
	}
	if len(s.lockIdx) != s.locks.Len() {
		return nil, fmt.Errorf("lock index has %d entries for %d locks", len(s.lockIdx), s.locks.Len())
	}
	below := map[LockKey]lockCounts{}
	byLock := map[LockKey][]*lockHold{}
	leaseLocks := 0
	var all []*lockHold
	s.lockHolds.Scan(func(h *lockHold) bool {
		if h.lease == nil || s.identOf(h.ns, h.lease.id) != h.lease || !IsLockLeaseID(h.lease.id) {
			return fail("hold of lock %s/%s by a lease that does not exist or is not a lock lease", h.ns, h.name)
		}
		if h.lease.lockOf(h.name) != h {
			return fail("hold of lock %s/%s: the lease's side disagrees", h.ns, h.name)
		}
		if e := checkHoldFields(h.seq, h.token, s.holdSeq, s.lastToken, h.md); e != nil {
			return fail("lock %q: hold %d: %v", h.ns+"/"+h.name, h.seq, e)
		}
		k := LockKey{h.ns, h.name}
		byLock[k] = append(byLock[k], h)
		ancestors(h.name, func(a string) {
			c := below[LockKey{h.ns, a}]
			if h.excl {
				c.excl++
			} else {
				c.shared++
			}
			below[LockKey{h.ns, a}] = c
		})
		all = append(all, h)
		return true
	})
	if err != nil {
		return nil, err
	}
	s.leases.Scan(func(l leaseRec) bool {
		leaseLocks += l.lockCount()
		return true
	})
	if err != nil {
		return nil, err
	}
	if leaseLocks != len(all) {
		return nil, fmt.Errorf("leases know %d lock holds for %d stored", leaseLocks, len(all))
	}
	if !maps.Equal(below, s.lockBelow) {
		return nil, fmt.Errorf("counts of holds below names disagree with the holds")
	}
	for k, hs := range byLock {
		live := s.lockIdx[k]
		if live == nil || len(live.holders) != len(hs) {
			return nil, fmt.Errorf("lock %s/%s: index holders disagree", k.Namespace, k.Lock)
		}
		excl := 0
		var tokens tokenSet
		for i, h := range hs {
			tokens.add(h.token)
			if live.holders[i] != h {
				return nil, fmt.Errorf("lock %s/%s: index holders out of order", k.Namespace, k.Lock)
			}
			if h.excl {
				excl++
			}
		}
		if tok, dup := tokens.duplicate(); dup {
			return nil, fmt.Errorf("lock %q: two holds with fencing token %d", k.Namespace+"/"+k.Lock, tok)
		}
		if excl != live.excl {
			return nil, fmt.Errorf("lock %s/%s: %d exclusive holders, index says %d", k.Namespace, k.Lock, excl, live.excl)
		}
	}
	// No two holds conflict: each hold against the indexes (which were
	// just checked against the holds).
	for _, h := range all {
		q := lockAsk{ns: h.ns, name: h.name, lease: h.lease.id, li: h.lease, excl: h.excl}
		if r, _ := s.conflict(q, nil, false); r != 0 && !faultLockConflictGrant {
			return nil, fmt.Errorf("lock %s/%s: the hold of lease %s conflicts with another (%v)", h.ns, h.name, h.lease.id, r)
		}
	}
	return perNS, nil
}
