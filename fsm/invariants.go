package fsm

import "fmt"

// CheckInvariants verifies every invariant of the state and the agreement
// of every index with the tables. Tests call it after each step; Restore
// calls it on what it read.
func (f *FSM) CheckInvariants() error {
	s, done := f.read()
	defer done()
	return s.check()
}

func (s *state) check() error {
	type agg struct{ holds, holders int64 }
	perSem := map[SemKey]*agg{}
	var err error
	fail := func(format string, a ...any) bool {
		err = fmt.Errorf(format, a...)
		return false
	}
	semCount := map[string]int64{}
	leaseCount := map[string]int64{}
	s.semaphores.Ascend(func(x semRec) bool {
		if _, ok := s.getNS(x.ns); !ok {
			return fail("semaphore %s/%s in missing namespace", x.ns, x.name)
		}
		if x.permits < 1 {
			return fail("semaphore %s/%s has permits %d", x.ns, x.name, x.permits)
		}
		semCount[x.ns]++
		perSem[SemKey{x.ns, x.name}] = &agg{}
		return true
	})
	if err != nil {
		return err
	}
	nHolds := 0
	s.holders.Ascend(func(h holderRec) bool {
		a, ok := perSem[SemKey{h.ns, h.sem}]
		if !ok {
			return fail("holder %d of missing semaphore %s/%s", h.seq, h.ns, h.sem)
		}
		if _, ok := s.getLease(h.ns, h.leaseID); !ok {
			return fail("holder %d on %s/%s without lease %s", h.seq, h.ns, h.sem, h.leaseID)
		}
		if h.weight < 1 {
			return fail("holder %d has weight %d", h.seq, h.weight)
		}
		if h.seq > s.holdSeq || h.token > s.lastToken {
			return fail("holder %d: seq/token beyond counters", h.seq)
		}
		k, ok := s.leaseHolds.Get(leaseHoldKey{ns: h.ns, leaseID: h.leaseID, sem: h.sem})
		if !ok || k.seq != h.seq {
			return fail("holder %d on %s/%s missing from the lease index", h.seq, h.ns, h.sem)
		}
		a.holds += h.weight
		a.holders++
		nHolds++
		return true
	})
	if err != nil {
		return err
	}
	if s.leaseHolds.Len() != nHolds {
		return fmt.Errorf("lease index has %d entries for %d holders", s.leaseHolds.Len(), nHolds)
	}
	s.semaphores.Ascend(func(x semRec) bool {
		a := perSem[SemKey{x.ns, x.name}]
		if a.holds != x.holds || a.holders != x.holders {
			return fail("semaphore %s/%s counts holds %d/%d holders %d/%d", x.ns, x.name, x.holds, a.holds, x.holders, a.holders)
		}
		if x.holds > x.permits {
			return fail("semaphore %s/%s: active_holds %d > permits %d", x.ns, x.name, x.holds, x.permits)
		}
		return true
	})
	if err != nil {
		return err
	}
	s.leases.Ascend(func(l leaseRec) bool {
		if _, ok := s.getNS(l.ns); !ok {
			return fail("lease %s in missing namespace %s", l.id, l.ns)
		}
		if !s.byProc.Has(procKey{ns: l.ns, proc: l.proc, id: l.id}) {
			return fail("lease %s missing from the process index", l.id)
		}
		if !s.expiry.Has(expiryKey{at: l.expiresAt, ns: l.ns, id: l.id}) {
			return fail("lease %s missing from the expiry index", l.id)
		}
		leaseCount[l.ns]++
		return true
	})
	if err != nil {
		return err
	}
	if s.byProc.Len() != s.leases.Len() || s.expiry.Len() != s.leases.Len() {
		return fmt.Errorf("indexes: %d leases, %d by process, %d by expiry", s.leases.Len(), s.byProc.Len(), s.expiry.Len())
	}
	s.namespaces.Ascend(func(n nsRec) bool {
		if n.semCount != semCount[n.name] || n.leaseCount != leaseCount[n.name] {
			return fail("namespace %s counts: semaphores %d/%d leases %d/%d", n.name, n.semCount, semCount[n.name], n.leaseCount, leaseCount[n.name])
		}
		if n.version < 1 {
			return fail("namespace %s version %d", n.name, n.version)
		}
		return true
	})
	return err
}
