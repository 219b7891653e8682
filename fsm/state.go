package fsm

import (
	"sort"

	"github.com/google/btree"
)

// The state is a set of ordered trees of plain values, keyed by composite
// keys. Values (not pointers) make a clone a true point-in-time copy:
// btree.Clone is O(1) and copy-on-write, so Snapshot holds the lock only
// for the clone. Metadata maps are never mutated in place, only replaced.

const btreeDegree = 32

type nsRec struct {
	name, desc           string
	md                   map[string]string
	version              int64
	createdAt, updatedAt int64
	// Derived counts, rebuilt on restore.
	semCount, leaseCount int64
}

type semRec struct {
	ns, name, desc       string
	md                   map[string]string
	permits              int64
	version              int64
	createdAt, updatedAt int64
	lastActivity         int64
	// Derived: sum of holder weights and number of holders, counting
	// holders whose lease has expired but was not reaped yet.
	holds, holders int64
}

type leaseRec struct {
	ns, id, proc string
	ttl          int64
	createdAt    int64
	expiresAt    int64
}

type holderRec struct {
	ns, sem  string
	seq      uint64 // acquisition order within the whole state
	leaseID  string
	weight   int64
	lockedAt int64
	token    uint64
	md       map[string]string
}

// leaseHoldKey indexes holds by lease: (ns, lease, sem) -> holder seq.
type leaseHoldKey struct {
	ns, leaseID, sem string
	seq              uint64
}

type procKey struct{ ns, proc, id string }

type expiryKey struct {
	at     int64
	ns, id string
}

type memberRec struct{ id, raftAddr, grpcAddr string }

type state struct {
	namespaces *btree.BTreeG[nsRec]
	semaphores *btree.BTreeG[semRec]
	holders    *btree.BTreeG[holderRec]
	leaseHolds *btree.BTreeG[leaseHoldKey]
	leases     *btree.BTreeG[leaseRec]
	byProc     *btree.BTreeG[procKey]
	expiry     *btree.BTreeG[expiryKey]
	members    *btree.BTreeG[memberRec]

	lastNow   int64  // greatest command `now` applied
	lastToken uint64 // greatest fencing token handed out
	holdSeq   uint64 // last holder sequence number
	lastIndex uint64 // raft index of the last applied entry
	limits    Limits
}

func newState() *state {
	return &state{
		namespaces: btree.NewG(btreeDegree, func(a, b nsRec) bool { return a.name < b.name }),
		semaphores: btree.NewG(btreeDegree, func(a, b semRec) bool {
			if a.ns != b.ns {
				return a.ns < b.ns
			}
			return a.name < b.name
		}),
		holders: btree.NewG(btreeDegree, func(a, b holderRec) bool {
			if a.ns != b.ns {
				return a.ns < b.ns
			}
			if a.sem != b.sem {
				return a.sem < b.sem
			}
			return a.seq < b.seq
		}),
		leaseHolds: btree.NewG(btreeDegree, func(a, b leaseHoldKey) bool {
			if a.ns != b.ns {
				return a.ns < b.ns
			}
			if a.leaseID != b.leaseID {
				return a.leaseID < b.leaseID
			}
			return a.sem < b.sem
		}),
		leases: btree.NewG(btreeDegree, func(a, b leaseRec) bool {
			if a.ns != b.ns {
				return a.ns < b.ns
			}
			return a.id < b.id
		}),
		byProc: btree.NewG(btreeDegree, func(a, b procKey) bool {
			if a.ns != b.ns {
				return a.ns < b.ns
			}
			if a.proc != b.proc {
				return a.proc < b.proc
			}
			return a.id < b.id
		}),
		expiry: btree.NewG(btreeDegree, func(a, b expiryKey) bool {
			if a.at != b.at {
				return a.at < b.at
			}
			if a.ns != b.ns {
				return a.ns < b.ns
			}
			return a.id < b.id
		}),
		members: btree.NewG(btreeDegree, func(a, b memberRec) bool { return a.id < b.id }),
		limits:  DefaultLimits(),
	}
}

// clone is O(1): every tree is copied lazily on write.
func (s *state) clone() *state {
	c := *s
	c.namespaces = s.namespaces.Clone()
	c.semaphores = s.semaphores.Clone()
	c.holders = s.holders.Clone()
	c.leaseHolds = s.leaseHolds.Clone()
	c.leases = s.leases.Clone()
	c.byProc = s.byProc.Clone()
	c.expiry = s.expiry.Clone()
	c.members = s.members.Clone()
	return &c
}

func (s *state) getNS(name string) (nsRec, bool) { return s.namespaces.Get(nsRec{name: name}) }

