package fsm

import (
	"fmt"
	"maps"
)

// CheckInvariants verifies every invariant of the state and the agreement
// of every index with the tables. Tests call it after each step; Restore
// calls it on what it read.
func (f *FSM) CheckInvariants() error {
	s, done := f.read()
	defer done()
	return s.check()
}

// check walks every table and index once, in order; it does point lookups
// only in the hash indexes (no tree searches), so that it stays linear. The
// walks of the semaphore side and of the lease side are independent (and
// read-only): on a large state they run on two cores. The error reported
// is the semaphore side's, if any, so it does not depend on timing.
func (s *state) check() error {
	if err := s.checkTokens(); err != nil {
		return err
	}
	semCount := map[string]int64{}
	leaseCount := map[string]int64{}
	lockLeaseCount := map[string]int64{}
	var nHolds, leaseHolds int
	var errB error
	if s.leases.Len()+s.holders.Len() >= parallelCheck {
		done := make(chan struct{})
		go func() {
			defer close(done)
			errB = s.checkLeases(leaseCount, lockLeaseCount, &leaseHolds)
		}()
		errA := s.checkSemaphores(semCount, &nHolds)
		<-done
		if errA != nil {
			return errA
		}
	} else {
		if err := s.checkSemaphores(semCount, &nHolds); err != nil {
			return err
		}
		errB = s.checkLeases(leaseCount, lockLeaseCount, &leaseHolds)
	}
	if errB != nil {
		return errB
	}
	if leaseHolds != nHolds {
		return fmt.Errorf("lease index has %d entries for %d holders", leaseHolds, nHolds)
	}
	lockCount, err := s.checkLocks()
	if err != nil {
		return err
	}
	fail := func(format string, a ...any) bool {
		err = fmt.Errorf(format, a...)
		return false
	}
	s.namespaces.Scan(func(n nsRec) bool {
		if n.semCount != semCount[n.name] || n.leaseCount != leaseCount[n.name] {
			return fail("namespace %s counts: semaphores %d/%d leases %d/%d", n.name, n.semCount, semCount[n.name], n.leaseCount, leaseCount[n.name])
		}
		if n.lockLeaseCount != lockLeaseCount[n.name] || n.lockCount != lockCount[n.name] {
			return fail("namespace %s counts: lock leases %d/%d locks %d/%d", n.name, n.lockLeaseCount, lockLeaseCount[n.name], n.lockCount, lockCount[n.name])
		}
		if e := checkNSRecord(n); e != nil {
			err = e
			return false
		}
		return true
	})
	if err != nil {
		return err
	}
	s.members.Scan(func(m memberRec) bool {
		err = checkMemberRecord(m)
		return err == nil
	})
	if err != nil {
		return err
	}
	if err := s.checkWaits(); err != nil {
		return err
	}
	// Last: a record that breaks a rule of its own is reported as such.
	return s.checkSizes()
}

// parallelCheck is the size (leases + holders) from which check uses two
// goroutines.
const parallelCheck = 50_000

// nsCache returns a namespace lookup that remembers the last namespace
// found: the tables are ordered by namespace first.
func (s *state) nsCache() func(string) bool {
	lastNS, lastOK := "", false
	return func(name string) bool {
		if name != lastNS || !lastOK {
			_, lastOK = s.getNS(name)
			lastNS = name
		}
		return lastOK
	}
}

// checkSemaphores checks the semaphores and the holders (counting each
// namespace's semaphores and the holders).
func (s *state) checkSemaphores(semCount map[string]int64, holds *int) error {
	var err error
	fail := func(format string, a ...any) bool {
		err = fmt.Errorf(format, a...)
		return false
	}
	nsExists := s.nsCache()
	var busySems int // semaphores whose stored counts are not zero
	s.semaphores.Scan(func(x semRec) bool {
		if !nsExists(x.ns) {
			return fail("semaphore %s/%s in missing namespace", x.ns, x.name)
		}
		if e := checkSemRecord(x); e != nil {
			err = e
			return false
		}
		if x.holds > x.permits {
			return fail("semaphore %s: holder weights sum to %d, above its %d permits", semLabel(x.ns, x.name), x.holds, x.permits)
		}
		if m, ok := s.semIdx[SemKey{x.ns, x.name}]; !ok || !semEqual(m, x) {
			return fail("semaphore %s/%s: the lookup index disagrees with the table", x.ns, x.name)
		}
		if x.holds != 0 || x.holders != 0 {
			busySems++
		}
		semCount[x.ns]++
		return true
	})
	if err != nil {
		return err
	}
	if len(s.semIdx) != s.semaphores.Len() {
		return fmt.Errorf("semaphore index has %d entries for %d semaphores", len(s.semIdx), s.semaphores.Len())
	}

	// Holders come grouped by semaphore: sum each group and compare it with
	// its semaphore's stored counts.
	nHolds, groups := 0, 0
	var cur semRec
	var curHolds, curHolders int64
	inGroup := false
	var tokens tokenSet
	endGroup := func() bool {
		if !inGroup {
			return true
		}
		inGroup = false
		if curHolds != cur.holds || curHolders != cur.holders {
			return fail("semaphore %s/%s counts holds %d/%d holders %d/%d", cur.ns, cur.name, cur.holds, curHolds, cur.holders, curHolders)
		}
		if tok, dup := tokens.duplicate(); dup {
			return fail("semaphore %s: two holders with fencing token %d", semLabel(cur.ns, cur.name), tok)
		}
		return true
	}
	s.holders.Scan(func(h *holderRec) bool {
		if !inGroup || h.ns != cur.ns || h.sem != cur.name {
			if !endGroup() {
				return false
			}
			x, ok := s.getSem(h.ns, h.sem)
			if !ok {
				return fail("holder %d of missing semaphore %s/%s", h.seq, h.ns, h.sem)
			}
			cur, curHolds, curHolders, inGroup = x, 0, 0, true
			tokens.reset()
			groups++
		}
		if h.lease == nil {
			return fail("holder %d on %s/%s without lease", h.seq, h.ns, h.sem)
		}
		li := s.identOf(h.ns, h.lease.id)
		if li == nil || li != h.lease {
			return fail("holder %d on %s/%s without lease %s", h.seq, h.ns, h.sem, h.lease.id)
		}
		if e := checkHoldFields(h.seq, h.token, s.holdSeq, s.lastToken, h.md); e != nil {
			return fail("semaphore %s: holder %d: %v", semLabel(h.ns, h.sem), h.seq, e)
		}
		if IsLockLeaseID(h.lease.id) {
			return fail("semaphore %s: held by lock lease %q", semLabel(h.ns, h.sem), h.lease.id)
		}
		sum, e := holdSum(cur, curHolds, h.weight)
		if e != nil {
			err = e
			return false
		}
		tokens.add(h.token)
		i, ok := li.findHold(h.sem)
		if !ok || li.holds[i] != h {
			return fail("holder %d on %s/%s missing from the lease index", h.seq, h.ns, h.sem)
		}
		curHolds = sum
		curHolders++
		nHolds++
		return true
	})
	if err == nil {
		endGroup()
	}
	if err != nil {
		return err
	}
	if groups != busySems {
		return fmt.Errorf("%d semaphores have holders, %d have non-zero counts", groups, busySems)
	}
	*holds = nHolds
	return nil
}

