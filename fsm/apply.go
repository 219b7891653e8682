package fsm

import (
	"strconv"

	fsmpb "github.com/grackle-coord/grackle/proto/grackle/fsm/v1"
	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
)

// SemKey names a semaphore.
type SemKey struct{ Namespace, Semaphore string }

// LeaseKey names a lease.
type LeaseKey struct{ Namespace, LeaseID string }

// Result is what applying one command returns. Err is set when the op
// failed (and then the op changed nothing); the other fields describe what
// the op did, for the caller's response and for the leader's waiter queues.
type Result struct {
	Index uint64
	Err   *Error
	// Rejected: the Raft entry could not be applied at all (it does not
	// decode, or its op is unknown); Err says why and nothing changed.
	Rejected bool

	Namespace *pb.Namespace
	Semaphore *pb.Semaphore
	Lease     *pb.SemaphoreLease
	// Acquire: Acquired says whether the hold was granted; Holder is set then.
	Acquired bool
	Holder   *pb.SemaphoreHolder

	// Grants has one entry per Command.grants, in order.
	Grants []GrantResult

	// Freed lists semaphores whose free permits may have grown (a hold
	// released or shrunk, permits raised), in the order they were touched.
	Freed []SemKey
	// RemovedLeases lists leases that no longer exist (revoked, expired,
	// reaped on refresh, or deleted with their namespace).
	RemovedLeases []LeaseKey
	// RemovedSemaphores lists deleted semaphores (also those deleted with
	// their namespace); RemovedNamespace is set by DeleteNamespace.
	RemovedSemaphores []SemKey
	RemovedNamespace  string

	// Locks (locks_apply.go). LockLease is set instead of Lease for a lock
	// lease. Lock and LockHolder describe an AcquireLock (LockHolder set
	// when granted), a ReleaseLock (Released: the lease held it) or a
	// DeleteLock (Released: it had holders); LockReason and BlockingLocks
	// what kept an AcquireLock from being granted.
	LockLease     *pb.LockLease
	Lock          *pb.Lock
	LockHolder    *pb.LockHolder
	Released      bool
	LockReason    pb.ContentionReason
	BlockingLocks []string
	// LockGrants has one entry per Command.lock_grants, in order.
	LockGrants []LockGrantResult
	// FreedLocks lists locks whose holds were dropped or made shared.
	FreedLocks []LockKey

	// Wait groups and barriers (waits.go). NewJobs counts a completion's
	// new jobs; AllArrived says the arrival's generation tripped (or, for
	// UpdateBarrier, that the update tripped it); Existed that a delete
	// found the thing. Woken lists the wait groups and barriers whose
	// waiters must look again: finished, expired, tripped or deleted
	// (those of a deleted namespace too).
	WaitGroup  *pb.WaitGroup
	Barrier    *pb.Barrier
	NewJobs    int64
	AllArrived bool
	Existed    bool
	Woken      []WaitKey
	// Tripped: a barrier tripped in this command; FinishedWaitGroups:
	// wait groups that became COMPLETED or EXPIRED in it.
	Tripped            bool
	FinishedWaitGroups int

	// Batch has one result per command of a Batch entry, in order.
	Batch []*Result

	// batchCmds are a Batch entry's commands as applied, for
	// Options.Applied (FSM.ApplyBatch takes them out before it returns).
	batchCmds []*fsmpb.Command
}

// GrantResult is the outcome of one conditional grant.
type GrantResult struct {
	Granted bool
	// Err is set when the grant can never apply (lease, semaphore or
	// namespace gone, weight above permits, too many holders).
	Err       *Error
	Semaphore *pb.Semaphore
	Holder    *pb.SemaphoreHolder
}

// applier carries the state of one command's application.
type applier struct {
	s     *state
	index uint64
	now   int64
	res   *Result
}

