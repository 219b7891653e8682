package client

import (
	"context"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/status"

	"github.com/grackle-coord/grackle/apierr"
	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
)

// DefaultSessionTTL is the lease TTL of NewSession when ttl <= 0.
const DefaultSessionTTL = 60 * time.Second

// Session is one semaphore lease, refreshed in the background every TTL/3
// until the session is closed or the lease is lost. Holds acquired through
// the session's Semaphores live as long as the lease.
//
// The lease counts as lost when a refresh answers NotFound, or when the
// lease's expiry passes by the client's own clock without a successful
// refresh. That clock is conservative: the expiry is measured from the
// moment the last successful refresh (or the creation) was sent, which is
// never later than the moment the leader stamped it.
type Session struct {
	c         *Client
	kind      *leaseKind // semaphore lease (ls_) or lock lease (ll_)
	ns        string
	processID string
	ttl       time.Duration // whole seconds
	leaseID   string
	resumed   bool // resumed with WithLease: holds from before may exist

	ctx    context.Context // cancelled when the session ends
	cancel context.CancelCauseFunc

	loopCtx  context.Context // stops the refresh loop (child of the client's life)
	loopStop context.CancelFunc
	loopDone chan struct{}

	mu       sync.Mutex
	err      error     // why the session ended (nil while alive)
	gone     bool      // the server said the lease no longer exists
	lastSent time.Time // send time of the last successful create/refresh
	expiry   time.Time // lastSent + ttl (minus a drift margin)
	sems     map[string]*Semaphore

	closeOnce sync.Once
	closeErr  error
}

// SessionOption adjusts NewSession.
type SessionOption func(*sessionOptions)

type sessionOptions struct {
	leaseID  string
	metadata map[string]string
}

// WithLease makes NewSession resume the existing lease leaseID instead of
// creating one (as etcd's concurrency.WithLease does): after a restart, a
// process that kept its lease id (in a file, in its job record) takes the
// lease over, with the holds it has, and keeps it alive. NewSession checks
// that the lease exists (an error matching ErrLeaseLost if not), refreshes
// it at once, and then every TTL/3 like any session. The processID
// argument is ignored (the lease keeps its own); ttl <= 0 keeps the
// lease's ttl_seconds.
//
// The handles of a resumed session do not know what the lease already
// holds: Acquire again (a re-acquire is idempotent) to adopt a hold, or
// Release it.
//
// NewLockSession takes it too, with a lock lease id (ll_...).
func WithLease(leaseID string) SessionOption {
	return func(o *sessionOptions) { o.leaseID = leaseID }
}

// WithLeaseMetadata sets the metadata of the lease NewLockSession creates
// (lock leases carry metadata; semaphore leases do not, and NewSession
// refuses it). A resumed lease keeps its own.
func WithLeaseMetadata(md map[string]string) SessionOption {
	return func(o *sessionOptions) { o.metadata = md }
}

// NewSession creates a lease in namespace for processID with the given TTL
// (rounded up to whole seconds; <= 0 means DefaultSessionTTL) and starts
// refreshing it. The namespace must exist. With WithLease it resumes an
// existing lease instead.
func (c *Client) NewSession(ctx context.Context, namespace, processID string, ttl time.Duration, opts ...SessionOption) (*Session, error) {
	return c.newSession(ctx, semaphoreLeases, namespace, processID, ttl, opts)
}

// newSession is NewSession for a lease of either kind.
func (c *Client) newSession(ctx context.Context, kind *leaseKind, namespace, processID string, ttl time.Duration, opts []SessionOption) (*Session, error) {
	var o sessionOptions
	for _, f := range opts {
		f(&o)
	}
	if o.metadata != nil && !kind.hasMetadata {
		return nil, fmt.Errorf("grackle: %s leases carry no metadata (WithLeaseMetadata is for lock sessions)", kind.name)
	}
	if o.leaseID != "" {
		return c.resumeSession(ctx, kind, namespace, o.leaseID, ttl)
	}
	if ttl <= 0 {
		ttl = DefaultSessionTTL
	}
	secs := int64((ttl + time.Second - 1) / time.Second)
	s := &Session{c: c, kind: kind, ns: namespace, processID: processID, ttl: time.Duration(secs) * time.Second,
		loopDone: make(chan struct{}), sems: map[string]*Semaphore{}}
	var sent time.Time
	var leaseID string
	err := c.invoke(ctx, retryIfNotSent, nil, func(ctx context.Context, cc grpc.ClientConnInterface, o2 []grpc.CallOption) error {
		sent = time.Now()
		id, err := kind.create(ctx, pb.NewGrackleServiceClient(cc), namespace, processID, secs, o.metadata, o2)
		leaseID = id
		return err
	})
	if err != nil {
		return nil, err
	}
	s.leaseID = leaseID
	if err := c.startSession(s, sent); err != nil {
		return nil, err
	}
	return s, nil
}

