package leader

import (
	"slices"
	"strings"

	"google.golang.org/grpc/codes"

	"github.com/grackle-coord/grackle/apierr"
	"github.com/grackle-coord/grackle/fsm"
	fsmpb "github.com/grackle-coord/grackle/proto/grackle/fsm/v1"
	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
)

// Lock waiters share the semaphore waiters' life (states, hand-off in the
// freeing command, supersede, failure on leader change: queue.go); what
// differs is whom they wait for. Rules (DESIGN.md, "Locks: conflict-FIFO"):
//
//   - A request is granted when it conflicts with no holder and with no
//     earlier request still waiting (or being granted). Two requests
//     conflict when their leases differ, one is exclusive, and one name is
//     the other or its ancestor.
//   - Requests in different trees (namespace, first path segment) never
//     conflict, so each tree has its own queue in arrival order; an
//     upgrade (a shared holder asking for exclusive) is placed at the head.
//   - A walk of a tree's queue in order grants every waiting request that
//     conflicts with no holder and with nothing it passed over; what it
//     passes over (waiting or being granted) blocks the requests behind
//     that conflict with it. That walk is the one place grants are picked.

// lockWant is what a lock waiter asks for.
type lockWant struct {
	name    string
	excl    bool
	upgrade bool // a shared holder asking for exclusive: at the head
	// covered: the lease holds the lock or an ancestor in a mode at
	// least as strong (fsm.LockCovered): it waits for no one.
	covered bool
}

// treeKey names one tree of lock names: requests in different trees never
// conflict.
type treeKey struct{ ns, root string }

func treeOf(ns, name string) treeKey {
	if i := strings.IndexByte(name, '/'); i >= 0 {
		name = name[:i]
	}
	return treeKey{ns, name}
}

func (w *waiter) tree() treeKey { return treeOf(w.key.Namespace, w.lock.name) }

func (w *waiter) lockName() string {
	if w.lock == nil {
		return ""
	}
	return w.lock.name
}

// lockView is what the lock queues read of the state machine (the FSM).
type lockView interface {
	LockConflict(ns, name, lease string, excl bool, changes []fsm.LockChange, names bool) (pb.ContentionReason, []string)
}

func (q *queues) removeLockLocked(w *waiter) {
	k := w.tree()
	ws := q.byTree[k]
	for i, x := range ws {
		if x == w {
			ws = append(ws[:i:i], ws[i+1:]...)
			break
		}
	}
	if len(ws) == 0 {
		delete(q.byTree, k)
	} else {
		q.byTree[k] = ws
	}
}

// mustWaitFor says whether a waiter in state st blocks the conflicting
// requests behind it: every state but Proposed (a call merely in flight,
// as for semaphores) and Done.
func mustWaitFor(st State) bool { return st == Queued || st == Waiting || st == Granting }

func (q *queues) enqueueLockLocked(w *waiter) (behind bool, err error) {
	k := w.tree()
	// A retried acquire of the same lease on the same lock replaces an
	// older call that waits, but not one whose grant may be in Raft.
	for _, o := range q.byTree[k] {
		if o.leaseID == w.leaseID && o.lock.name == w.lock.name && (o.state == Queued || o.state == Waiting) {
			q.finishLocked(o, Outcome{Err: newError(codes.Aborted, apierr.Superseded, "superseded by a newer AcquireLock with the same lease_id")})
		}
	}
	ws := q.byTree[k]
	n := 0
	for _, o := range ws {
		if o.lock.name == w.lock.name {
			n++
		}
		// Two upgrades on related locks (the same, or one below the
		// other) each wait for the other's shared hold: refused at once.
		if w.lock.upgrade && o.lock.upgrade && o.state != Done &&
			fsm.LocksConflict(o.leaseID, o.lock.name, true, w.leaseID, w.lock.name, true) {
			return false, newError(codes.FailedPrecondition, apierr.UpgradeConflict,
				"lock %q: another holder's upgrade to exclusive already waits on %q; two upgrades would wait for each other (release the shared hold and acquire exclusive instead)", w.lock.name, o.lock.name)
		}
	}
	if n >= q.maxWaiters {
		return false, queueFull("waiters: limit of %d queued waiters per lock reached on %q (--max-waiters)", q.maxWaiters, w.lock.name)
	}
	if proc, full := q.processFullLocked(k.ns, ws, w, func(o *waiter) bool { return o.lock.name == w.lock.name }); full {
		return false, queueFull("waiters: process %q already has %d waiters on lock %q (--max-waiters-per-process)", proc, q.maxPerProcess, w.lock.name)
	}
	if !w.lock.upgrade && !w.lock.covered {
		for _, o := range ws {
			if mustWaitFor(o.state) && fsm.LocksConflict(o.leaseID, o.lock.name, o.lock.excl, w.leaseID, w.lock.name, w.lock.excl) {
				behind = true
				break
			}
		}
	}
	q.seq++
	w.seq = q.seq
	w.state = Proposed
	if behind {
		w.state = Queued
		q.obs.WaiterEvent(WaiterEvent{Kind: WaiterQueued, Key: w.key, Lock: w.lock.name, LeaseID: w.leaseID})
	}
	if w.lock.upgrade {
		// Behind no one: after the upgrades already at the head.
		i := 0
		for i < len(ws) && ws[i].lock.upgrade {
			i++
		}
		ws = append(ws, nil)
		copy(ws[i+1:], ws[i:])
		ws[i] = w
	} else {
		ws = append(ws, w)
	}
	q.byTree[k] = ws
	return behind, nil
}