// applyCommand applies a decoded command at a raft index. It never panics on
// any input; an op it does not know yields CodeInternal.
func (s *state) applyCommand(index uint64, cmd *fsmpb.Command) *Result {
	res := &Result{Index: index}
	if index > s.lastIndex {
		s.lastIndex = index
	}
	// Time never goes backwards inside the state machine, even if a
	// command carries an older clock (a leader with a slow clock).
	now := cmd.GetNow()
	if now < s.lastNow {
		now = s.lastNow
	}
	prevNow := s.lastNow
	s.lastNow = now
	a := &applier{s: s, index: index, now: now, res: res}
	res.Err = a.op(cmd)
	if res.Err != nil && res.Err.Code == CodeInternal {
		// A command this server cannot apply changes nothing: no grants,
		// not even the clock.
		s.lastNow = prevNow
		return res
	}
	if len(cmd.GetGrants()) > 0 {
		a.grants(cmd.GetGrants())
	}
	if len(cmd.GetLockGrants()) > 0 {
		a.lockGrants(cmd.GetLockGrants())
	}
	return res
}

func (a *applier) op(cmd *fsmpb.Command) *Error {
	switch op := cmd.GetOp().(type) {
	case *fsmpb.Command_CreateNamespace:
		return a.createNamespace(op.CreateNamespace)
	case *fsmpb.Command_UpdateNamespace:
		return a.updateNamespace(op.UpdateNamespace)
	case *fsmpb.Command_DeleteNamespace:
		return a.deleteNamespace(op.DeleteNamespace)
	case *fsmpb.Command_CreateSemaphore:
		return a.createSemaphore(op.CreateSemaphore)
	case *fsmpb.Command_UpdateSemaphore:
		return a.updateSemaphore(op.UpdateSemaphore)
	case *fsmpb.Command_DeleteSemaphore:
		return a.deleteSemaphore(op.DeleteSemaphore)
	case *fsmpb.Command_Acquire:
		return a.acquire(op.Acquire)
	case *fsmpb.Command_Release:
		return a.release(op.Release)
	case *fsmpb.Command_CreateLease:
		return a.createLease(op.CreateLease)
	case *fsmpb.Command_RefreshLease:
		return a.refreshLease(op.RefreshLease)
	case *fsmpb.Command_RevokeLease:
		return a.revokeLease(op.RevokeLease)
	case *fsmpb.Command_ExpireLeases:
		return a.expireLeases(op.ExpireLeases)
	case *fsmpb.Command_ExtendLeases:
		return a.extendLeases(op.ExtendLeases)
	case *fsmpb.Command_SetMember:
		return a.setMember(op.SetMember)
	case *fsmpb.Command_RemoveMember:
		return a.removeMember(op.RemoveMember)
	case *fsmpb.Command_SetLimits:
		return a.setLimits(op.SetLimits)
	case *fsmpb.Command_Noop:
		return nil
	case *fsmpb.Command_Batch:
		if len(cmd.GetGrants()) > 0 || len(cmd.GetLockGrants()) > 0 {
			return errf(CodeInternal, "a batch carries no grants of its own")
		}
		return a.batch(op.Batch)
	case *fsmpb.Command_AclBootstrap:
		return a.aclBootstrap(op.AclBootstrap)
	case *fsmpb.Command_AclCreateToken:
		return a.aclCreateToken(op.AclCreateToken)
	case *fsmpb.Command_AclRevokeToken:
		return a.aclRevokeToken(op.AclRevokeToken)
	case *fsmpb.Command_AcquireLock:
		return a.acquireLock(op.AcquireLock)
	case *fsmpb.Command_ReleaseLock:
		return a.releaseLock(op.ReleaseLock)
	case *fsmpb.Command_DeleteLock:
		return a.deleteLock(op.DeleteLock)
	case *fsmpb.Command_CreateWaitGroup:
		return a.createWaitGroup(op.CreateWaitGroup)
	case *fsmpb.Command_UpdateWaitGroup:
		return a.updateWaitGroup(op.UpdateWaitGroup)
	case *fsmpb.Command_DeleteWaitGroup:
		return a.deleteWaitGroup(op.DeleteWaitGroup)
	case *fsmpb.Command_CompleteJobs:
		return a.completeJobs(op.CompleteJobs)
	case *fsmpb.Command_CreateBarrier:
		return a.createBarrier(op.CreateBarrier)
	case *fsmpb.Command_UpdateBarrier:
		return a.updateBarrier(op.UpdateBarrier)
	case *fsmpb.Command_DeleteBarrier:
		return a.deleteBarrier(op.DeleteBarrier)
	case *fsmpb.Command_ArriveAtBarrier:
		return a.arriveAtBarrier(op.ArriveAtBarrier)
	case *fsmpb.Command_ExpireTimers:
		return a.expireTimers(op.ExpireTimers)
	case nil:
		if cmd.GetSkippable() {
			return nil
		}
		// An op this server does not know decodes as an unknown field:
		// applying only the grants of such a command would diverge from
		// the servers that know the op.
		if (len(cmd.GetGrants()) > 0 || len(cmd.GetLockGrants()) > 0) && len(cmd.ProtoReflect().GetUnknown()) == 0 {
			return nil // a command made only of grants
		}
		return errf(CodeInternal, "command carries no op this server knows (not skippable)")
	}
	return errf(CodeInternal, "unknown op %T", cmd.GetOp())
}