// resumeSession is newSession with WithLease.
func (c *Client) resumeSession(ctx context.Context, kind *leaseKind, namespace, leaseID string, ttl time.Duration) (*Session, error) {
	processID, secs, err := kind.get(ctx, c, namespace, leaseID)
	if apierr.LeaseGone(err) {
		return nil, fmt.Errorf("%w: cannot resume lease %s: %w", ErrLeaseLost, leaseID, err)
	}
	if err != nil {
		return nil, err
	}
	if ttl > 0 {
		secs = int64((ttl + time.Second - 1) / time.Second)
	}
	s := &Session{c: c, kind: kind, ns: namespace, processID: processID, ttl: time.Duration(secs) * time.Second,
		leaseID: leaseID, resumed: true, loopDone: make(chan struct{}), sems: map[string]*Semaphore{}}
	// Refresh at once: the client's conservative clock needs the send time
	// of a successful refresh.
	var sent time.Time
	err = c.invoke(ctx, retryAlways, nil, func(ctx context.Context, cc grpc.ClientConnInterface, o []grpc.CallOption) error {
		sent = time.Now()
		return kind.refresh(ctx, pb.NewGrackleServiceClient(cc), namespace, leaseID, secs, o)
	})
	if apierr.LeaseGone(err) {
		return nil, fmt.Errorf("%w: cannot resume lease %s: %w", ErrLeaseLost, leaseID, err)
	}
	if err != nil {
		return nil, err
	}
	if err := c.startSession(s, sent); err != nil {
		return nil, err
	}
	return s, nil
}

// startSession registers s (whose lease was created or refreshed at sent)
// and starts its refresh loop.
func (c *Client) startSession(s *Session, sent time.Time) error {
	s.setRefreshed(sent)
	s.ctx, s.cancel = context.WithCancelCause(context.Background())
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return ErrClientClosed
	}
	c.sessions[s] = struct{}{}
	s.loopCtx, s.loopStop = context.WithCancel(c.life)
	c.mu.Unlock()
	go s.run()
	return nil
}

// LeaseID is the session's lease id.
func (s *Session) LeaseID() string { return s.leaseID }

// Namespace is the namespace of the session's lease.
func (s *Session) Namespace() string { return s.ns }

// ProcessID is the process id the lease was created with.
func (s *Session) ProcessID() string { return s.processID }

// TTL is the lease's TTL.
func (s *Session) TTL() time.Duration { return s.ttl }

// Client is the client the session was created with.
func (s *Session) Client() *Client { return s.c }

// Done is closed when the session ends: its lease was lost, it was
// closed, or its client was closed. Err says which.
func (s *Session) Done() <-chan struct{} { return s.ctx.Done() }

// Context returns a context that is cancelled when the session ends (see
// Done); context.Cause of it is Err.
func (s *Session) Context() context.Context { return s.ctx }

// Err is nil while the session lives; then an error matching ErrLeaseLost,
// ErrSessionClosed or ErrClientClosed.
func (s *Session) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// ExpiresAt is when the lease expires by the client's conservative clock
// unless it is refreshed before.
func (s *Session) ExpiresAt() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.expiry
}

func (s *Session) setRefreshed(sent time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lastSent = sent
	// Allow 1% of clock-rate drift between this host and the leader.
	s.expiry = sent.Add(s.ttl - s.ttl/100)
}

// end ends the session with err (the first reason wins).
func (s *Session) end(err error) {
	s.mu.Lock()
	if s.err == nil {
		s.err = err
	}
	err = s.err
	s.mu.Unlock()
	s.cancel(err)
	s.c.mu.Lock()
	delete(s.c.sessions, s)
	s.c.mu.Unlock()
}

// endGone ends the session after the server answered NotFound for its
// lease.
func (s *Session) endGone(notFound error) {
	s.mu.Lock()
	s.gone = true
	s.mu.Unlock()
	s.end(fmt.Errorf("%w: %v", ErrLeaseLost, status.Convert(notFound).Message()))
}

func (s *Session) stopLoop() {
	s.loopStop()
	<-s.loopDone
}

// run refreshes the lease every TTL/3 (after a failure: with backoff)
// until it is stopped or the lease is lost.
func (s *Session) run() {
	defer close(s.loopDone)
	failures := 0
	for {
		s.mu.Lock()
		next, exp := s.lastSent.Add(s.ttl/3), s.expiry
		s.mu.Unlock()
		if failures > 0 {
			next = time.Now().Add(s.c.backoff(failures - 1))
		}
		if next.After(exp) {
			next = exp
		}
		if sleepCtx(s.loopCtx, time.Until(next)) != nil {
			if s.c.isClosed() {
				s.end(ErrClientClosed)
			}
			return
		}
		if !time.Now().Before(exp) {
			s.end(fmt.Errorf("%w: lease %s not refreshed before it expired at %v (by the client's clock)", ErrLeaseLost, s.leaseID, exp.Format(time.RFC3339Nano)))
			return
		}
		ctx, cancel := context.WithDeadline(s.loopCtx, exp)
		var sent time.Time
		err := s.c.invoke(ctx, retryAlways, nil, func(ctx context.Context, cc grpc.ClientConnInterface, o []grpc.CallOption) error {
			sent = time.Now()
			return s.kind.refresh(ctx, pb.NewGrackleServiceClient(cc), s.ns, s.leaseID, int64(s.ttl/time.Second), o)
		})
		cancel()
		switch {
		case err == nil:
			s.setRefreshed(sent)
			failures = 0
		case s.loopCtx.Err() != nil:
			if s.c.isClosed() {
				s.end(ErrClientClosed)
			}
			return
		case apierr.LeaseGone(err):
			s.endGone(err)
			return
		default:
			// Unavailable for longer than a retry budget, or the expiry
			// passed (the next turn ends the session), or some other error:
			// keep trying while the lease may live.
			failures++
		}
	}
}

