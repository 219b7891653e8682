package watch

import (
	"context"

	"google.golang.org/grpc"

	"github.com/grackle-coord/grackle/fsm"
	"github.com/grackle-coord/grackle/internal/vtcodec"
	fsmpb "github.com/grackle-coord/grackle/proto/grackle/fsm/v1"
	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
)

// Locks are watched through the same feed as semaphores: a lock's feed key
// is a SemKey whose name is "/" and the lock's name. No semaphore name
// contains '/', and no lock name starts with one, so the two never meet.

// LockKey is the feed key of a lock.
func LockKey(ns, lock string) fsm.SemKey { return fsm.SemKey{Namespace: ns, Semaphore: "/" + lock} }

// touchedLocks lists the feed keys of the locks an applied command may
// have changed.
func touchedLocks(cmd *fsmpb.Command, res *fsm.Result) []fsm.SemKey {
	var out []fsm.SemKey
	switch op := cmd.GetOp().(type) {
	case *fsmpb.Command_AcquireLock:
		g := op.AcquireLock.GetGrant()
		out = append(out, LockKey(g.GetNamespaceName(), g.GetLockName()))
	case *fsmpb.Command_ReleaseLock:
		out = append(out, LockKey(op.ReleaseLock.GetNamespaceName(), op.ReleaseLock.GetLockName()))
	case *fsmpb.Command_DeleteLock:
		out = append(out, LockKey(op.DeleteLock.GetNamespaceName(), op.DeleteLock.GetLockName()))
	}
	for _, g := range cmd.GetLockGrants() {
		out = append(out, LockKey(g.GetNamespaceName(), g.GetLockName()))
	}
	if res != nil {
		for _, k := range res.FreedLocks {
			out = append(out, LockKey(k.Namespace, k.Lock))
		}
	}
	return out
}

// leaseHolds names what a lease holds, as feed key names: a semaphore
// lease's semaphores, a lock lease's locks (a refresh moves their holders'
// expires_at).
func (fd *Feed) leaseHolds(ns, lease string) []string {
	if !fsm.IsLockLeaseID(lease) {
		return fd.fsm.LeaseHolds(ns, lease)
	}
	locks := fd.fsm.LeaseLocks(ns, lease)
	for i, l := range locks {
		locks[i] = "/" + l
	}
	return locks
}

func validateLock(ns, lock string) error {
	for _, e := range []error{fsm.ValidateName("namespace_name", ns), fsm.ValidateLockName("lock_name", lock)} {
		if e != nil {
			return statusOf(e)
		}
	}
	return nil
}

// ListLockWaiters pages through the calls waiting on one lock, on the
// leader (a follower relays it).
func (s *Service) ListLockWaiters(ctx context.Context, r *pb.ListLockWaitersRequest) (*pb.ListLockWaitersResponse, error) {
	if err := validateLock(r.NamespaceName, r.LockName); err != nil {
		return nil, err
	}
	return listWaiters(s, ctx, r.Limit, r.PaginationToken,
		func(ctx context.Context, cc grpc.ClientConnInterface, o ...grpc.CallOption) (*pb.ListLockWaitersResponse, error) {
			return pb.NewGrackleServiceClient(cc).ListLockWaiters(ctx, r, o...)
		},
		func(now int64) error {
			// The namespace must exist (as every List answers NotFound otherwise).
			_, err := s.fsm.GetLock(r.NamespaceName, r.LockName, now)
			return err
		},
		func(q Queues) []QueuedWaiter { return q.LockWaiters(r.NamespaceName, r.LockName) },
		func(page []QueuedWaiter, from int, next, prev string) *pb.ListLockWaitersResponse {
			return &pb.ListLockWaitersResponse{Waiters: s.describeLock(r.NamespaceName, page, from),
				NextPaginationToken: next, PreviousPaginationToken: prev}
		})
}

func (s *Service) describeLock(ns string, ws []QueuedWaiter, from int) []*pb.LockWaiter {
	if len(ws) == 0 {
		return nil
	}
	ids := make([]string, len(ws))
	for i, w := range ws {
		ids[i] = w.LeaseID
	}
	procs := s.fsm.LeaseProcesses(ns, ids)
	out := make([]*pb.LockWaiter, len(ws))
	for i, w := range ws {
		out[i] = &pb.LockWaiter{LeaseId: w.LeaseID, ProcessId: procs[i], Exclusive: w.Exclusive, Upgrade: w.Upgrade,
			Position: int64(from + i + 1), WaitingSince: w.Since, Deadline: w.Deadline}
	}
	return out
}

// WatchLock streams a lock's state (holders and waiters) as WatchSemaphore
// does a semaphore's.
func (s *Service) WatchLock(r *pb.WatchLockRequest, stream grpc.ServerStreamingServer[pb.WatchLockResponse]) error {
	if err := validateLock(r.NamespaceName, r.LockName); err != nil {
		return err
	}
	return serveWatch(s, stream, LockKey(r.NamespaceName, r.LockName), "lock", r.LockName,
		func(ctx context.Context) (*pb.WatchLockResponse, error) {
			return s.lockState(ctx, r.NamespaceName, r.LockName)
		},
		func(m *pb.WatchLockResponse, initial bool, changes uint64) { m.Initial, m.Changes = initial, changes },
		func(ctx context.Context, cc grpc.ClientConnInterface, o ...grpc.CallOption) (grpc.ServerStreamingClient[pb.WatchLockResponse], error) {
			return pb.NewGrackleServiceClient(cc).WatchLock(ctx, r, o...)
		})
}

func (s *Service) lockState(ctx context.Context, ns, lock string) (*pb.WatchLockResponse, error) {
	l, idx, err := s.fsm.LockView(ns, lock, s.cfg.Now())
	if err != nil {
		return nil, statusOf(err)
	}
	if len(l.Holders) > MaxListed {
		l.Holders = l.Holders[:MaxListed]
	}
	m := &pb.WatchLockResponse{RaftIndex: idx, Lock: l}
	q, err := s.queues(ctx)
	if err != nil {
		return nil, err
	}
	all := q.LockWaiters(ns, lock)
	m.WaitersCount = int64(len(all))
	if len(all) > MaxListed {
		all = all[:MaxListed]
	}
	m.Waiters = s.describeLock(ns, all, 0)
	holders, waiters := m.Lock.Holders, m.Waiters
	m.Lock.Holders, m.Waiters = nil, nil
	m.Lock.Holders, m.Waiters = fitLists(vtcodec.Size(m), holders, waiters)
	return m, nil
}