// ---- namespaces ----

func (a *applier) createNamespace(c *fsmpb.CreateNamespace) *Error {
	if err := firstErr(ValidateName("name", c.Name), ValidateDescription("description", c.Description),
		ValidateMetadata("metadata", c.Metadata)); err != nil {
		return err
	}
	s := a.s
	if _, ok := s.getNS(c.Name); ok {
		return errf(CodeAlreadyExists, "namespace %q already exists", c.Name)
	}
	if int64(s.namespaces.Len()) >= s.limits.MaxNamespaces {
		return errf(CodeResourceExhausted, "namespaces: limit of %d reached", s.limits.MaxNamespaces)
	}
	if err := s.overQuota(); err != nil {
		return err
	}
	ns := nsRec{name: c.Name, desc: c.Description, md: copyMetadata(c.Metadata), version: 1, createdAt: a.now, updatedAt: a.now}
	s.namespaces.Set(ns)
	a.res.Namespace = ns.view()
	return nil
}

func (a *applier) updateNamespace(c *fsmpb.UpdateNamespace) *Error {
	if err := firstErr(ValidateName("namespace_name", c.Name), ValidateDescription("description", c.Description),
		ValidateMetadata("metadata", c.Metadata), ValidateExpectedVersion("expected_version", c.ExpectedVersion)); err != nil {
		return err
	}
	ns, ok := a.s.getNS(c.Name)
	if !ok {
		return namespaceNotFound(c.Name)
	}
	if ns.version != c.ExpectedVersion {
		return versionMismatch()
	}
	oldSize := nsSize(ns)
	ns.desc, ns.md, ns.version, ns.updatedAt = c.Description, copyMetadata(c.Metadata), ns.version+1, a.now
	if err := a.s.growsOverQuota(oldSize, nsSize(ns)); err != nil {
		return err
	}
	a.s.namespaces.Set(ns)
	a.res.Namespace = ns.view()
	return nil
}

func (a *applier) deleteNamespace(c *fsmpb.DeleteNamespace) *Error {
	if err := firstErr(ValidateName("namespace_name", c.Name)); err != nil {
		return err
	}
	s := a.s
	ns, ok := s.getNS(c.Name)
	if !ok {
		return nil // deleting a missing namespace is not an error
	}
	var leases []leaseRec
	s.leases.Ascend(leaseRec{leaseIdent: &leaseIdent{ns: ns.name}}, func(l leaseRec) bool {
		if l.ns != ns.name {
			return false
		}
		leases = append(leases, l)
		return true
	})
	for _, l := range leases {
		s.removeLease(l, a.now)
		a.res.RemovedLeases = append(a.res.RemovedLeases, LeaseKey{l.ns, l.id})
	}
	var sems []semRec
	s.semaphores.Ascend(semRec{ns: ns.name}, func(x semRec) bool {
		if x.ns != ns.name {
			return false
		}
		sems = append(sems, x)
		return true
	})
	for _, x := range sems {
		a.dropSemaphore(x)
	}
	a.dropNamespaceWaits(ns.name)
	s.namespaces.Delete(ns)
	a.res.RemovedNamespace = ns.name
	return nil
}

