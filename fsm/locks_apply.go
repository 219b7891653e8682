package fsm

import (
	fsmpb "github.com/grackle-coord/grackle/proto/grackle/fsm/v1"
	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
)

// LockGrantResult is the outcome of one conditional lock grant.
type LockGrantResult struct {
	Granted bool
	// Err is set when the grant can never apply (lease or namespace gone,
	// a limit reached).
	Err    *Error
	Lock   *pb.Lock
	Holder *pb.LockHolder
}

// setLeaseResult puts a lease into the result as the view of its kind.
func (a *applier) setLeaseResult(l leaseRec) {
	if IsLockLeaseID(l.id) {
		a.res.LockLease = lockLeaseView(l)
	} else {
		a.res.Lease = l.view()
	}
}

func validateLockGrant(g *fsmpb.LockGrant) *Error {
	return firstErr(ValidateName("namespace_name", g.GetNamespaceName()), ValidateLockName("lock_name", g.GetLockName()),
		ValidateLockLeaseID("lease_id", g.GetLeaseId()), ValidateMetadata("metadata", g.GetMetadata()))
}

// lockLease finds a live lock lease, or the NotFound that ends the call.
func (a *applier) lockLease(ns, id string) (*leaseIdent, *Error) {
	li := a.s.identOf(ns, id)
	if li == nil || li.liveExp <= a.now {
		return nil, notFound(ReasonLeaseNotFound, "lock lease %q not found or expired in namespace %q", id, ns)
	}
	return li, nil
}

// tryLock grants g unless it conflicts with a holder (or, queued, must wait
// its turn). It returns the stored hold when granted.
func (a *applier) tryLock(g *fsmpb.LockGrant, queued bool) (*lockHold, *Error) {
	s := a.s
	ns, ok := s.getNS(g.NamespaceName)
	if !ok {
		return nil, namespaceNotFound(g.NamespaceName)
	}
	li, err := a.lockLease(ns.name, g.LeaseId)
	if err != nil {
		return nil, err
	}
	old := li.lockOf(g.LockName)
	// A re-acquire in the same mode and a downgrade never wait: neither
	// can conflict with anyone. (A request covered by an ancestor's hold
	// of the lease is never queued by the leader: LockCovered.)
	keeps := old != nil && (old.excl == g.Exclusive || old.excl)
	if queued && !keeps {
		a.res.LockReason = pb.ContentionReason_CONTENTION_REASON_QUEUE
		return nil, nil
	}
	if !keeps {
		q := lockAsk{ns: ns.name, name: g.LockName, lease: li.id, li: li, excl: g.Exclusive}
		if r, names := s.conflict(q, nil, true); r != pb.ContentionReason_CONTENTION_REASON_UNSPECIFIED {
			a.res.LockReason, a.res.BlockingLocks = r, names
			return nil, nil
		}
	}
	live := s.lockLiveOf(ns.name, g.LockName)
	if old == nil {
		if live == nil && ns.lockCount >= s.limits.MaxLocksPerNamespace {
			return nil, errf(CodeResourceExhausted, "locks: limit of %d held locks per namespace reached in %q", s.limits.MaxLocksPerNamespace, ns.name)
		}
		if live != nil && int64(len(live.holders)) >= s.limits.MaxHoldersPerLock {
			return nil, errf(CodeResourceExhausted, "holders: limit of %d per lock reached on %q", s.limits.MaxHoldersPerLock, g.LockName)
		}
	}
	// A new hold, or a changed one with more metadata, grows the state.
	if old == nil || lockHoldSize(&lockHold{ns: ns.name, name: g.LockName, md: g.Metadata}) > lockHoldSize(old) {
		if err := s.overQuota(); err != nil {
			return nil, err
		}
	}
	token := a.index
	if token <= s.lastToken {
		token = s.lastToken + 1
	}
	s.lastToken = token
	rec := lockRec{ns: ns.name, name: g.LockName, lockedAt: a.now, lastActivity: a.now}
	if live != nil {
		rec.name, rec.lockedAt = live.rec.name, live.rec.lockedAt // keep the stored name string
	}
	h := &lockHold{ns: ns.name, name: rec.name, lease: li, excl: g.Exclusive, token: token, md: copyMetadata(g.Metadata)}
	if old != nil {
		h.seq, h.lockedAt = old.seq, old.lockedAt
		if old.excl && !g.Exclusive {
			a.res.FreedLocks = append(a.res.FreedLocks, LockKey{ns.name, rec.name})
		}
	} else {
		s.holdSeq++
		h.seq, h.lockedAt = s.holdSeq, a.now
	}
	s.putLockHold(h, rec)
	return h, nil
}

