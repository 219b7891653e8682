package client

import (
	"context"
	"sync"
	"time"

	"google.golang.org/grpc"

	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
)

// LockSession is one lock lease (an ll_ id), refreshed in the background
// every TTL/3 until the session is closed or the lease is lost, exactly as
// a Session keeps a semaphore lease: same refresh loop, same conservative
// expiry clock, same Done, Err, Close and Orphan. Holds acquired through
// the session's Locks live as long as the lease.
//
// It is a type of its own, not a Session, because the server keeps the two
// kinds of lease apart: a semaphore call with a lock lease is NotFound
// (reason LEASE_NOT_FOUND), which a Semaphore handle would take for a lost
// lease and end its session. With two types that mistake does not compile.
type LockSession struct {
	s *Session // kind lockLeases; its Semaphore method is never used

	mu    sync.Mutex
	locks map[string]*Lock
}

// NewLockSession creates a lock lease in namespace for processID with the
// given TTL (rounded up to whole seconds; <= 0 means DefaultSessionTTL)
// and starts refreshing it. The namespace must exist. Options: WithLease
// resumes an existing lock lease instead (as for NewSession), and
// WithLeaseMetadata sets the new lease's metadata.
func (c *Client) NewLockSession(ctx context.Context, namespace, processID string, ttl time.Duration, opts ...SessionOption) (*LockSession, error) {
	s, err := c.newSession(ctx, lockLeases, namespace, processID, ttl, opts)
	if err != nil {
		return nil, err
	}
	return &LockSession{s: s, locks: map[string]*Lock{}}, nil
}

// LeaseID is the session's lock lease id (ll_...).
func (ls *LockSession) LeaseID() string { return ls.s.leaseID }

// Namespace is the namespace of the session's lease.
func (ls *LockSession) Namespace() string { return ls.s.ns }

// ProcessID is the process id the lease was created with.
func (ls *LockSession) ProcessID() string { return ls.s.processID }

// TTL is the lease's TTL.
func (ls *LockSession) TTL() time.Duration { return ls.s.ttl }

// Client is the client the session was created with.
func (ls *LockSession) Client() *Client { return ls.s.c }

// Done is closed when the session ends: its lease was lost, it was
// closed, or its client was closed. Err says which.
func (ls *LockSession) Done() <-chan struct{} { return ls.s.Done() }

// Context returns a context that is cancelled when the session ends (see
// Done); context.Cause of it is Err.
func (ls *LockSession) Context() context.Context { return ls.s.Context() }

// Err is nil while the session lives; then an error matching ErrLeaseLost,
// ErrSessionClosed, ErrSessionOrphaned or ErrClientClosed.
func (ls *LockSession) Err() error { return ls.s.Err() }

// ExpiresAt is when the lease expires by the client's conservative clock
// unless it is refreshed before.
func (ls *LockSession) ExpiresAt() time.Time { return ls.s.ExpiresAt() }

// Close stops refreshing the lease and revokes it, which releases every
// lock it holds (as Session.Close).
func (ls *LockSession) Close(ctx context.Context) error { return ls.s.Close(ctx) }

// Orphan stops refreshing the lease without revoking it (as
// Session.Orphan): its locks stay held until the lease expires or another
// process resumes it with WithLease.
func (ls *LockSession) Orphan() { ls.s.Orphan() }

// Lock returns the handle of lock name (a path such as "orders/eu/42", in
// the session's namespace) under the session's lease. The same name always
// gives the same handle.
func (ls *LockSession) Lock(name string) *Lock {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	l, ok := ls.locks[name]
	if !ok {
		l = &Lock{sess: ls, name: name, lock: make(chan struct{}, 1)}
		if ls.s.resumed {
			l.held = heldUnknown // the lease may hold it from before
		}
		ls.locks[name] = l
	}
	return l
}

var lockLeases = &leaseKind{
	name:        "lock",
	hasMetadata: true,
	create: func(ctx context.Context, api pb.GrackleServiceClient, ns, processID string, secs int64, md map[string]string, o []grpc.CallOption) (string, error) {
		r, err := api.CreateLockLease(ctx, &pb.CreateLockLeaseRequest{NamespaceName: ns, ProcessId: processID, TtlSeconds: secs, Metadata: md}, o...)
		return r.GetLease().GetLeaseId(), err
	},
	get: func(ctx context.Context, c *Client, ns, leaseID string) (string, int64, error) {
		r, err := c.GetLockLease(ctx, &pb.GetLockLeaseRequest{NamespaceName: ns, LeaseId: leaseID})
		return r.GetLease().GetProcessId(), r.GetLease().GetTtlSeconds(), err
	},
	refresh: func(ctx context.Context, api pb.GrackleServiceClient, ns, leaseID string, secs int64, o []grpc.CallOption) error {
		_, err := api.RefreshLockLease(ctx, &pb.RefreshLockLeaseRequest{NamespaceName: ns, LeaseId: leaseID, TtlSeconds: secs}, o...)
		return err
	},
	revoke: func(ctx context.Context, c *Client, ns, leaseID string) error {
		_, err := c.RevokeLockLease(ctx, &pb.RevokeLockLeaseRequest{NamespaceName: ns, LeaseId: leaseID})
		return err
	},
}