// ---- semaphores ----

func (a *applier) createSemaphore(c *fsmpb.CreateSemaphore) *Error {
	s := a.s
	if err := firstErr(ValidateName("namespace_name", c.NamespaceName), ValidateName("semaphore_name", c.Name),
		ValidateDescription("description", c.Description), ValidatePermits("permits", c.Permits, s.limits.MaxPermits),
		ValidateMetadata("metadata", c.Metadata)); err != nil {
		return err
	}
	ns, ok := s.getNS(c.NamespaceName)
	if !ok {
		return namespaceNotFound(c.NamespaceName)
	}
	if _, ok := s.getSem(c.NamespaceName, c.Name); ok {
		return errf(CodeAlreadyExists, "semaphore %q already exists in namespace %q", c.Name, c.NamespaceName)
	}
	if ns.semCount >= s.limits.MaxSemaphoresPerNamespace {
		return errf(CodeResourceExhausted, "semaphores: limit of %d per namespace reached in %q", s.limits.MaxSemaphoresPerNamespace, ns.name)
	}
	if err := s.overQuota(); err != nil {
		return err
	}
	sem := semRec{ns: ns.name, name: c.Name, desc: c.Description, md: copyMetadata(c.Metadata), permits: c.Permits,
		version: 1, createdAt: a.now, updatedAt: a.now, lastActivity: a.now}
	s.putSem(sem)
	ns.semCount++
	s.namespaces.Set(ns)
	a.res.Semaphore = s.semView(sem, a.now)
	return nil
}

func (a *applier) updateSemaphore(c *fsmpb.UpdateSemaphore) *Error {
	s := a.s
	if err := firstErr(ValidateName("namespace_name", c.NamespaceName), ValidateName("semaphore_name", c.Name),
		ValidateDescription("description", c.Description), ValidatePermits("permits", c.Permits, s.limits.MaxPermits),
		ValidateMetadata("metadata", c.Metadata), ValidateExpectedVersion("expected_version", c.ExpectedVersion)); err != nil {
		return err
	}
	if _, ok := s.getNS(c.NamespaceName); !ok {
		return namespaceNotFound(c.NamespaceName)
	}
	sem, ok := s.getSem(c.NamespaceName, c.Name)
	if !ok {
		return semaphoreNotFound(c.NamespaceName, c.Name)
	}
	if sem.version != c.ExpectedVersion {
		return versionMismatch()
	}
	// Compared with the stored holds, which still count holders whose
	// lease expired but was not reaped: the conservative choice keeps
	// active_holds <= permits true of the stored state too.
	if c.Permits < sem.holds {
		return errf(CodeFailedPrecondition, "permits: %d is below the current active_holds %d", c.Permits, sem.holds)
	}
	raised := c.Permits > sem.permits
	oldSize := semSize(sem)
	sem.desc, sem.md, sem.permits, sem.version, sem.updatedAt = c.Description, copyMetadata(c.Metadata), c.Permits, sem.version+1, a.now
	if err := s.growsOverQuota(oldSize, semSize(sem)); err != nil {
		return err
	}
	s.putSem(sem)
	if raised {
		a.res.Freed = append(a.res.Freed, SemKey{sem.ns, sem.name})
	}
	a.res.Semaphore = s.semView(sem, a.now)
	return nil
}

func (a *applier) deleteSemaphore(c *fsmpb.DeleteSemaphore) *Error {
	if err := firstErr(ValidateName("namespace_name", c.NamespaceName), ValidateName("semaphore_name", c.Name)); err != nil {
		return err
	}
	sem, ok := a.s.getSem(c.NamespaceName, c.Name)
	if !ok {
		return nil // deleting a missing semaphore is not an error
	}
	a.dropSemaphore(sem)
	return nil
}

