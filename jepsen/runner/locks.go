package runner

import (
	"context"
	"fmt"
	"math/rand"
	"strings"
	"time"

	"github.com/grackle-coord/grackle/jepsen/history"
	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
)

// The lock workload (docs/API.md, Locks): processes that each own a lock
// lease and take and give back locks on a few nested names, both modes,
// non-blocking and short blocking, upgrading and downgrading what they
// hold; half of them keep a long lease (refreshed; the final reads find
// their holds), the others take 1-3 s leases that they sometimes let run
// out while "working", as the fenced semaphore processes do. One more
// process reads the locks' queues and states (ListLockWaiters is what
// tells the conflict-FIFO checker that a request waits). Every call goes
// to a node drawn at random, like the other workloads'.

// lockNames are the workload's locks: "r" covers the others, "r/a" covers
// "r/a/x", "r/b" is a sibling.
var lockNames = []string{"r", "r/a", "r/a/x", "r/b"}

// lockListPrefixes are the prefixes ListLocks reads ("": every lock).
var lockListPrefixes = []string{"", "r", "r/a"}

const lockPageSize = 100

func (w *world) createLockLease(ctx context.Context, rng *rand.Rand, proc int, ttl int64) string {
	o := w.call(ctx, rng, history.Op{Process: proc, Kind: history.LockCreateLease, Namespace: ns, TTL: ttl}, 3*time.Second,
		func(ctx context.Context, cl pb.GrackleServiceClient, o *history.Op) error {
			r, err := cl.CreateLockLease(ctx, &pb.CreateLockLeaseRequest{NamespaceName: ns, ProcessId: fmt.Sprintf("p%d", o.Process), TtlSeconds: ttl})
			if err == nil {
				o.Lease, o.ExpiresAt = r.Lease.LeaseId, r.Lease.ExpiresAt
			}
			return err
		})
	if o.Outcome != history.OK {
		return ""
	}
	return o.Lease
}

func (w *world) refreshLockLease(ctx context.Context, rng *rand.Rand, proc int, lease string, ttl int64) *history.Op {
	return w.call(ctx, rng, history.Op{Process: proc, Kind: history.LockRefresh, Namespace: ns, Lease: lease, TTL: ttl}, 3*time.Second,
		func(ctx context.Context, cl pb.GrackleServiceClient, o *history.Op) error {
			r, err := cl.RefreshLockLease(ctx, &pb.RefreshLockLeaseRequest{NamespaceName: ns, LeaseId: lease, TtlSeconds: ttl})
			if err == nil {
				o.ExpiresAt = r.Lease.ExpiresAt
			}
			return err
		})
}

func (w *world) revokeLockLease(ctx context.Context, rng *rand.Rand, proc int, lease string) *history.Op {
	return w.call(ctx, rng, history.Op{Process: proc, Kind: history.LockRevoke, Namespace: ns, Lease: lease}, 3*time.Second,
		func(ctx context.Context, cl pb.GrackleServiceClient, o *history.Op) error {
			_, err := cl.RevokeLockLease(ctx, &pb.RevokeLockLeaseRequest{NamespaceName: ns, LeaseId: lease})
			return err
		})
}

func (w *world) acquireLock(ctx context.Context, rng *rand.Rand, proc int, lock, lease string, excl bool, timeout int64) *history.Op {
	return w.call(ctx, rng, history.Op{Process: proc, Kind: history.LockAcquire, Namespace: ns, Lock: lock, Lease: lease, Exclusive: excl, Timeout: timeout},
		time.Duration(timeout)*time.Second+2*time.Second,
		func(ctx context.Context, cl pb.GrackleServiceClient, o *history.Op) error {
			r, err := cl.AcquireLock(ctx, &pb.AcquireLockRequest{NamespaceName: ns, LockName: lock, LeaseId: lease, Exclusive: excl, TimeoutSeconds: timeout})
			if err == nil {
				o.AcquireOutcome = strings.TrimPrefix(r.Outcome.String(), "ACQUIRE_OUTCOME_")
				if r.Holder != nil {
					o.Token, o.ExpiresAt = r.Holder.FencingToken, r.Holder.ExpiresAt
				}
				if r.Outcome != pb.AcquireOutcome_ACQUIRE_OUTCOME_ACQUIRED {
					o.Contention = strings.TrimPrefix(r.Reason.String(), "CONTENTION_REASON_")
					o.Blocking = r.BlockingLocks
				}
			}
			return err
		})
}