// passed indexes the requests a walk of a tree's queue has passed over
// (still waiting, or being granted): they block the conflicting requests
// behind them. A check costs O(depth of the name) plus the asking lease's
// own entries, not the length of the queue.
type passed struct {
	at      map[string][]*waiter   // by exact name
	exclAt  map[string]int         // exclusive entries by exact name
	below   map[string][2]int      // entries strictly below a name: exclusive, shared
	byLease map[string][]*lockWant // each lease's entries
	rootX   map[string]struct{}    // leases with an exclusive entry on the tree's root
	root    string
}

func newPassed(root string) *passed {
	return &passed{at: map[string][]*waiter{}, exclAt: map[string]int{}, below: map[string][2]int{},
		byLease: map[string][]*lockWant{}, rootX: map[string]struct{}{}, root: root}
}

func (p *passed) add(w *waiter) {
	n := w.lock.name
	p.at[n] = append(p.at[n], w)
	if w.lock.excl {
		p.exclAt[n]++
		if n == p.root {
			p.rootX[w.leaseID] = struct{}{}
		}
	}
	for i := 0; i < len(n); i++ {
		if n[i] == '/' {
			c := p.below[n[:i]]
			if w.lock.excl {
				c[0]++
			} else {
				c[1]++
			}
			p.below[n[:i]] = c
		}
	}
	p.byLease[w.leaseID] = append(p.byLease[w.leaseID], w.lock)
}

// blocksAll: two leases have exclusive requests on the root passed over,
// so every later request conflicts with one of them.
func (p *passed) blocksAll() bool { return len(p.rootX) >= 2 }

// blocks says whether anything passed over conflicts with w.
func (p *passed) blocks(w *waiter) bool {
	atBlocks := func(name string) bool {
		if !w.lock.excl && p.exclAt[name] == 0 {
			return false
		}
		for _, o := range p.at[name] {
			if o.leaseID != w.leaseID && (w.lock.excl || o.lock.excl) {
				return true
			}
		}
		return false
	}
	n := w.lock.name
	if atBlocks(n) {
		return true
	}
	for i := 0; i < len(n); i++ {
		if n[i] == '/' && atBlocks(n[:i]) {
			return true
		}
	}
	// Below n: the counts, less the asking lease's own entries there.
	c := p.below[n]
	for _, o := range p.byLease[w.leaseID] {
		if fsm.IsAncestor(n, o.name) {
			if o.excl {
				c[0]--
			} else {
				c[1]--
			}
		}
	}
	return c[0] > 0 || (w.lock.excl && c[1] > 0)
}

// collectTreeLocked walks a tree's queue in order and marks Granting every
// waiting request that conflicts with no holder (after the pending
// changes of the command it will ride in) and with no request it passed
// over. It returns them in queue order.
func (q *queues) collectTreeLocked(k treeKey, changes []fsm.LockChange) []*waiter {
	ws := q.byTree[k]
	if len(ws) == 0 || q.ended || q.locks == nil {
		return nil
	}
	p := newPassed(k.root)
	var out []*waiter
	for _, w := range ws {
		if p.blocksAll() {
			break
		}
		switch w.state {
		case Queued, Granting:
			p.add(w)
			continue
		case Waiting:
		default:
			continue // Proposed: in flight, not a waiter for those behind
		}
		if p.blocks(w) {
			p.add(w)
			continue
		}
		if r, _ := q.locks.LockConflict(k.ns, w.lock.name, w.leaseID, w.lock.excl, changes, false); r != pb.ContentionReason_CONTENTION_REASON_UNSPECIFIED {
			p.add(w)
			continue
		}
		w.state, w.grantedAt = Granting, nowMono()
		out = append(out, w)
		p.add(w)
	}
	return out
}

func lockGrantsFor(ws []*waiter) []*fsmpb.LockGrant {
	gs := make([]*fsmpb.LockGrant, len(ws))
	for i, w := range ws {
		gs[i] = &fsmpb.LockGrant{NamespaceName: w.key.Namespace, LockName: w.lock.name, LeaseId: w.leaseID, Exclusive: w.lock.excl, Metadata: w.md}
	}
	return gs
}