func (a *applier) acquireLock(c *fsmpb.AcquireLock) *Error {
	g := c.GetGrant()
	if err := validateLockGrant(g); err != nil {
		return err
	}
	h, err := a.tryLock(g, c.Queued)
	if err != nil {
		a.res.LockReason, a.res.BlockingLocks = 0, nil
		return err
	}
	if h != nil {
		a.res.Acquired = true
		a.res.LockHolder = lockHolderView(h)
	}
	a.res.Lock = a.s.lockView(g.NamespaceName, g.LockName, a.now)
	return nil
}

// lockGrants applies the conditional lock grants of a command, in order.
// A grant that does not apply makes every later one that conflicts with it
// skip, so no request overtakes an earlier conflicting one.
func (a *applier) lockGrants(gs []*fsmpb.LockGrant) {
	a.res.LockGrants = make([]LockGrantResult, len(gs))
	var failed []*fsmpb.LockGrant
	for i, g := range gs {
		r := &a.res.LockGrants[i]
		skip := false
		for _, f := range failed {
			if f.GetNamespaceName() == g.GetNamespaceName() &&
				LocksConflict(f.GetLeaseId(), f.GetLockName(), f.GetExclusive(), g.GetLeaseId(), g.GetLockName(), g.GetExclusive()) {
				skip = true
				break
			}
		}
		var h *lockHold
		if !skip {
			if r.Err = validateLockGrant(g); r.Err == nil {
				// The grant's reason is not the command's: keep the op's.
				reason, blocking := a.res.LockReason, a.res.BlockingLocks
				h, r.Err = a.tryLock(g, false)
				a.res.LockReason, a.res.BlockingLocks = reason, blocking
			}
		}
		if h == nil {
			failed = append(failed, g)
			if r.Err == nil || r.Err.Code != CodeInvalidArgument {
				if _, ok := a.s.getNS(g.GetNamespaceName()); ok {
					r.Lock = a.s.lockView(g.GetNamespaceName(), g.GetLockName(), a.now)
				}
			}
			continue
		}
		r.Granted = true
		r.Holder = lockHolderView(h)
		r.Lock = a.s.lockView(h.ns, h.name, a.now)
	}
}

func (a *applier) releaseLock(c *fsmpb.ReleaseLock) *Error {
	if err := firstErr(ValidateName("namespace_name", c.NamespaceName), ValidateLockName("lock_name", c.LockName),
		ValidateLockLeaseID("lease_id", c.LeaseId)); err != nil {
		return err
	}
	s := a.s
	if _, ok := s.getNS(c.NamespaceName); !ok {
		return namespaceNotFound(c.NamespaceName)
	}
	if h := s.lockHoldOf(c.NamespaceName, c.LockName, c.LeaseId); h != nil {
		s.dropLockHold(h, a.now)
		a.res.Released = true
		a.res.FreedLocks = append(a.res.FreedLocks, LockKey{h.ns, h.name})
	}
	a.res.Lock = s.lockView(c.NamespaceName, c.LockName, a.now)
	return nil
}

func (a *applier) deleteLock(c *fsmpb.DeleteLock) *Error {
	if err := firstErr(ValidateName("namespace_name", c.NamespaceName), ValidateLockName("lock_name", c.LockName)); err != nil {
		return err
	}
	s := a.s
	if _, ok := s.getNS(c.NamespaceName); !ok {
		return namespaceNotFound(c.NamespaceName)
	}
	live := s.lockLiveOf(c.NamespaceName, c.LockName)
	if live == nil {
		return nil
	}
	for _, h := range append([]*lockHold(nil), live.holders...) {
		s.dropLockHold(h, a.now)
	}
	a.res.Released = true
	a.res.FreedLocks = append(a.res.FreedLocks, LockKey{c.NamespaceName, c.LockName})
	return nil
}