// checkLeases checks the leases and their indexes (counting each
// namespace's leases and the holds the leases know of).
func (s *state) checkLeases(leaseCount, lockLeaseCount map[string]int64, holds *int) error {
	var err error
	fail := func(format string, a ...any) bool {
		err = fmt.Errorf(format, a...)
		return false
	}
	nsExists := s.nsCache()
	leaseHolds := 0
	s.leases.Scan(func(l leaseRec) bool {
		if l.leaseIdent == nil {
			return fail("lease without identity")
		}
		if !nsExists(l.ns) {
			return fail("lease %s in missing namespace %s", l.id, l.ns)
		}
		if e := checkLeaseRecord(l.ns, l.id, l.proc, l.ttl, l.createdAt, l.expiresAt, l.md); e != nil {
			err = e
			return false
		}
		li := s.identOf(l.ns, l.id)
		if li != l.leaseIdent || li.liveTTL != l.ttl || li.liveCreated != l.createdAt || li.liveExp != l.expiresAt {
			return fail("lease %s: the lookup index disagrees with the table", l.id)
		}
		for i := 1; i < len(li.holds); i++ {
			if li.holds[i-1].sem >= li.holds[i].sem {
				return fail("lease %s: holds out of order", l.id)
			}
		}
		leaseHolds += len(li.holds)
		if IsLockLeaseID(l.id) {
			lockLeaseCount[l.ns]++
			if len(li.holds) > 0 {
				return fail("lock lease %s holds a semaphore", l.id)
			}
		} else {
			leaseCount[l.ns]++
			if li.lockCount() > 0 || len(li.md) > 0 {
				return fail("semaphore lease %s holds a lock or carries metadata", l.id)
			}
		}
		return true
	})
	if err != nil {
		return err
	}
	if s.leaseIdx.len() != s.leases.Len() {
		return fmt.Errorf("lease index has %d entries for %d leases", s.leaseIdx.len(), s.leases.Len())
	}
	// Each index entry must point at a registered lease (and the expiry
	// entry at its expires_at): entries are then distinct leases, and equal
	// counts make them one per lease.
	s.byProc.Scan(func(k procKey) bool {
		if k.leaseIdent == nil || s.identOf(k.ns, k.id) != k.leaseIdent {
			return fail("process index entry for a lease that does not exist")
		}
		return true
	})
	if err != nil {
		return err
	}
	s.expiry.Scan(func(k expiryKey) bool {
		if k.leaseIdent == nil || s.identOf(k.ns, k.id) != k.leaseIdent || k.at != k.liveExp {
			return fail("expiry index entry (%d) for a lease that does not exist or expires otherwise", k.at)
		}
		return true
	})
	if err != nil {
		return err
	}
	if s.byProc.Len() != s.leases.Len() || s.expiry.Len() != s.leases.Len() {
		return fmt.Errorf("indexes: %d leases, %d by process, %d by expiry", s.leases.Len(), s.byProc.Len(), s.expiry.Len())
	}
	*holds = leaseHolds
	return nil
}

func semEqual(a, b semRec) bool {
	return a.ns == b.ns && a.name == b.name && a.desc == b.desc && maps.Equal(a.md, b.md) && a.permits == b.permits &&
		a.version == b.version && a.createdAt == b.createdAt && a.updatedAt == b.updatedAt &&
		a.lastActivity == b.lastActivity && a.holds == b.holds && a.holders == b.holders
}