func (a *applier) dropSemaphore(sem semRec) {
	s := a.s
	for _, h := range s.semaphoreHolders(sem.ns, sem.name) {
		s.dropHolder(h)
	}
	s.delSem(sem)
	if ns, ok := s.getNS(sem.ns); ok {
		ns.semCount--
		s.namespaces.Set(ns)
	}
	a.res.RemovedSemaphores = append(a.res.RemovedSemaphores, SemKey{sem.ns, sem.name})
}

// ---- acquire, release, grants ----

func validateGrant(g *fsmpb.Grant) *Error {
	return firstErr(ValidateName("namespace_name", g.GetNamespaceName()), ValidateName("semaphore_name", g.GetSemaphoreName()),
		ValidateLeaseID("lease_id", g.GetLeaseId()), ValidateWeight("weight", g.GetWeight()),
		ValidateMetadata("metadata", g.GetMetadata()))
}

// lookupGrant finds everything a grant needs, or the NotFound /
// InvalidArgument error that means it can never apply. It also returns the
// hold the lease already has on the semaphore, if any. The records it
// returns carry the stored (interned) strings, so that keys built from them
// compare by pointer in the trees.
func (a *applier) lookupGrant(g *fsmpb.Grant) (semRec, leaseRec, leaseHold, bool, *Error) {
	s := a.s
	ns, ok := s.getNS(g.NamespaceName)
	if !ok {
		return semRec{}, leaseRec{}, nil, false, namespaceNotFound(g.NamespaceName)
	}
	sem, ok := s.getSem(ns.name, g.SemaphoreName)
	if !ok {
		return semRec{}, leaseRec{}, nil, false, semaphoreNotFound(g.NamespaceName, g.SemaphoreName)
	}
	// docs/API.md, Acquire validation: a weight that can never fit
	// is InvalidArgument even when the lease is also missing.
	if g.Weight > sem.permits {
		e := invalid("weight exceeds semaphore permits (weight %d, permits %d)", g.Weight, sem.permits)
		e.Reason, e.Field = ReasonWeightExceedsPermits, "weight"
		e.Meta = map[string]string{MetaPermits: strconv.FormatInt(sem.permits, 10)}
		return semRec{}, leaseRec{}, nil, false, e
	}
	li := s.identOf(ns.name, g.LeaseId)
	if li == nil || li.liveExp <= a.now {
		return semRec{}, leaseRec{}, nil, false, notFound(ReasonLeaseNotFound, "lease %q not found or expired in namespace %q", g.LeaseId, g.NamespaceName)
	}
	var old leaseHold
	i, had := li.findHold(sem.name)
	if had {
		old = li.holds[i]
	}
	return sem, li.rec(), old, had, nil
}

// tryGrant grants g if it fits: active_holds - old weight + weight <=
// permits. ok=false with a nil error means "does not fit now". On a grant
// it updates *sem to what it stored and returns the stored hold.
func (a *applier) tryGrant(g *fsmpb.Grant, sem *semRec, l leaseRec, old leaseHold, had bool) (holderRec, bool, *Error) {
	s := a.s
	// Without overflow, however large the permits: others <= permits
	// (stored holds never exceed them), so permits - others >= 0.
	others := sem.holds
	if had {
		others -= old.weight
	}
	if g.Weight > sem.permits-others {
		return holderRec{}, false, nil
	}
	holds := others + g.Weight
	if !had && sem.holders >= s.limits.MaxHoldersPerSemaphore {
		return holderRec{}, false, errf(CodeResourceExhausted, "holders: limit of %d per semaphore reached on %q", s.limits.MaxHoldersPerSemaphore, sem.name)
	}
	// A new hold, or a changed one with more metadata, grows the state.
	if !had || holderSize(&holderRec{ns: sem.ns, sem: sem.name, md: g.Metadata}) > holderSize(old) {
		if err := s.overQuota(); err != nil {
			return holderRec{}, false, err
		}
	}
	token := a.index
	if token <= s.lastToken {
		token = s.lastToken + 1
	}
	s.lastToken = token
	var h holderRec
	if !had {
		s.holdSeq++
		h = holderRec{ns: sem.ns, sem: sem.name, seq: s.holdSeq, lease: l.leaseIdent, lockedAt: a.now}
		sem.holders++
	} else {
		h = holderRec{ns: sem.ns, sem: sem.name, seq: old.seq, lease: l.leaseIdent, lockedAt: old.lockedAt}
		if g.Weight < old.weight {
			a.res.Freed = append(a.res.Freed, SemKey{sem.ns, sem.name})
		}
	}
	h.weight, h.token, h.md = g.Weight, token, copyMetadata(g.Metadata)
	s.addHolder(h, l.leaseIdent)
	sem.holds = holds
	sem.lastActivity = a.now
	s.putSem(*sem)
	return h, true, nil
}

