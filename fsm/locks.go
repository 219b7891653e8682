package fsm

import (
	"strings"

	"github.com/grackle-coord/grackle/internal/fault"
	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
)

// Locks (DESIGN.md, "Locks"). A lock exists while it has holders: its
// record (locks table) and its holds (lockHolds table, in acquisition
// order) are stored; everything else is derived and rebuilt on restore:
//
//   - lockIdx: a held lock's record and holders (point lookups);
//   - lockBelow: for every proper ancestor of a held lock, how many
//     exclusive and shared holds lie strictly below it, so that deciding a
//     conflict costs O(depth of the name), never a scan of the locks;
//   - each lease's holds, by name (leaseIdent.locks).

// LockKey names a lock.
type LockKey struct{ Namespace, Lock string }

type lockRec struct {
	ns, name     string
	lockedAt     int64 // when it went from unlocked to locked
	lastActivity int64 // the last grant or release on it
}

// lockHold is one lease's hold on one lock. Like holderRec, a stored
// lockHold is never changed: a change stores a new one.
type lockHold struct {
	ns, name string
	seq      uint64 // acquisition order (the holders' sequence)
	lease    *leaseIdent
	excl     bool
	lockedAt int64
	token    uint64
	md       map[string]string
}

// lockLive is the live index entry of a held lock.
type lockLive struct {
	rec     lockRec
	holders []*lockHold // in acquisition order
	excl    int         // exclusive holders (0 or 1: an exclusive hold has no peer)
}

// lockCounts counts holds strictly below a name.
type lockCounts struct{ excl, shared int64 }

func lessLock(a, b lockRec) bool {
	if c := strings.Compare(a.ns, b.ns); c != 0 {
		return c < 0
	}
	return a.name < b.name
}

func lessLockHold(a, b *lockHold) bool {
	if c := strings.Compare(a.ns, b.ns); c != 0 {
		return c < 0
	}
	if c := strings.Compare(a.name, b.name); c != 0 {
		return c < 0
	}
	return a.seq < b.seq
}

// ancestors calls fn with every proper ancestor of name, nearest last
// ("a", "a/b" for "a/b/c").
func ancestors(name string, fn func(string)) {
	for i := 0; i < len(name); i++ {
		if name[i] == '/' {
			fn(name[:i])
		}
	}
}

// IsAncestor says whether lock a is a proper ancestor of lock b.
func IsAncestor(a, b string) bool {
	return len(b) > len(a) && b[len(a)] == '/' && b[:len(a)] == a
}

// LocksConflict says whether two requests conflict (API.md, AcquireLock
// rule 1): different leases, at least one exclusive, and one name equal
// to or an ancestor of the other.
func LocksConflict(leaseA, nameA string, exclA bool, leaseB, nameB string, exclB bool) bool {
	if leaseA == leaseB || (!exclA && !exclB) {
		return false
	}
	return nameA == nameB || IsAncestor(nameA, nameB) || IsAncestor(nameB, nameA)
}

// ---- the lease's side ----

// A lease's lock holds are a small B-tree by name, made on its first
// hold: a lease may hold many locks (up to the namespace's limit), and a
// sorted slice would make each insert O(holds).

func lessLockByName(a, b *lockHold) bool { return a.name < b.name }

// lockOf finds the lease's hold on a lock (nil: none).
func (li *leaseIdent) lockOf(name string) *lockHold {
	if li.locks == nil {
		return nil
	}
	h, _ := li.locks.Get(&lockHold{name: name})
	return h
}

func (li *leaseIdent) setLock(h *lockHold) {
	if li.locks == nil {
		li.locks = newTree(8, lessLockByName)
	}
	li.locks.Set(h)
}

func (li *leaseIdent) dropLock(name string) {
	if li.locks == nil {
		return
	}
	// An emptied tree is kept: a lease that takes and releases one lock
	// in a loop does not allocate a tree each time.
	li.locks.Delete(&lockHold{name: name})
}

// lockCount is the number of locks the lease holds.
func (li *leaseIdent) lockCount() int {
	if li.locks == nil {
		return 0
	}
	return li.locks.Len()
}

// lockList lists the lease's holds by name.
func (li *leaseIdent) lockList() []*lockHold {
	if li.locks == nil {
		return nil
	}
	out := make([]*lockHold, 0, li.locks.Len())
	li.locks.Scan(func(h *lockHold) bool {
		out = append(out, h)
		return true
	})
	return out
}

// locksBelow counts the lease's own holds strictly below name.
func (li *leaseIdent) locksBelow(name string) (excl, shared int64) {
	if li.locks == nil {
		return 0, 0
	}
	p := name + "/"
	li.locks.Ascend(&lockHold{name: p}, func(h *lockHold) bool {
		if !strings.HasPrefix(h.name, p) {
			return false
		}
		if h.excl {
			excl++
		} else {
			shared++
		}
		return true
	})
	return excl, shared
}

