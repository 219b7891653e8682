package fsm

import (
	"maps"
	"sort"
	"strings"

	"github.com/tidwall/btree"
)

// The state is a set of ordered trees of plain values, keyed by composite
// keys. Values (not pointers) make a clone a true point-in-time copy:
// a tree's Copy is O(1) and copy-on-write, so Snapshot holds the lock only
// for the clone. Metadata maps are never mutated in place, only replaced.

type nsRec struct {
	name, desc           string
	md                   map[string]string
	version              int64
	createdAt, updatedAt int64
	// Derived counts, rebuilt on restore. leaseCount counts semaphore
	// leases, lockLeaseCount lock leases, lockCount held locks.
	semCount, leaseCount      int64
	lockLeaseCount, lockCount int64
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

// leaseRec is a lease as stored in the leases tree. Its identity (ns, id,
// proc: never changed after creation) lives in a shared leaseIdent, so that
// the tree and the derived indexes carry one pointer instead of three
// strings; only ttl and expiresAt change, and those are plain values here.
type leaseRec struct {
	*leaseIdent
	ttl       int64
	createdAt int64
	expiresAt int64
}

// leaseIdent is the identity of one lease, shared by its record, its index
// entries and the live lease index. ns, id and proc are immutable. The
// other fields are derived, live-only data of the state that created the
// ident: a mirror of the lease's current record and the holds it owns.
// They are written only under the FSM's write lock and never read through
// a snapshot clone (Persist reads only ns, id and proc), so a clone that
// shares the ident still is a point-in-time copy.
type leaseIdent struct {
	ns, id, proc string
	md           map[string]string // a lock lease's metadata (immutable)

	liveTTL, liveCreated, liveExp int64
	holds                         []leaseHold              // sorted by semaphore name
	locks                         *btree.BTreeG[*lockHold] // a lock lease's holds, by lock name (nil: none)
}

// leaseHold is one hold of a lease, as the lease sees it: the holder
// record itself, shared with the holders tree. A stored holder record is
// never changed (a change stores a new record), so the pointer is as good
// as a copy, for the tree's snapshot clones too, and costs 8 bytes.
type leaseHold = *holderRec

type holderRec struct {
	ns, sem  string
	seq      uint64      // acquisition order within the whole state
	lease    *leaseIdent // the holding lease (Persist reads only its id)
	weight   int64
	lockedAt int64
	token    uint64
	md       map[string]string
}

// procKey indexes leases by (ns, proc, id).
type procKey struct{ *leaseIdent }

// expiryKey indexes leases by (expires_at, ns, id).
type expiryKey struct {
	at int64
	*leaseIdent
}

// leaseIndex finds a lease's ident by (ns, id): one map of lease ids per
// namespace, so that an entry is a string and a pointer (a single map keyed
// by both strings costs twice the hashing and a bigger slot per lease).
type leaseIndex struct {
	byNS map[string]map[string]*leaseIdent
}

func newLeaseIndex() leaseIndex { return leaseIndex{byNS: map[string]map[string]*leaseIdent{}} }

func (x leaseIndex) get(ns, id string) *leaseIdent { return x.byNS[ns][id] }

// put registers li; sizeHint presizes a namespace's map when it is
// created.
func (x leaseIndex) put(li *leaseIdent, sizeHint int) {
	m := x.byNS[li.ns]
	if m == nil {
		m = make(map[string]*leaseIdent, sizeHint)
		x.byNS[li.ns] = m
	}
	m[li.id] = li
}

func (x leaseIndex) del(li *leaseIdent) {
	if m := x.byNS[li.ns]; m != nil {
		delete(m, li.id)
		if len(m) == 0 {
			delete(x.byNS, li.ns)
		}
	}
}

// len is the number of leases indexed (O(namespaces)).
func (x leaseIndex) len() int {
	n := 0
	for _, m := range x.byNS {
		n += len(m)
	}
	return n
}

type memberRec struct {
	id, raftAddr, grpcAddr string
	voter                  bool // to be promoted once caught up (SetMember.voter)
}

type state struct {
	// The tables: Persist writes these (from a clone).
	// Each keeps the accounted size of its records (quota.go).
	namespaces *table[nsRec]
	semaphores *table[semRec]
	holders    *table[*holderRec] // records immutable once stored
	leases     *table[leaseRec]
	members    *table[memberRec]
	tokens     *table[tokenRec]   // access tokens, by id (acl.go)
	locks      *table[lockRec]    // held locks, by (ns, name) (locks.go)
	lockHolds  *table[*lockHold]  // by (ns, name, seq); immutable once stored
	waitGroups *table[wgRec]      // by (ns, name) (waits.go)
	jobs       *table[jobRec]     // completed jobs, by (ns, wait group, job id)
	barriers   *table[barRec]     // by (ns, name)
	arrivals   *table[arrivalRec] // barrier participants, by (ns, barrier, generation, seq)

	// Derived indexes, rebuilt on restore and never persisted, so a
	// snapshot clone does not carry them (see clone).
	byProc    *btree.BTreeG[procKey]
	expiry    *btree.BTreeG[expiryKey]
	leaseIdx  leaseIndex              // point lookups of leases
	semIdx    map[SemKey]semRec       // point lookups of semaphores (a mirror of the tree)
	tokenIdx  map[string]string       // token secret hash -> token id
	lockIdx   map[LockKey]*lockLive   // held locks (locks.go)
	lockBelow map[LockKey]lockCounts  // holds strictly below a name (locks.go)
	timers    *btree.BTreeG[timerKey] // wait-group and barrier deadlines (waits.go)
	arrived   map[arrivalKey]struct{} // who arrived at a barrier generation
	waitCount map[string]waitCounts   // wait groups and barriers per namespace

	lastNow   int64  // greatest command `now` applied
	lastToken uint64 // greatest fencing token handed out
	holdSeq   uint64 // last holder sequence number
	lastIndex uint64 // raft index of the last applied entry
	limits    Limits
	// aclBootstrapped: the first admin token was created (once per cluster).
	aclBootstrapped bool
}

// The comparators compare each string once (strings.Compare), and the
// strings records share (a namespace's or a semaphore's name) are the same
// string in every record, so that equal ones compare by pointer.
func lessSem(a, b semRec) bool {
	if c := strings.Compare(a.ns, b.ns); c != 0 {
		return c < 0
	}
	return a.name < b.name
}

func lessHolder(a, b *holderRec) bool {
	if c := strings.Compare(a.ns, b.ns); c != 0 {
		return c < 0
	}
	if c := strings.Compare(a.sem, b.sem); c != 0 {
		return c < 0
	}
	return a.seq < b.seq
}

// Comparators of keys holding a *leaseIdent: a nil ident (a search
// start) sorts first; the same ident is equal without a string compare.
func lessLease(a, b leaseRec) bool {
	if a.leaseIdent == b.leaseIdent {
		return false
	}
	if a.leaseIdent == nil || b.leaseIdent == nil {
		return a.leaseIdent == nil
	}
	if c := strings.Compare(a.ns, b.ns); c != 0 {
		return c < 0
	}
	return a.id < b.id
}

func lessNS(a, b nsRec) bool { return a.name < b.name }

func lessProc(a, b procKey) bool {
	if a.leaseIdent == b.leaseIdent {
		return false
	}
	if a.leaseIdent == nil || b.leaseIdent == nil {
		return a.leaseIdent == nil
	}
	if a.ns != b.ns {
		return a.ns < b.ns
	}
	if a.proc != b.proc {
		return a.proc < b.proc
	}
	return a.id < b.id
}

func lessExpiry(a, b expiryKey) bool {
	if a.at != b.at {
		return a.at < b.at
	}
	if a.leaseIdent == b.leaseIdent {
		return false
	}
	if a.leaseIdent == nil || b.leaseIdent == nil {
		return a.leaseIdent == nil
	}
	if a.ns != b.ns {
		return a.ns < b.ns
	}
	return a.id < b.id
}

func newState() *state {
	return &state{
		namespaces: newTable(lessNS, nsSize),
		semaphores: newTable(lessSem, semSize),
		holders:    newTable(lessHolder, holderSize),
		leases:     newTable(lessLease, leaseSize),
		byProc:     newTree(btreeDegree, lessProc),
		expiry:     newTree(btreeDegree, lessExpiry),
		leaseIdx:   newLeaseIndex(),
		semIdx:     make(map[SemKey]semRec),
		members:    newTable(func(a, b memberRec) bool { return a.id < b.id }, memberSize),
		tokens:     newTable(func(a, b tokenRec) bool { return a.id < b.id }, tokenSize),
		tokenIdx:   make(map[string]string),
		locks:      newTable(lessLock, lockSize),
		lockHolds:  newTable(lessLockHold, lockHoldSize),
		lockIdx:    map[LockKey]*lockLive{},
		lockBelow:  map[LockKey]lockCounts{},
		waitGroups: newTable(lessWG, wgSize),
		jobs:       newTable(lessJob, jobSize),
		barriers:   newTable(lessBar, barSize),
		arrivals:   newTable(lessArrival, arrivalSize),
		timers:     newTree(btreeDegree, lessTimer),
		arrived:    map[arrivalKey]struct{}{},
		waitCount:  map[string]waitCounts{},
		limits:     DefaultLimits(),
	}
}

// persistView is what Snapshot takes under the lock: an O(1) point-in-time
// copy of the tables for Persist. Every table is a btree of plain values,
// copied lazily on write (Copy). The derived indexes are not part of
// it: Persist does not read them, and the live indexes (leaseIdx, semIdx,
// tokenIdx) and the live fields of the leaseIdents could not be shared with
// a copy. They are nil in the view, so that a use would fail loudly instead
// of reading live data. The leaseIdents the view's leases point at are shared with
// the live state, but Persist reads only their immutable fields (ns, id,
// proc).
func (s *state) persistView() *state {
	c := *s
	c.namespaces = s.namespaces.Copy()
	c.semaphores = s.semaphores.Copy()
	c.holders = s.holders.Copy()
	c.leases = s.leases.Copy()
	c.members = s.members.Copy()
	c.tokens = s.tokens.Copy()
	c.locks = s.locks.Copy()
	c.lockHolds = s.lockHolds.Copy()
	c.waitGroups, c.jobs = s.waitGroups.Copy(), s.jobs.Copy()
	c.barriers, c.arrivals = s.barriers.Copy(), s.arrivals.Copy()
	c.timers, c.arrived, c.waitCount = nil, nil, nil
	c.byProc, c.expiry, c.leaseIdx, c.semIdx, c.tokenIdx = nil, nil, leaseIndex{}, nil, nil
	c.lockIdx, c.lockBelow = nil, nil
	return &c
}

// clone is an independent copy that can be applied to (tests). The tables
// without lease identities are copy-on-write clones; the lease side (whose
// idents carry live data) and the holders (which point at their lease's
// ident) are rebuilt, O(leases + holders).
func (s *state) clone() *state {
	c := newState()
	c.namespaces = s.namespaces.Copy()
	c.semaphores = s.semaphores.Copy()
	c.members = s.members.Copy()
	c.tokens = s.tokens.Copy()
	c.tokenIdx = maps.Clone(s.tokenIdx)
	c.aclBootstrapped = s.aclBootstrapped
	c.semIdx = maps.Clone(s.semIdx)
	c.lastNow, c.lastToken, c.holdSeq, c.lastIndex, c.limits = s.lastNow, s.lastToken, s.holdSeq, s.lastIndex, s.limits
	s.leases.Scan(func(l leaseRec) bool {
		li := &leaseIdent{ns: l.ns, id: l.id, proc: l.proc, md: l.md}
		c.putLease(leaseRec{leaseIdent: li, ttl: l.ttl, createdAt: l.createdAt, expiresAt: l.expiresAt})
		return true
	})
	hs := make([]*holderRec, 0, s.holders.Len())
	s.holders.Scan(func(h *holderRec) bool {
		n := *h
		n.lease = c.identOf(h.ns, h.lease.id)
		hs = append(hs, &n)
		if n.lease != nil {
			n.lease.setHold(&n)
		}
		return true
	})
	if err := c.holders.buildFromSorted(lessHolder, hs); err != nil {
		panic("fsm: clone of a holders table out of order: " + err.Error())
	}
	c.waitGroups, c.jobs = s.waitGroups.Copy(), s.jobs.Copy()
	c.barriers, c.arrivals = s.barriers.Copy(), s.arrivals.Copy()
	c.timers = s.timers.Copy()
	c.arrived, c.waitCount = maps.Clone(s.arrived), maps.Clone(s.waitCount)
	s.lockHolds.Scan(func(h *lockHold) bool {
		n := *h
		n.lease = c.identOf(h.ns, h.lease.id)
		if n.lease != nil {
			c.putLockHold(&n, s.lockIdx[LockKey{h.ns, h.name}].rec)
		}
		return true
	})
	return c
}

func (s *state) getNS(name string) (nsRec, bool) { return s.namespaces.Get(nsRec{name: name}) }

func (s *state) getSem(ns, name string) (semRec, bool) {
	x, ok := s.semIdx[SemKey{ns, name}]
	return x, ok
}

// putSem stores a semaphore record (tree and mirror).
func (s *state) putSem(x semRec) {
	s.semaphores.Set(x)
	s.semIdx[SemKey{x.ns, x.name}] = x
}

func (s *state) delSem(x semRec) {
	s.semaphores.Delete(x)
	delete(s.semIdx, SemKey{x.ns, x.name})
}

// identOf finds a lease's ident (nil: no such lease).
func (s *state) identOf(ns, id string) *leaseIdent { return s.leaseIdx.get(ns, id) }

func (li *leaseIdent) rec() leaseRec {
	return leaseRec{leaseIdent: li, ttl: li.liveTTL, createdAt: li.liveCreated, expiresAt: li.liveExp}
}

func (s *state) getLease(ns, id string) (leaseRec, bool) {
	li := s.identOf(ns, id)
	if li == nil {
		return leaseRec{}, false
	}
	return li.rec(), true
}

// findHold finds the hold a lease has on a semaphore, by position in the
// lease's holds.
func (li *leaseIdent) findHold(sem string) (int, bool) {
	lo, hi := 0, len(li.holds)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if li.holds[m].sem < sem {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo, lo < len(li.holds) && li.holds[lo].sem == sem
}

// setHold records (or updates) a hold in its lease's holds.
func (li *leaseIdent) setHold(h leaseHold) {
	i, ok := li.findHold(h.sem)
	if ok {
		li.holds[i] = h
		return
	}
	li.holds = append(li.holds, nil)
	copy(li.holds[i+1:], li.holds[i:])
	li.holds[i] = h
}

func (li *leaseIdent) dropHold(sem string) {
	if i, ok := li.findHold(sem); ok {
		li.holds = append(li.holds[:i], li.holds[i+1:]...)
		if len(li.holds) == 0 {
			li.holds = nil
		}
	}
}

// holdOf finds the hold a lease has on a semaphore, from the lease's side.
func (s *state) holdOf(ns, sem, leaseID string) (leaseHold, *leaseIdent, bool) {
	li := s.identOf(ns, leaseID)
	if li == nil {
		return nil, nil, false
	}
	i, ok := li.findHold(sem)
	if !ok {
		return nil, li, false
	}
	return li.holds[i], li, true
}

// holderOf finds the hold a lease has on a semaphore.
func (s *state) holderOf(ns, sem, leaseID string) (holderRec, bool) {
	lh, _, ok := s.holdOf(ns, sem, leaseID)
	if !ok {
		return holderRec{}, false
	}
	return *lh, true
}

// putLease stores a new lease with its index entries.
func (s *state) putLease(l leaseRec) {
	li := l.leaseIdent
	li.liveTTL, li.liveCreated, li.liveExp = l.ttl, l.createdAt, l.expiresAt
	s.leaseIdx.put(li, 0)
	s.leases.Set(l)
	s.byProc.Set(procKey{li})
	s.expiry.Set(expiryKey{at: l.expiresAt, leaseIdent: li})
}

// setLeaseExpiry moves a lease in the expiry index.
func (s *state) setLeaseExpiry(l leaseRec, at int64) leaseRec {
	s.expiry.Delete(expiryKey{at: l.expiresAt, leaseIdent: l.leaseIdent})
	l.expiresAt = at
	l.liveTTL, l.liveExp = l.ttl, at
	s.leases.Set(l)
	s.expiry.Set(expiryKey{at: at, leaseIdent: l.leaseIdent})
	return l
}

// addHolder stores a new hold (holder record and the lease's side).
func (s *state) addHolder(h holderRec, li *leaseIdent) {
	p := &h
	s.holders.Set(p)
	li.setHold(p)
}

// dropHolder deletes one hold and its index entry; the caller adjusts the
// semaphore's counts. A stored hold's lease is in the leases table
// (removeLease drops a lease's holds with it; check verifies it), so
// h.lease is that lease's ident, without a search.
func (s *state) dropHolder(h holderRec) {
	s.holders.Delete(&h)
	if h.lease != nil {
		h.lease.dropHold(h.sem)
	}
}

// removeLease drops a lease, every hold it owns and its index entries. It
// returns the names of the semaphores it held, in name order.
func (s *state) removeLease(l leaseRec, now int64) []string {
	li := l.leaseIdent
	for _, h := range li.lockList() {
		s.dropLockHold(h, now)
	}
	sems := make([]string, 0, len(li.holds))
	for _, lh := range li.holds {
		s.holders.Delete(lh)
		if sem, ok := s.getSem(li.ns, lh.sem); ok {
			sem.holds -= lh.weight
			sem.holders--
			s.putSem(sem)
		}
		sems = append(sems, lh.sem)
	}
	li.holds = nil
	s.leases.Delete(l)
	s.byProc.Delete(procKey{li})
	s.expiry.Delete(expiryKey{at: l.expiresAt, leaseIdent: li})
	s.leaseIdx.del(li)
	if ns, ok := s.getNS(l.ns); ok {
		if IsLockLeaseID(l.id) {
			ns.lockLeaseCount--
		} else {
			ns.leaseCount--
		}
		s.namespaces.Set(ns)
	}
	return sems
}

// semaphoreHolders lists a semaphore's holds in acquisition order.
func (s *state) semaphoreHolders(ns, sem string) []holderRec {
	var hs []holderRec
	s.holders.Ascend(&holderRec{ns: ns, sem: sem}, func(h *holderRec) bool {
		if h.ns != ns || h.sem != sem {
			return false
		}
		hs = append(hs, *h)
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
		if h.lease.liveExp > now { // the hold's lease, live (see dropHolder)
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