func (a *applier) acquire(c *fsmpb.Acquire) *Error {
	g := c.GetGrant()
	if err := validateGrant(g); err != nil {
		return err
	}
	sem, l, old, had, err := a.lookupGrant(g)
	if err != nil {
		return err
	}
	s := a.s
	var h holderRec
	// A queued call waits its turn, except that shrinking an existing hold
	// never has to wait: it only frees permits.
	if !c.Queued || (had && g.Weight <= old.weight) {
		var ok bool
		var gerr *Error
		h, ok, gerr = a.tryGrant(g, &sem, l, old, had)
		if gerr != nil {
			return gerr // a failed op changes nothing, not even last_activity_at
		}
		a.res.Acquired = ok
	}
	if !a.res.Acquired {
		// The attempt itself is activity, granted or not (tryGrant
		// records it for a grant).
		sem.lastActivity = a.now
		s.putSem(sem)
	}
	a.res.Semaphore = s.semView(sem, a.now)
	if a.res.Acquired {
		a.res.Holder = holderViewOf(h, l)
	}
	return nil
}

// grants applies the conditional grants of a command, in order. Once a
// grant on a semaphore does not apply, later ones on it are skipped, so a
// waiter never overtakes the one ahead of it.
func (a *applier) grants(gs []*fsmpb.Grant) {
	var blocked map[SemKey]bool
	a.res.Grants = make([]GrantResult, len(gs))
	for i, g := range gs {
		r := &a.res.Grants[i]
		key := SemKey{g.GetNamespaceName(), g.GetSemaphoreName()}
		if blocked[key] {
			continue
		}
		var ok, found bool
		var sem semRec
		var h holderRec
		var l leaseRec
		r.Err = validateGrant(g)
		if r.Err == nil {
			var old leaseHold
			var had bool
			sem, l, old, had, r.Err = a.lookupGrant(g)
			if r.Err == nil {
				found = true
				h, ok, r.Err = a.tryGrant(g, &sem, l, old, had)
			}
		}
		if !ok {
			if blocked == nil {
				blocked = make(map[SemKey]bool)
			}
			blocked[key] = true
			if !found {
				sem, found = a.s.getSem(key.Namespace, key.Semaphore)
			}
			if found {
				r.Semaphore = a.s.semView(sem, a.now)
			}
			continue
		}
		r.Granted = true
		r.Semaphore = a.s.semView(sem, a.now)
		r.Holder = holderViewOf(h, l)
	}
}

func (a *applier) release(c *fsmpb.Release) *Error {
	if err := firstErr(ValidateName("namespace_name", c.NamespaceName), ValidateName("semaphore_name", c.SemaphoreName),
		ValidateLeaseID("lease_id", c.LeaseId)); err != nil {
		return err
	}
	s := a.s
	ns, ok := s.getNS(c.NamespaceName)
	if !ok {
		return namespaceNotFound(c.NamespaceName)
	}
	sem, ok := s.getSem(ns.name, c.SemaphoreName)
	if !ok {
		return semaphoreNotFound(c.NamespaceName, c.SemaphoreName)
	}
	if lh, li, ok := s.holdOf(sem.ns, sem.name, c.LeaseId); ok {
		s.holders.Delete(lh)
		li.dropHold(sem.name)
		sem.holds -= lh.weight
		sem.holders--
		a.res.Freed = append(a.res.Freed, SemKey{sem.ns, sem.name})
	}
	sem.lastActivity = a.now
	s.putSem(sem)
	a.res.Semaphore = s.semView(sem, a.now)
	return nil
}