// ---- storing and dropping holds ----

func (s *state) lockLiveOf(ns, name string) *lockLive { return s.lockIdx[LockKey{ns, name}] }

// countBelow adds d to the counts of every proper ancestor of h's name.
func (s *state) countBelow(h *lockHold, d int64) {
	ancestors(h.name, func(a string) {
		k := LockKey{h.ns, a}
		c := s.lockBelow[k]
		if h.excl {
			c.excl += d
		} else {
			c.shared += d
		}
		if c == (lockCounts{}) {
			delete(s.lockBelow, k)
		} else {
			s.lockBelow[k] = c
		}
	})
}

// putLockHold stores a new hold, or replaces the lease's hold on the same
// lock (same seq), with every index. rec is the lock's record to store.
func (s *state) putLockHold(h *lockHold, rec lockRec) {
	k := LockKey{h.ns, h.name}
	live := s.lockIdx[k]
	if live == nil {
		live = &lockLive{}
		s.lockIdx[k] = live
		if ns, ok := s.getNS(h.ns); ok {
			ns.lockCount++
			s.namespaces.Set(ns)
		}
	}
	live.rec = rec
	s.locks.Set(rec)
	replaced := false
	for i, o := range live.holders {
		if o.lease == h.lease {
			s.countBelow(o, -1)
			if o.excl {
				live.excl--
			}
			live.holders[i] = h
			replaced = true
			break
		}
	}
	if !replaced {
		live.holders = append(live.holders, h)
	}
	if h.excl {
		live.excl++
	}
	s.countBelow(h, 1)
	s.lockHolds.Set(h)
	h.lease.setLock(h)
}

// dropLockHold removes one hold with its indexes; a lock left with no
// holder is removed. now, when the lock stays held, is its activity.
func (s *state) dropLockHold(h *lockHold, now int64) {
	k := LockKey{h.ns, h.name}
	s.lockHolds.Delete(h)
	h.lease.dropLock(h.name)
	s.countBelow(h, -1)
	live := s.lockIdx[k]
	if live == nil {
		return
	}
	for i, o := range live.holders {
		if o == h {
			live.holders = append(live.holders[:i:i], live.holders[i+1:]...)
			break
		}
	}
	if h.excl {
		live.excl--
	}
	if len(live.holders) == 0 {
		delete(s.lockIdx, k)
		s.locks.Delete(live.rec)
		if ns, ok := s.getNS(h.ns); ok {
			ns.lockCount--
			s.namespaces.Set(ns)
		}
		return
	}
	live.rec.lastActivity = now
	s.locks.Set(live.rec)
}

// ---- conflicts ----

// LockChange is a change to one hold that a command about to be proposed
// will make (the leader's view of what a release, revoke, downgrade or
// delete frees): the hold is gone, or (Gone false) becomes shared.
type LockChange struct {
	Name, LeaseID string
	Gone          bool
}

// maxBlocking bounds blocking_locks (API.md: up to 50).
const maxBlocking = 50

// maxBlockingScan bounds the holds a search for blocking descendants
// reads, so that naming them never costs a scan of the namespace.
const maxBlockingScan = 4096

type lockAsk struct {
	ns, name string
	lease    string
	li       *leaseIdent // the asking lease (nil: none, e.g. a hypothetical)
	excl     bool
}

// pending indexes a command's changes by (lock, lease), so that looking
// a holder up costs one map read however many holds the command drops
// (a DeleteLock of a lock with thousands of shared holders).
type pending map[[2]string]LockChange

func pendingOf(changes []LockChange) pending {
	if len(changes) == 0 {
		return nil
	}
	m := make(pending, len(changes))
	for _, c := range changes {
		m[[2]string{c.Name, c.LeaseID}] = c
	}
	return m
}

// changed applies the pending changes to a holder: gone, and whether it is
// exclusive after them.
func changed(h *lockHold, changes pending) (gone, excl bool) {
	c, ok := changes[[2]string{h.name, h.lease.id}]
	if !ok {
		return false, h.excl
	}
	return c.Gone, false
}

// blocks says whether holder h blocks the request.
func (q lockAsk) blockedBy(h *lockHold, changes pending) bool {
	if h.lease.id == q.lease {
		return false
	}
	gone, excl := changed(h, changes)
	if gone {
		return false
	}
	if faultLockConflictGrant && !q.excl && h.name == q.name {
		return false // broken on purpose (faultinject builds only)
	}
	return q.excl || excl
}

// faultLockConflictGrant: the build-time fault "lock-conflict-grant"
// grants a shared request on a lock another lease holds exclusively.
var faultLockConflictGrant = fault.On("lock-conflict-grant")