func (w *world) releaseLock(ctx context.Context, rng *rand.Rand, proc int, lock, lease string) *history.Op {
	return w.call(ctx, rng, history.Op{Process: proc, Kind: history.LockRelease, Namespace: ns, Lock: lock, Lease: lease}, 3*time.Second,
		func(ctx context.Context, cl pb.GrackleServiceClient, o *history.Op) error {
			r, err := cl.ReleaseLock(ctx, &pb.ReleaseLockRequest{NamespaceName: ns, LockName: lock, LeaseId: lease})
			if err == nil {
				o.Released = r.Released
			}
			return err
		})
}

// lockView is a Lock as the history keeps it.
func lockView(l *pb.Lock) history.LockView {
	v := history.LockView{Name: l.GetName(), State: strings.TrimPrefix(l.GetState().String(), "LOCK_STATE_")}
	for _, h := range l.GetHolders() {
		v.Holders = append(v.Holders, history.LockHolder{Lease: h.LeaseId, Exclusive: h.Exclusive, Token: h.FencingToken})
	}
	return v
}

func (w *world) getLock(ctx context.Context, rng *rand.Rand, proc int, lock string) *history.Op {
	return w.call(ctx, rng, history.Op{Process: proc, Kind: history.GetLock, Namespace: ns, Lock: lock}, 3*time.Second,
		func(ctx context.Context, cl pb.GrackleServiceClient, o *history.Op) error {
			r, err := cl.GetLock(ctx, &pb.GetLockRequest{NamespaceName: ns, LockName: lock})
			if err == nil {
				v := lockView(r.Lock)
				v.Name = lock // an unheld lock may come back without its name
				o.Locks = []history.LockView{v}
			}
			return err
		})
}

func (w *world) listLocks(ctx context.Context, rng *rand.Rand, proc int, prefix string) *history.Op {
	return w.call(ctx, rng, history.Op{Process: proc, Kind: history.ListLocks, Namespace: ns, Lock: prefix}, 3*time.Second,
		func(ctx context.Context, cl pb.GrackleServiceClient, o *history.Op) error {
			r, err := cl.ListLocks(ctx, &pb.ListLocksRequest{NamespaceName: ns, Prefix: prefix, Limit: lockPageSize})
			if err == nil {
				for _, l := range r.Locks {
					o.Locks = append(o.Locks, lockView(l))
				}
				o.Truncated = r.NextPaginationToken != ""
			}
			return err
		})
}

func (w *world) lockWaiters(ctx context.Context, rng *rand.Rand, proc int, lock string) *history.Op {
	return w.call(ctx, rng, history.Op{Process: proc, Kind: history.LockWaiters, Namespace: ns, Lock: lock}, 3*time.Second,
		func(ctx context.Context, cl pb.GrackleServiceClient, o *history.Op) error {
			r, err := cl.ListLockWaiters(ctx, &pb.ListLockWaitersRequest{NamespaceName: ns, LockName: lock, Limit: lockPageSize})
			if err == nil {
				for _, x := range r.Waiters {
					o.Waiters = append(o.Waiters, history.LockWaiter{Lease: x.LeaseId, Exclusive: x.Exclusive, Position: x.Position, Upgrade: x.Upgrade})
				}
			}
			return err
		})
}