// ---- leases ----

func (a *applier) createLease(c *fsmpb.CreateLease) *Error {
	s := a.s
	lock := IsLockLeaseID(c.LeaseId)
	if err := firstErr(ValidateName("namespace_name", c.NamespaceName), ValidateAnyLeaseID("lease_id", c.LeaseId),
		ValidateProcessID("process_id", c.ProcessId), ValidateTTL("ttl_seconds", c.TtlSeconds, s.limits.MaxTTLSeconds),
		ValidateMetadata("metadata", c.Metadata)); err != nil {
		return err
	}
	if !lock && len(c.Metadata) > 0 {
		return invalidField("metadata", "a semaphore lease carries none")
	}
	ns, ok := s.getNS(c.NamespaceName)
	if !ok {
		return namespaceNotFound(c.NamespaceName)
	}
	if _, ok := s.getLease(c.NamespaceName, c.LeaseId); ok {
		return errf(CodeAlreadyExists, "lease %q already exists", c.LeaseId)
	}
	if lock && ns.lockLeaseCount >= s.limits.MaxLockLeasesPerNamespace {
		return errf(CodeResourceExhausted, "lock leases: limit of %d per namespace reached in %q", s.limits.MaxLockLeasesPerNamespace, ns.name)
	}
	if !lock && ns.leaseCount >= s.limits.MaxLeasesPerNamespace {
		return errf(CodeResourceExhausted, "leases: limit of %d per namespace reached in %q", s.limits.MaxLeasesPerNamespace, ns.name)
	}
	if err := s.overQuota(); err != nil {
		return err
	}
	// id and proc share one allocation (they live and die together), and
	// neither keeps the decoded command's strings alive.
	idProc := c.LeaseId + c.ProcessId
	l := leaseRec{leaseIdent: &leaseIdent{ns: ns.name, id: idProc[:len(c.LeaseId)], proc: idProc[len(c.LeaseId):], md: copyMetadata(c.Metadata)},
		ttl: c.TtlSeconds, createdAt: a.now, expiresAt: addTTL(a.now, c.TtlSeconds)}
	s.putLease(l)
	if lock {
		ns.lockLeaseCount++
	} else {
		ns.leaseCount++
	}
	s.namespaces.Set(ns)
	a.setLeaseResult(l)
	return nil
}

func (a *applier) refreshLease(c *fsmpb.RefreshLease) *Error {
	s := a.s
	if err := firstErr(ValidateName("namespace_name", c.NamespaceName), ValidateAnyLeaseID("lease_id", c.LeaseId),
		ValidateTTL("ttl_seconds", c.TtlSeconds, s.limits.MaxTTLSeconds)); err != nil {
		return err
	}
	if _, ok := s.getNS(c.NamespaceName); !ok {
		return namespaceNotFound(c.NamespaceName)
	}
	l, ok := s.getLease(c.NamespaceName, c.LeaseId)
	if !ok {
		return notFound(ReasonLeaseNotFound, "lease %q not found in namespace %q", c.LeaseId, c.NamespaceName)
	}
	if l.expiresAt <= a.now {
		a.reap(l)
		return notFound(ReasonLeaseNotFound, "lease %q expired at %d", c.LeaseId, l.expiresAt)
	}
	l.ttl = c.TtlSeconds
	l = s.setLeaseExpiry(l, addTTL(a.now, c.TtlSeconds))
	a.setLeaseResult(l)
	return nil
}