// conflict finds what blocks q among the holders, after changes: the
// first reason in the order PEER, ANCESTOR, DESCENDANT, and, when names
// is true, up to 50 blocking lock names. O(depth) for the decision.
func (s *state) conflict(q lockAsk, list []LockChange, names bool) (pb.ContentionReason, []string) {
	changes := pendingOf(list)
	reason := pb.ContentionReason_CONTENTION_REASON_UNSPECIFIED
	var blocking []string
	note := func(r pb.ContentionReason, name string) bool {
		if reason == pb.ContentionReason_CONTENTION_REASON_UNSPECIFIED || r < reason {
			reason = r
		}
		if names && len(blocking) < maxBlocking {
			blocking = append(blocking, name)
		}
		return names
	}
	heldBlocks := func(name string) bool {
		live := s.lockLiveOf(q.ns, name)
		if live == nil {
			return false
		}
		if !q.excl && live.excl == 0 && len(changes) == 0 && !faultLockConflictGrant {
			return false // shared on shared: no need to look at each holder
		}
		for _, h := range live.holders {
			if q.blockedBy(h, changes) {
				return true
			}
			if !q.excl && live.excl == 0 {
				return false
			}
		}
		return false
	}
	if heldBlocks(q.name) && !note(pb.ContentionReason_CONTENTION_REASON_PEER, q.name) {
		return reason, nil
	}
	stop := false
	ancestors(q.name, func(a string) {
		if !stop && heldBlocks(a) && !note(pb.ContentionReason_CONTENTION_REASON_ANCESTOR, a) {
			stop = true
		}
	})
	if stop {
		return reason, nil
	}
	// Descendants: the counts, less the asking lease's own holds and the
	// holds the pending changes drop or make shared.
	c := s.lockBelow[LockKey{q.ns, q.name}]
	if q.li != nil {
		e, sh := q.li.locksBelow(q.name)
		c.excl, c.shared = c.excl-e, c.shared-sh
	}
	for _, ch := range list {
		if ch.LeaseID == q.lease || !IsAncestor(q.name, ch.Name) {
			continue
		}
		h := s.lockHoldOf(q.ns, ch.Name, ch.LeaseID)
		if h == nil {
			continue
		}
		if h.excl {
			c.excl--
			if !ch.Gone {
				c.shared++
			}
		} else if ch.Gone {
			c.shared--
		}
	}
	if c.excl > 0 || (q.excl && c.shared > 0) {
		if reason == pb.ContentionReason_CONTENTION_REASON_UNSPECIFIED {
			reason = pb.ContentionReason_CONTENTION_REASON_DESCENDANT
		}
		if !names {
			return reason, nil
		}
		p := q.name + "/"
		scanned := 0
		last := ""
		s.lockHolds.Ascend(&lockHold{ns: q.ns, name: p}, func(h *lockHold) bool {
			if h.ns != q.ns || !strings.HasPrefix(h.name, p) || len(blocking) >= maxBlocking || scanned >= maxBlockingScan {
				return false
			}
			scanned++
			if h.name != last && q.blockedBy(h, changes) {
				blocking = append(blocking, h.name)
				last = h.name
			}
			return true
		})
	}
	return reason, blocking
}

// lockHoldOf finds the hold a lease has on a lock (nil: none).
func (s *state) lockHoldOf(ns, name, leaseID string) *lockHold {
	li := s.identOf(ns, leaseID)
	if li == nil {
		return nil
	}
	return li.lockOf(name)
}

// ---- views ----

func lockLeaseView(l leaseRec) *pb.LockLease {
	return &pb.LockLease{LeaseId: l.id, ProcessId: l.proc, TtlSeconds: l.ttl, CreatedAt: l.createdAt, ExpiresAt: l.expiresAt,
		Metadata: copyMetadata(l.md)}
}

func lockHolderView(h *lockHold) *pb.LockHolder {
	return &pb.LockHolder{LeaseId: h.lease.id, ProcessId: h.lease.proc, Exclusive: h.excl, LockedAt: h.lockedAt,
		ExpiresAt: h.lease.liveExp, FencingToken: h.token, Metadata: copyMetadata(h.md)}
}

// lockView is a lock's state at now: holders whose lease expired (even if
// not reaped yet) are not shown.
func (s *state) lockView(ns, name string, now int64) *pb.Lock {
	out := &pb.Lock{Name: name, State: pb.LockState_LOCK_STATE_UNLOCKED}
	live := s.lockLiveOf(ns, name)
	if live == nil {
		return out
	}
	for _, h := range live.holders {
		if h.lease.liveExp <= now {
			continue
		}
		out.Holders = append(out.Holders, lockHolderView(h))
		if h.excl {
			out.State = pb.LockState_LOCK_STATE_EXCLUSIVE_LOCKED
		} else if out.State == pb.LockState_LOCK_STATE_UNLOCKED {
			out.State = pb.LockState_LOCK_STATE_SHARED_LOCKED
		}
	}
	if len(out.Holders) > 0 {
		out.LockedAt, out.LastActivityAt = live.rec.lockedAt, live.rec.lastActivity
	}
	return out
}