// attachLocks collects the lock waiters of the trees a command changes
// that are free once its changes are made, and adds their grants to it
// (the hand-off rides in the entry that makes room). The caller settles
// them with the result.
func (q *queues) attachLocks(cmd *fsmpb.Command, ns string, changes []fsm.LockChange) []*waiter {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.byTree) == 0 {
		return nil // nobody waits for any lock: the common, uncontended case
	}
	var seen []treeKey
	var out []*waiter
	for _, c := range changes {
		k := treeOf(ns, c.Name)
		if slices.Contains(seen, k) {
			continue
		}
		seen = append(seen, k)
		out = append(out, q.collectTreeLocked(k, changes)...)
	}
	cmd.LockGrants = append(cmd.LockGrants, lockGrantsFor(out)...)
	return out
}

// pumpTreeLocked proposes grants for the waiters of a tree that are free
// now (a command of its own).
func (q *queues) pumpTreeLocked(k treeKey) {
	ws := q.collectTreeLocked(k, nil)
	if len(ws) == 0 {
		return
	}
	if !q.proposeGrants(&fsmpb.Command{LockGrants: lockGrantsFor(ws)}, ws) {
		for _, w := range ws {
			w.state = Waiting
		}
	}
}

// settleLockLocked ends a lock waiter with the outcome of its grant.
func (q *queues) settleLockLocked(w *waiter, gr fsm.LockGrantResult) {
	switch {
	case gr.Granted:
		q.finishLocked(w, Outcome{Granted: true, Lock: gr.Lock, LockHolder: gr.Holder})
	case gr.Err != nil:
		q.finishLocked(w, Outcome{Err: gr.Err})
	case w.abandoned:
		q.finishLocked(w, Outcome{Lock: gr.Lock})
	}
}

// observeLocksLocked ends lock waiters whose lease or namespace went away
// (NotFound) and pumps the trees whose holds a result dropped or made
// shared, or whose waiters it ended.
func (q *queues) observeLocksLocked(res *fsm.Result) {
	if len(q.byTree) == 0 {
		return
	}
	pump := map[treeKey]bool{}
	for _, l := range res.FreedLocks {
		pump[treeOf(l.Namespace, l.Lock)] = true
	}
	if len(res.RemovedLeases) > 0 || res.RemovedNamespace != "" {
		gone := map[fsm.LeaseKey]bool{}
		for _, l := range res.RemovedLeases {
			gone[l] = true
		}
		for k, ws := range q.byTree {
			for _, w := range append([]*waiter(nil), ws...) {
				var why, reason string
				switch {
				case res.RemovedNamespace != "" && k.ns == res.RemovedNamespace:
					why, reason = "namespace "+k.ns+" was deleted", apierr.NamespaceNotFound
				case gone[fsm.LeaseKey{Namespace: k.ns, LeaseID: w.leaseID}]:
					why, reason = "lock lease "+w.leaseID+" expired or was revoked", apierr.LeaseNotFound
				default:
					continue
				}
				if w.state == Proposed || w.state == Granting {
					continue // its pending command fails on the missing record
				}
				q.finishLocked(w, Outcome{Err: newError(codes.NotFound, reason, "%s while waiting", why)})
				pump[k] = true
			}
		}
	}
	for k := range pump {
		if _, ok := q.byTree[k]; ok {
			q.pumpTreeLocked(k)
		}
	}
}

// lockQueueBlockers names the requests still queued ahead of a request
// (seq) that conflict with it: the QUEUE reason of a call not granted.
func (q *queues) lockQueueBlockers(ns, name, lease string, excl bool, seq uint64) []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	var out []string
	for _, o := range q.byTree[treeOf(ns, name)] {
		if o.seq >= seq && !o.lock.upgrade {
			continue
		}
		if mustWaitFor(o.state) && fsm.LocksConflict(o.leaseID, o.lock.name, o.lock.excl, lease, name, excl) && len(out) < 50 {
			out = append(out, o.lock.name)
		}
	}
	return out
}

// LockWaiterInfo is a snapshot of one lock waiter (listing, watches).
type LockWaiterInfo struct {
	WaiterInfo
	Exclusive, Upgrade bool
}

// lockSnapshot lists the calls on one lock, in queue order.
func (q *queues) lockSnapshot(ns, name string) []LockWaiterInfo {
	q.mu.Lock()
	defer q.mu.Unlock()
	var out []LockWaiterInfo
	for _, w := range q.byTree[treeOf(ns, name)] {
		if w.lock.name != name {
			continue
		}
		out = append(out, LockWaiterInfo{WaiterInfo: w.info(), Exclusive: w.lock.excl, Upgrade: w.lock.upgrade})
	}
	return out
}

// lockCounts returns the number of calls that must wait, per lock.
func (q *queues) lockCounts() map[fsm.LockKey]int {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := map[fsm.LockKey]int{}
	for k, ws := range q.byTree {
		for _, w := range ws {
			if w.state != Proposed {
				out[fsm.LockKey{Namespace: k.ns, Lock: w.lock.name}]++
			}
		}
	}
	return out
}