func (a *applier) revokeLease(c *fsmpb.RevokeLease) *Error {
	if err := firstErr(ValidateName("namespace_name", c.NamespaceName), ValidateAnyLeaseID("lease_id", c.LeaseId)); err != nil {
		return err
	}
	if _, ok := a.s.getNS(c.NamespaceName); !ok {
		return namespaceNotFound(c.NamespaceName)
	}
	l, ok := a.s.getLease(c.NamespaceName, c.LeaseId)
	if !ok {
		return notFound(ReasonLeaseNotFound, "lease %q not found in namespace %q", c.LeaseId, c.NamespaceName)
	}
	a.reap(l)
	return nil
}

// reap removes a lease with its holds and records what that freed.
func (a *applier) reap(l leaseRec) {
	for _, h := range l.lockList() {
		a.s.dropLockHold(h, a.now)
		a.res.FreedLocks = append(a.res.FreedLocks, LockKey{h.ns, h.name})
	}
	for _, sem := range a.s.removeLease(l, a.now) {
		a.res.Freed = append(a.res.Freed, SemKey{l.ns, sem})
	}
	a.res.RemovedLeases = append(a.res.RemovedLeases, LeaseKey{l.ns, l.id})
}

func (a *applier) expireLeases(c *fsmpb.ExpireLeases) *Error {
	max := int(c.GetMax())
	var due []expiryKey
	a.s.expiry.Scan(func(k expiryKey) bool {
		if k.at > a.now || (max > 0 && len(due) >= max) {
			return false
		}
		due = append(due, k)
		return true
	})
	for _, k := range due {
		if l, ok := a.s.getLease(k.ns, k.id); ok {
			a.reap(l)
		}
	}
	return nil
}

func (a *applier) extendLeases(c *fsmpb.ExtendLeases) *Error {
	if c.GetExtendNs() < 0 {
		return invalid("extend_ns: must be >= 0, got %d", c.GetExtendNs())
	}
	var live []expiryKey
	// satAdd: at now = MaxInt64, now+1 would wrap and select every lease.
	a.s.expiry.Ascend(expiryKey{at: satAdd(a.now, 1)}, func(k expiryKey) bool {
		live = append(live, k)
		return true
	})
	for _, k := range live {
		if l, ok := a.s.getLease(k.ns, k.id); ok {
			a.s.setLeaseExpiry(l, satAdd(l.expiresAt, c.GetExtendNs()))
		}
	}
	return nil
}

// ---- cluster ----

func (a *applier) setMember(c *fsmpb.SetMember) *Error {
	if c.GetNodeId() == "" {
		return invalid("node_id: must not be empty")
	}
	for _, f := range []struct{ name, v string }{{"node_id", c.NodeId}, {"raft_address", c.RaftAddress}, {"grpc_address", c.GrpcAddress}} {
		if err := validateMemberField(f.name, f.v); err != nil {
			return err
		}
	}
	a.s.members.Set(memberRec{id: c.NodeId, raftAddr: c.RaftAddress, grpcAddr: c.GrpcAddress, voter: c.Voter})
	return nil
}

func (a *applier) removeMember(c *fsmpb.RemoveMember) *Error {
	a.s.members.Delete(memberRec{id: c.GetNodeId()})
	return nil
}

func (a *applier) setLimits(c *fsmpb.SetLimits) *Error {
	l := limitsFrom(c)
	if err := l.Validate(); err != nil {
		return err.(*Error)
	}
	a.s.limits = l
	return nil
}

// ---- helpers ----

func firstErr(errs ...error) *Error {
	for _, e := range errs {
		if e != nil {
			return e.(*Error)
		}
	}
	return nil
}

const nanosPerSecond = int64(1_000_000_000)

func addTTL(now, ttlSeconds int64) int64 {
	if ttlSeconds > (1<<63-1)/nanosPerSecond {
		return 1<<63 - 1
	}
	return satAdd(now, ttlSeconds*nanosPerSecond)
}

// satAdd adds without overflowing past the largest int64.
func satAdd(a, b int64) int64 {
	if b > 0 && a > (1<<63-1)-b {
		return 1<<63 - 1
	}
	return a + b
}