// Close stops refreshing the lease and revokes it, which releases every
// hold it has. Done is closed before the revoke is sent. Closing a session
// whose lease is already gone is not an error (no revoke is sent when the
// server already said the lease does not exist; after a loss by the
// client's clock alone, the revoke is still tried); a second Close returns
// what the first returned.
func (s *Session) Close(ctx context.Context) error {
	s.closeOnce.Do(func() {
		s.stopLoop()
		s.end(ErrSessionClosed)
		s.mu.Lock()
		gone := s.gone
		s.mu.Unlock()
		if gone {
			return // nothing left to revoke
		}
		if s.c.isClosed() {
			s.closeErr = ErrClientClosed
			return
		}
		err := s.kind.revoke(ctx, s.c, s.ns, s.leaseID)
		if apierr.LeaseGone(err) {
			err = nil
		}
		s.closeErr = err
	})
	return s.closeErr
}

// Orphan stops refreshing the lease without revoking it, and ends the
// session with ErrSessionOrphaned (as etcd's Session.Orphan): the lease and
// its holds stay until they expire, or until another process resumes the
// lease with WithLease and keeps it alive (a hand-over). Close after Orphan
// does nothing.
func (s *Session) Orphan() {
	s.closeOnce.Do(func() {
		s.stopLoop()
		s.end(ErrSessionOrphaned)
	})
}

// Semaphore returns the handle of semaphore name (in the session's
// namespace) under the session's lease. The same name always gives the
// same handle.
func (s *Session) Semaphore(name string) *Semaphore {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.sems[name]
	if !ok {
		m = &Semaphore{sess: s, name: name, lock: make(chan struct{}, 1)}
		if s.resumed {
			m.held = -1 // unknown: the lease may hold it from before
		}
		s.sems[name] = m
	}
	return m
}

// leaseKind is what differs between a semaphore lease and a lock lease:
// the four lease RPCs a session makes. The session machinery (refresh
// every TTL/3, the client's conservative expiry clock, loss, Close and
// Orphan) is the same for both.
type leaseKind struct {
	name        string // "semaphore" or "lock", for messages
	hasMetadata bool   // the create call takes lease metadata
	// create makes a lease and returns its id (one attempt on api).
	create func(ctx context.Context, api pb.GrackleServiceClient, ns, processID string, secs int64, md map[string]string, o []grpc.CallOption) (string, error)
	// get reads a lease's process id and ttl_seconds (with retries).
	get func(ctx context.Context, c *Client, ns, leaseID string) (processID string, secs int64, err error)
	// refresh is one RefreshXLease attempt on api.
	refresh func(ctx context.Context, api pb.GrackleServiceClient, ns, leaseID string, secs int64, o []grpc.CallOption) error
	// revoke revokes a lease (with retries).
	revoke func(ctx context.Context, c *Client, ns, leaseID string) error
}

var semaphoreLeases = &leaseKind{
	name: "semaphore",
	create: func(ctx context.Context, api pb.GrackleServiceClient, ns, processID string, secs int64, _ map[string]string, o []grpc.CallOption) (string, error) {
		r, err := api.CreateSemaphoreLease(ctx, &pb.CreateSemaphoreLeaseRequest{NamespaceName: ns, ProcessId: processID, TtlSeconds: secs}, o...)
		return r.GetLease().GetLeaseId(), err
	},
	get: func(ctx context.Context, c *Client, ns, leaseID string) (string, int64, error) {
		r, err := c.GetSemaphoreLease(ctx, &pb.GetSemaphoreLeaseRequest{NamespaceName: ns, LeaseId: leaseID})
		return r.GetLease().GetProcessId(), r.GetLease().GetTtlSeconds(), err
	},
	refresh: func(ctx context.Context, api pb.GrackleServiceClient, ns, leaseID string, secs int64, o []grpc.CallOption) error {
		_, err := api.RefreshSemaphoreLease(ctx, &pb.RefreshSemaphoreLeaseRequest{NamespaceName: ns, LeaseId: leaseID, TtlSeconds: secs}, o...)
		return err
	},
	revoke: func(ctx context.Context, c *Client, ns, leaseID string) error {
		_, err := c.RevokeSemaphoreLease(ctx, &pb.RevokeSemaphoreLeaseRequest{NamespaceName: ns, LeaseId: leaseID})
		return err
	},
}
