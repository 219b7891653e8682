package fsm

import (
	"strings"

	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
)

// Reads of locks and lock leases; each takes the reader's now.

// GetLockLease returns a lock lease alive at now, or NotFound.
func (f *FSM) GetLockLease(ns, id string, now int64) (*pb.LockLease, error) {
	s, done := f.read()
	defer done()
	l, err := s.liveLease(ns, id, now)
	if err != nil {
		return nil, err
	}
	return lockLeaseView(l), nil
}

// ListLockLeases pages through lock leases alive at now, by lease id; a
// non-empty proc keeps only that process's.
func (f *FSM) ListLockLeases(ns, proc string, limit int32, token string, now int64) (Page[*pb.LockLease], error) {
	s, done := f.read()
	defer done()
	lp, err := s.listLeases(ns, proc, LockLeaseIDPrefix, limit, token, now)
	if err != nil {
		return Page[*pb.LockLease]{}, err
	}
	p := Page[*pb.LockLease]{Next: lp.Next, Previous: lp.Previous}
	for _, l := range lp.Items {
		p.Items = append(p.Items, lockLeaseView(l))
	}
	return p, nil
}

// GetLock returns a lock's state at now (UNLOCKED when nobody holds it).
func (f *FSM) GetLock(ns, name string, now int64) (*pb.Lock, error) {
	s, done := f.read()
	defer done()
	if _, ok := s.getNS(ns); !ok {
		return nil, namespaceNotFound(ns)
	}
	return s.lockView(ns, name, now), nil
}

// LockView is GetLock with the raft index it reflects (watch streams).
func (f *FSM) LockView(ns, name string, now int64) (*pb.Lock, uint64, error) {
	s, done := f.read()
	defer done()
	if _, ok := s.getNS(ns); !ok {
		return nil, 0, namespaceNotFound(ns)
	}
	return s.lockView(ns, name, now), s.lastIndex, nil
}

// ListLocks pages through held locks by name; a non-empty prefix (a lock
// name) keeps that lock and its descendants. A lock whose holders all
// expired (not reaped yet) is not listed.
func (f *FSM) ListLocks(ns, prefix string, limit int32, token string, now int64) (Page[*pb.Lock], error) {
	s, done := f.read()
	defer done()
	if _, ok := s.getNS(ns); !ok {
		return Page[*pb.Lock]{}, namespaceNotFound(ns)
	}
	in := func(name string) bool { return prefix == "" || name == prefix || IsAncestor(prefix, name) }
	// The scope starts at the prefix itself; names between it and its
	// descendants ("a-b" sorts between "a" and "a/b") are skipped.
	sc := listScope[lockRec]{kind: "lock", tree: s.locks.tree, start: lockRec{ns: ns, name: prefix},
		inScope: func(r lockRec) bool {
			return r.ns == ns && (prefix == "" || strings.HasPrefix(r.name, prefix))
		},
		keyOf: func(r lockRec) string { return r.name },
		pivot: func(k string) (lockRec, bool) { return lockRec{ns: ns, name: k}, true },
		visible: func(r lockRec) bool {
			if !in(r.name) {
				return false
			}
			live := s.lockIdx[LockKey{ns, r.name}]
			if live == nil {
				return false
			}
			for _, h := range live.holders {
				if h.lease.liveExp > now {
					return true
				}
			}
			return false
		}}
	lp, err := sc.page(limit, token)
	if err != nil {
		return Page[*pb.Lock]{}, err
	}
	p := Page[*pb.Lock]{Next: lp.Next, Previous: lp.Previous}
	for _, r := range lp.Items {
		p.Items = append(p.Items, s.lockView(ns, r.name, now))
	}
	return p, nil
}

// ---- what the leader's lock queues read ----

// LockConflict says what blocks a request of lease on name (exclusive or
// shared) among the holders, once the pending changes are made: the
// reason (UNSPECIFIED: nothing) and, with names, up to 50 lock names.
func (f *FSM) LockConflict(ns, name, lease string, excl bool, changes []LockChange, names bool) (pb.ContentionReason, []string) {
	s, done := f.read()
	defer done()
	return s.conflict(lockAsk{ns: ns, name: name, lease: lease, li: s.identOf(ns, lease), excl: excl}, changes, names)
}

// LockHeld says whether a lease holds a lock, and in which mode.
func (f *FSM) LockHeld(ns, name, lease string) (held, excl bool) {
	s, done := f.read()
	defer done()
	if h := s.lockHoldOf(ns, name, lease); h != nil {
		return true, h.excl
	}
	return false, false
}

// LockStanding is what the leader reads of a lease before its request on
// a lock, under one read of the state: whether it holds the lock and in
// which mode, and whether a hold of its own covers the request
// (LockCovered).
func (f *FSM) LockStanding(ns, name, lease string, excl bool) (held, heldExcl, covered bool) {
	s, done := f.read()
	defer done()
	li := s.identOf(ns, lease)
	if li == nil || li.lockCount() == 0 {
		return false, false, false
	}
	if h := li.lockOf(name); h != nil {
		held, heldExcl = true, h.excl
	}
	return held, heldExcl, s.covered(li, name, excl)
}

// LockCovered says whether a lease already holds the lock or one of its
// ancestors in a mode at least as strong as asked (exclusive covers
// both). Granting a covered request blocks nobody the covering hold does
// not already block, so it never waits in the queue.
func (f *FSM) LockCovered(ns, name, lease string, excl bool) bool {
	s, done := f.read()
	defer done()
	li := s.identOf(ns, lease)
	if li == nil {
		return false
	}
	return s.covered(li, name, excl)
}

func (s *state) covered(li *leaseIdent, name string, excl bool) bool {
	if li.lockCount() == 0 {
		return false
	}
	covers := func(n string) bool {
		h := li.lockOf(n)
		return h != nil && (h.excl || !excl)
	}
	if covers(name) {
		return true
	}
	found := false
	ancestors(name, func(a string) { found = found || covers(a) })
	return found
}

// LeaseLocks lists the locks a lease holds, by name.
func (f *FSM) LeaseLocks(ns, lease string) []string {
	s, done := f.read()
	defer done()
	li := s.identOf(ns, lease)
	if li == nil {
		return nil
	}
	hs := li.lockList()
	out := make([]string, len(hs))
	for i, h := range hs {
		out[i] = h.name
	}
	return out
}

// LockHolderLeases lists the leases holding a lock, in acquisition order.
func (f *FSM) LockHolderLeases(ns, name string) []string {
	s, done := f.read()
	defer done()
	live := s.lockLiveOf(ns, name)
	if live == nil {
		return nil
	}
	out := make([]string, len(live.holders))
	for i, h := range live.holders {
		out[i] = h.lease.id
	}
	return out
}

// LeaseProcesses returns the process id of each lease (empty when gone).
func (f *FSM) LeaseProcesses(ns string, leaseIDs []string) []string {
	s, done := f.read()
	defer done()
	out := make([]string, len(leaseIDs))
	for i, id := range leaseIDs {
		if li := s.identOf(ns, id); li != nil {
			out[i] = li.proc
		}
	}
	return out
}
