package bench

import (
	"context"
	"time"
)

// Backend is a coordination service the workloads drive: Grackle through
// its gRPC API (NewGrackle), or a recipe on another system (bench/etcd
// holds one for etcd, bench/zk for ZooKeeper, each in its own module). Methods are called from many
// goroutines at once.
type Backend interface {
	// Setup prepares a run: everything it creates is named after runID
	// and removed by Cleanup.
	Setup(ctx context.Context, runID string) error
	Cleanup(ctx context.Context) error
	// CreateSemaphore creates a semaphore of the run.
	CreateSemaphore(ctx context.Context, name string, permits int64) error
	// NewSession creates a lease with the given TTL for worker w (which
	// picks the worker's connection), refreshed at TTL/3 when keepAlive.
	NewSession(ctx context.Context, w int, ttl time.Duration, keepAlive bool) (Session, error)
	// Read is one linearizable read of a semaphore's state, from worker w.
	Read(ctx context.Context, w int, semaphore string) error
	// CommitIndex is the leader's commit position (Raft index), from which
	// the commits per operation are counted.
	CommitIndex(ctx context.Context) (uint64, error)
	// NewLockSession creates a lease that owns exclusive locks (Grackle: a
	// lock lease; etcd: a concurrency.Session) with the given TTL for
	// worker w, kept alive at TTL/3 until Close.
	NewLockSession(ctx context.Context, w int, ttl time.Duration) (LockSession, error)

	// Wait groups (waits.go), from worker w's connection. CompleteJobs is
	// idempotent per job id; WaitWaitGroup returns once counter distinct
	// jobs of the group are complete.
	CreateWaitGroup(ctx context.Context, w int, name string, counter int64) error
	CompleteJobs(ctx context.Context, w int, name string, jobs []string) error
	WaitWaitGroup(ctx context.Context, w int, name string) error
	DeleteWaitGroup(ctx context.Context, w int, name string) error
	// NewBarrier creates a barrier of parties processes, played by
	// workers 0..parties-1.
	NewBarrier(ctx context.Context, name string, parties int) (Barrier, error)
}

// Session is one lease and the acquisitions made under it.
type Session interface {
	// Acquire takes weight permits, waiting up to timeout for them (0:
	// not at all; not getting them is an error).
	Acquire(ctx context.Context, semaphore string, weight int64, timeout time.Duration) (Grant, error)
	// Release gives the permits back and returns the release's commit
	// position.
	Release(ctx context.Context, semaphore string) (uint64, error)
	// Touch is one replicated write that changes nothing a workload reads
	// (it measures one commit's latency).
	Touch(ctx context.Context) error
	// Close revokes the lease (and so releases what it holds).
	Close(ctx context.Context) error
}

// LockSession is one lease and the exclusive locks taken under it. Locks
// need no create call: a name is a lock.
type LockSession interface {
	// Lock takes the exclusive lock, waiting up to timeout for it (0: not
	// at all; not getting it is an error).
	Lock(ctx context.Context, name string, timeout time.Duration) (Grant, error)
	// Unlock releases it; releasing a lock the session does not hold is an
	// error where the backend can tell.
	Unlock(ctx context.Context, name string) error
	// Touch is one replicated write that changes nothing a workload reads.
	Touch(ctx context.Context) error
	// Close revokes the lease (and so releases what it holds).
	Close(ctx context.Context) error
}

// Grant describes an acquisition.
type Grant struct {
	// Based orders the grants of a semaphore or lock: it increases with
	// every grant (Grackle: the fencing token; etcd: the revision the grant
	// was decided at; ZooKeeper: the sequence number of the grant's node). The handoff workload pairs each grant with the release
	// of the grant before it.
	Based uint64
	// Expires is when the holder's lease expires unless refreshed.
	Expires time.Time
}