// locker is a process of the lock workload: one lock lease at a time
// (long: 60 s, refreshed; else 1-3 s, sometimes left to run out while it
// "works"), and what it believes it holds, to ask for upgrades and
// downgrades and to release. It holds at most two locks at once, so
// that most of its requests are new ones, the kind conflict-FIFO orders.
func (w *world) locker(ctx context.Context, proc int, seed int64) {
	rng := rand.New(rand.NewSource(seed))
	long := proc%2 == 0
	gen := 0
	id := func() int { return proc + 1000*gen }
	var lease string
	var ttl int64
	held := map[string]bool{} // name -> exclusive
	lastRefresh := time.Now()
	for ctx.Err() == nil {
		if lease == "" {
			ttl = 1 + rng.Int63n(3)
			if long {
				ttl = 60 // refreshed every 20 s; an abandoned one frees its locks within a minute
			}
			if lease = w.createLockLease(ctx, rng, id(), ttl); lease == "" {
				gen++ // its op may still be pending: a new process takes over
				time.Sleep(100 * time.Millisecond)
				continue
			}
			held = map[string]bool{}
			lastRefresh = time.Now()
		}
		name := lockNames[rng.Intn(len(lockNames))]
		var o *history.Op
		x := rng.Intn(100)
		if x < 45 && len(held) >= 2 {
			x = 45
		}
		switch {
		case long && time.Since(lastRefresh) > 20*time.Second:
			if o = w.refreshLockLease(ctx, rng, id(), lease, ttl); o.Outcome == history.OK {
				lastRefresh = time.Now()
			}
		case x < 45:
			excl := rng.Intn(2) == 0
			if h, ok := held[name]; ok && rng.Intn(2) == 0 {
				excl = !h // an upgrade or a downgrade
			}
			timeout := int64(0)
			if rng.Intn(2) == 0 {
				timeout = 1
			}
			o = w.acquireLock(ctx, rng, id(), name, lease, excl, timeout)
			// An acquire whose outcome is unknown may have been granted:
			// count it held, so that the process releases it in time (a
			// release of what the lease does not hold changes nothing).
			// Forgotten, a long lease would keep it until the run's end.
			if o.Outcome == history.Info || (o.Outcome == history.OK && o.AcquireOutcome == history.Acquired) {
				held[name] = excl
			}
		case x < 75:
			for _, n := range lockNames { // in order: the seed decides
				if _, ok := held[n]; ok && rng.Intn(2) == 0 {
					name = n
				}
			}
			if o = w.releaseLock(ctx, rng, id(), name, lease); o.Outcome == history.OK {
				delete(held, name)
			}
		case x < 80:
			o = w.getLock(ctx, rng, id(), name)
		case x < 85:
			o = w.lockWaiters(ctx, rng, id(), name)
		case x < 92:
			// Work for a while; a short lease's holder a third of the time
			// longer than the TTL, without refreshing: the lease runs out
			// under it, and it starts again with a new one.
			o = w.getLock(ctx, rng, id(), name)
			work := time.Duration(rng.Intn(300)) * time.Millisecond
			abandon := !long && rng.Intn(3) == 0
			if abandon {
				work = time.Duration(ttl)*time.Second + 500*time.Millisecond
			}
			select {
			case <-ctx.Done():
			case <-time.After(work):
			}
			if abandon {
				lease = ""
			}
		case x < 98:
			if o = w.refreshLockLease(ctx, rng, id(), lease, ttl); o.Outcome == history.OK {
				lastRefresh = time.Now()
			}
		default:
			// Only a revoke that applied ends the lease: one that failed
			// (certainly not applied) leaves it alive and holding, and one
			// whose outcome is unknown may have too; the process keeps it
			// (a later call answers NotFound if it is gone). Forgotten, a
			// live long lease would hold its locks for its whole TTL.
			if o = w.revokeLockLease(ctx, rng, id(), lease); o.Outcome == history.OK {
				lease = ""
			}
		}
		if o.Outcome == history.Info {
			gen++
		}
		if o.Outcome == history.Fail && o.Code == "NotFound" && o.Lease != "" {
			lease = "" // expired (or revoked): a new lease
		}
		time.Sleep(time.Duration(rng.Intn(20)) * time.Millisecond)
	}
}

// lockObserver reads the locks' queues, mostly, and their states, from
// random nodes.
func (w *world) lockObserver(ctx context.Context, proc int, seed int64) {
	rng := rand.New(rand.NewSource(seed))
	for ctx.Err() == nil {
		name := lockNames[rng.Intn(len(lockNames))]
		switch x := rng.Intn(100); {
		case x < 60:
			w.lockWaiters(ctx, rng, proc, name)
		case x < 85:
			w.getLock(ctx, rng, proc, name)
		default:
			w.listLocks(ctx, rng, proc, lockListPrefixes[rng.Intn(len(lockListPrefixes))])
		}
		time.Sleep(time.Duration(10+rng.Intn(20)) * time.Millisecond)
	}
}

// finalLocks reads every lock, and the whole list, after healing.
func (w *world) finalLocks(ctx context.Context, rng *rand.Rand, deadline time.Time) {
	for _, name := range append(append([]string(nil), lockNames...), "") {
		for time.Now().Before(deadline) {
			var o *history.Op
			if name == "" {
				o = w.listLocks(ctx, rng, 9999, "")
			} else {
				o = w.getLock(ctx, rng, 9999, name)
			}
			if o.Outcome == history.OK {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}