func (s *state) getSem(ns, name string) (semRec, bool) {
	return s.semaphores.Get(semRec{ns: ns, name: name})
}

func (s *state) getLease(ns, id string) (leaseRec, bool) {
	return s.leases.Get(leaseRec{ns: ns, id: id})
}

// holderOf finds the hold a lease has on a semaphore.
func (s *state) holderOf(ns, sem, leaseID string) (holderRec, bool) {
	k, ok := s.leaseHolds.Get(leaseHoldKey{ns: ns, leaseID: leaseID, sem: sem})
	if !ok {
		return holderRec{}, false
	}
	return s.holders.Get(holderRec{ns: ns, sem: sem, seq: k.seq})
}

func (s *state) putLease(l leaseRec) {
	s.leases.ReplaceOrInsert(l)
	s.byProc.ReplaceOrInsert(procKey{ns: l.ns, proc: l.proc, id: l.id})
	s.expiry.ReplaceOrInsert(expiryKey{at: l.expiresAt, ns: l.ns, id: l.id})
}

// setLeaseExpiry moves a lease in the expiry index.
func (s *state) setLeaseExpiry(l leaseRec, at int64) leaseRec {
	s.expiry.Delete(expiryKey{at: l.expiresAt, ns: l.ns, id: l.id})
	l.expiresAt = at
	s.leases.ReplaceOrInsert(l)
	s.expiry.ReplaceOrInsert(expiryKey{at: at, ns: l.ns, id: l.id})
	return l
}

// removeHolder drops one hold and adjusts its semaphore's counts.
func (s *state) removeHolder(h holderRec) {
	s.holders.Delete(h)
	s.leaseHolds.Delete(leaseHoldKey{ns: h.ns, leaseID: h.leaseID, sem: h.sem})
	if sem, ok := s.getSem(h.ns, h.sem); ok {
		sem.holds -= h.weight
		sem.holders--
		s.semaphores.ReplaceOrInsert(sem)
	}
}

// removeLease drops a lease, every hold it owns and its index entries. It
// returns the names of the semaphores it held, in name order.
func (s *state) removeLease(l leaseRec) []string {
	var keys []leaseHoldKey
	s.leaseHolds.AscendGreaterOrEqual(leaseHoldKey{ns: l.ns, leaseID: l.id}, func(k leaseHoldKey) bool {
		if k.ns != l.ns || k.leaseID != l.id {
			return false
		}
		keys = append(keys, k)
		return true
	})
	sems := make([]string, 0, len(keys))
	for _, k := range keys {
		if h, ok := s.holders.Get(holderRec{ns: k.ns, sem: k.sem, seq: k.seq}); ok {
			s.removeHolder(h)
		}
		sems = append(sems, k.sem)
	}
	s.leases.Delete(l)
	s.byProc.Delete(procKey{ns: l.ns, proc: l.proc, id: l.id})
	s.expiry.Delete(expiryKey{at: l.expiresAt, ns: l.ns, id: l.id})
	if ns, ok := s.getNS(l.ns); ok {
		ns.leaseCount--
		s.namespaces.ReplaceOrInsert(ns)
	}
	return sems
}

// semaphoreHolders lists a semaphore's holds in acquisition order.
func (s *state) semaphoreHolders(ns, sem string) []holderRec {
	var hs []holderRec
	s.holders.AscendGreaterOrEqual(holderRec{ns: ns, sem: sem}, func(h holderRec) bool {
		if h.ns != ns || h.sem != sem {
			return false
		}
		hs = append(hs, h)
		return true
	})
	return hs
}

// anyExpired says whether some lease has expires_at <= now. When none has,
// stored counts are already the effective ones (the fast path of reads).
func (s *state) anyExpired(now int64) bool {
	min, ok := s.expiry.Min()
	return ok && min.at <= now
}

// effectiveHolds is a semaphore's active_holds and active_holders_count at
// now: holders whose lease expired (even if not reaped yet) do not count.
func (s *state) effectiveHolds(sem semRec, now int64) (holds, holders int64) {
	if !s.anyExpired(now) {
		return sem.holds, sem.holders
	}
	for _, h := range s.semaphoreHolders(sem.ns, sem.name) {
		if l, ok := s.getLease(h.ns, h.leaseID); ok && l.expiresAt > now {
			holds += h.weight
			holders++
		}
	}
	return holds, holders
}

func sortedKeys(m map[string]string) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// copyMetadata returns an owned copy (nil for an empty map), so that no
// caller's map is ever aliased into the state.
func copyMetadata(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	c := make(map[string]string, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}
