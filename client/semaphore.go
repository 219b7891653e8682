package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grackle-coord/grackle/apierr"
	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
)

// Semaphore is one semaphore under one session's lease: the lease is the
// holder. Get it with Session.Semaphore.
//
// A lease holds a semaphore at most once: acquiring again while holding
// changes the hold's weight (docs/API.md, Re-acquire), and Release drops the
// whole hold. Calls on one handle are serialized.
type Semaphore struct {
	sess *Session
	name string
	lock chan struct{} // 1-buffered; serializes Acquire/TryAcquire/Release
	held int64         // weight held as far as this handle knows (0: none, -1: unknown); guarded by lock
}

// Grant is a successful acquisition.
type Grant struct {
	Namespace string
	Semaphore string
	LeaseID   string
	// Weight is the number of permits the hold takes.
	Weight int64
	// FencingToken strictly increases with every grant across the cluster;
	// pass it to the guarded resource so it can reject stale holders.
	FencingToken uint64
	// LockedAt is when the hold was first granted (a re-acquire keeps it);
	// ExpiresAt is the lease's expiry at grant time. Both are the leader's
	// clock.
	LockedAt  time.Time
	ExpiresAt time.Time
	// Holder and State are the server's answer: the hold and the
	// semaphore's state right after the grant.
	Holder *pb.SemaphoreHolder
	State  *pb.Semaphore
}

// AcquireOption adjusts one acquire.
type AcquireOption func(*acquireOptions)

type acquireOptions struct {
	metadata map[string]string
}

// WithMetadata sets the hold's metadata.
func WithMetadata(md map[string]string) AcquireOption {
	return func(o *acquireOptions) { o.metadata = md }
}

// Name is the semaphore's name.
func (m *Semaphore) Name() string { return m.name }

// Session is the session whose lease holds the semaphore.
func (m *Semaphore) Session() *Session { return m.sess }

// Acquire takes weight permits, waiting until they are granted, the
// context ends, or the session ends.
//
//   - The wait runs on the leader in server-side calls of at most
//     Config.MaxAcquireTimeout each; their timeout_seconds is what remains
//     of ctx's deadline, in whole seconds, less a margin for the answer to
//     arrive (at least 1 s: the context then cuts the last call short).
//     Without a deadline Acquire waits until granted. Each new call joins
//     the queue's tail again.
//   - When leadership changes, the leader ends the waiting call with
//     Unavailable and Acquire re-acquires on the new leader with what
//     remains of the deadline; that is safe because a re-acquire under the
//     same lease is idempotent.
//   - The deadline passing ends it with an *AcquireError matching ErrTimeout
//     (and context.DeadlineExceeded when the context cut a call short).
//   - The session's lease being lost ends it with an error matching
//     ErrLeaseLost (a closed session: ErrSessionClosed).
//   - weight above the semaphore's permits fails at once with an error
//     matching ErrWeightExceedsPermits.
//
// If the context ends while a call is in flight, the call's outcome is
// unknown; if the lease did not hold the semaphore before, Acquire then
// releases it (bounded by 2 s past the context) so that a grant nobody
// will use is not kept. Other failures are returned as gRPC status errors.
func (m *Semaphore) Acquire(ctx context.Context, weight int64, opts ...AcquireOption) (*Grant, error) {
	return m.observe(weight, true, func() (*Grant, error) { return m.acquire(ctx, weight, true, opts) })
}

// TryAcquire takes weight permits only if they are granted at once
// (timeout_seconds 0): enough free permits and nobody queued before it.
// Otherwise it returns an *AcquireError matching ErrWouldBlock.
func (m *Semaphore) TryAcquire(ctx context.Context, weight int64, opts ...AcquireOption) (*Grant, error) {
	return m.observe(weight, false, func() (*Grant, error) { return m.acquire(ctx, weight, false, opts) })
}

// Release drops the session's hold of the semaphore (all of its weight).
// Releasing what is not held is not an error.
func (m *Semaphore) Release(ctx context.Context) error {
	if err := m.lockCtx(ctx); err != nil {
		return err
	}
	defer m.unlock()
	return m.releaseLocked(ctx)
}

func (m *Semaphore) releaseLocked(ctx context.Context) error {
	s := m.sess
	_, err := s.c.ReleaseSemaphore(ctx, &pb.ReleaseSemaphoreRequest{NamespaceName: s.ns, SemaphoreName: m.name, LeaseId: s.leaseID})
	if err == nil {
		m.held = 0
	}
	return err
}

func (m *Semaphore) lockCtx(ctx context.Context) error {
	select {
	case m.lock <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (m *Semaphore) unlock() { <-m.lock }

// Margins of Acquire's deadline arithmetic.
const (
	// answerMargin is left between the end of a server-side wait and the
	// context's deadline, for the TIMED_OUT answer to arrive.
	answerMargin = 250 * time.Millisecond
	// minWait: with less than this left, Acquire does not start a call.
	minWait = 50 * time.Millisecond
	// cleanupTimeout bounds the release after an ambiguous acquire.
	cleanupTimeout = 2 * time.Second
)

var errDeadlineNear = errors.New("deadline too near to start a call")

// waitSeconds is the timeout_seconds of a blocking call under ctx, or -1
// when too little time is left to make one.
func (m *Semaphore) waitSeconds(ctx context.Context) int64 {
	return waitSeconds(m.sess.c, ctx)
}

// waitSeconds is the timeout_seconds of a blocking acquire (of a semaphore
// or a lock) under ctx, or -1 when too little time is left to make one.
func waitSeconds(c *Client, ctx context.Context) int64 {
	max := int64(c.cfg.MaxAcquireTimeout / time.Second)
	dl, ok := ctx.Deadline()
	if !ok {
		return max
	}
	rem := time.Until(dl)
	if rem < minWait {
		return -1
	}
	secs := int64((rem - answerMargin) / time.Second)
	if secs < 1 {
		secs = 1
	}
	if secs > max {
		secs = max
	}
	return secs
}

func (m *Semaphore) acquire(ctx context.Context, weight int64, blocking bool, opts []AcquireOption) (*Grant, error) {
	s := m.sess
	if err := s.Err(); err != nil {
		return nil, err
	}
	var o acquireOptions
	for _, f := range opts {
		f(&o)
	}
	if err := m.lockCtx(ctx); err != nil {
		return nil, m.ctxErr(ctx, nil)
	}
	defer m.unlock()

	// The calls end when the caller's context or the session ends.
	callCtx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(s.ctx, cancel)
	defer func() {
		stop()
		cancel()
	}()

	heldBefore := m.held
	req := &pb.AcquireSemaphoreRequest{NamespaceName: s.ns, SemaphoreName: m.name, LeaseId: s.leaseID, Weight: weight, Metadata: o.metadata}
	for {
		var resp *pb.AcquireSemaphoreResponse
		err := s.c.invoke(waitingIf(callCtx, blocking), retryAlways, nil, func(ctx context.Context, cc grpc.ClientConnInterface, co []grpc.CallOption) error {
			req.TimeoutSeconds = 0
			if blocking {
				if req.TimeoutSeconds = m.waitSeconds(ctx); req.TimeoutSeconds < 0 {
					return errDeadlineNear
				}
			}
			r, err := pb.NewGrackleServiceClient(cc).AcquireSemaphore(ctx, req, co...)
			resp = r
			return err
		})
		if err == nil {
			switch resp.Outcome {
			case pb.AcquireOutcome_ACQUIRE_OUTCOME_ACQUIRED:
				m.held = resp.Holder.GetWeight()
				return m.grant(resp), nil
			case pb.AcquireOutcome_ACQUIRE_OUTCOME_UNAVAILABLE:
				return nil, m.acquireError(resp.Outcome, resp.Semaphore, ErrWouldBlock, nil)
			case pb.AcquireOutcome_ACQUIRE_OUTCOME_TIMED_OUT:
				switch {
				case s.ctx.Err() != nil:
					return nil, s.Err()
				case ctx.Err() != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded):
					return nil, m.ctxErr(ctx, nil)
				case !blocking || m.waitSeconds(ctx) < 0:
					return nil, m.acquireError(resp.Outcome, resp.Semaphore, ErrTimeout, nil)
				}
				continue // time is left: wait again (at the queue's tail)
			default:
				return nil, fmt.Errorf("grackle: acquire %q: unexpected outcome %v", m.name, resp.Outcome)
			}
		}
		if errors.Is(err, errDeadlineNear) {
			return nil, m.acquireError(pb.AcquireOutcome_ACQUIRE_OUTCOME_TIMED_OUT, nil, ErrTimeout, context.DeadlineExceeded)
		}
		if ambiguous(err) && heldBefore == 0 && s.ctx.Err() == nil {
			// The last call may have been granted: do not keep a hold
			// nobody will use.
			cctx, ccancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
			_ = m.releaseLocked(cctx) // on failure, the lease's end releases it
			ccancel()
		}
		if s.ctx.Err() != nil {
			return nil, s.Err()
		}
		if ctx.Err() != nil {
			return nil, m.ctxErr(ctx, err)
		}
		switch code := status.Code(err); {
		case apierr.LeaseGone(err):
			// The lease is gone (revoked, expired, its namespace deleted):
			// the session is lost. A missing semaphore is only this call's.
			s.endGone(err)
			return nil, s.Err()
		case code == codes.InvalidArgument && apierr.ReasonOf(err) == apierr.WeightExceedsPermits:
			return nil, fmt.Errorf("%w: %w", ErrWeightExceedsPermits, err)
		}
		return nil, err
	}
}

// ctxErr is the error of an acquire whose context ended.
func (m *Semaphore) ctxErr(ctx context.Context, last error) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return m.acquireError(pb.AcquireOutcome_ACQUIRE_OUTCOME_TIMED_OUT, nil, ErrTimeout, ctx.Err())
	}
	if last != nil {
		return fmt.Errorf("grackle: acquire %q: %w (last error: %v)", m.name, ctx.Err(), last)
	}
	return fmt.Errorf("grackle: acquire %q: %w", m.name, ctx.Err())
}

func (m *Semaphore) acquireError(outcome pb.AcquireOutcome, state *pb.Semaphore, sentinel, cause error) error {
	return &AcquireError{Namespace: m.sess.ns, Semaphore: m.name, Outcome: outcome, State: state, sentinel: sentinel, cause: cause}
}

func (m *Semaphore) grant(r *pb.AcquireSemaphoreResponse) *Grant {
	h := r.Holder
	return &Grant{Namespace: m.sess.ns, Semaphore: m.name, LeaseID: h.GetLeaseId(), Weight: h.GetWeight(),
		FencingToken: h.GetFencingToken(), LockedAt: time.Unix(0, h.GetLockedAt()), ExpiresAt: time.Unix(0, h.GetExpiresAt()),
		Holder: h, State: r.Semaphore}
}

// ambiguous reports whether a failed call may still have taken effect.
func ambiguous(err error) bool {
	if errors.Is(err, errDeadlineNear) || errors.Is(err, ErrClientClosed) {
		return false
	}
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled, codes.Unknown, codes.Internal:
		return true
	}
	return false
}

// WithPermits runs fn while holding weight permits of sem, like the peer
// library's acquire-with-a-function helper:
//
//   - it acquires as Semaphore.Acquire does (an acquire error is returned
//     and fn does not run);
//   - fn's context is cancelled when ctx ends or the session ends (the
//     lease lost: stop using the resource);
//   - the permits are released however fn ends: on return, on error, and
//     on panic, after which the panic goes on (re-panicked with the same
//     value once the release is done);
//   - the result is fn's error; else, if the session ended while fn ran,
//     the session's error (matching ErrLeaseLost, ErrSessionClosed or
//     ErrClientClosed: fn may have run without the permits for a while);
//     else the release's error, if any.
//
// The release runs even if ctx has ended (with its own bound of 10 s).
// WithPermits is not reentrant: a nested call on the same semaphore and
// session re-acquires the same hold and its release drops it.
func WithPermits(ctx context.Context, sem *Semaphore, weight int64, fn func(ctx context.Context, g *Grant) error) error {
	return withHeld(ctx, sem.sess, func(ctx context.Context) (*Grant, error) { return sem.Acquire(ctx, weight) },
		sem.Release, fmt.Sprintf("%q", sem.name), fn)
}

// withHeld is WithPermits and WithLock, which differ only in what they
// acquire and release (what names it in the release's error): fn runs
// under acquire's grant, its context cancelled when ctx or sess ends, and
// release runs however fn ends.
func withHeld[G any](ctx context.Context, sess *Session, acquire func(context.Context) (G, error), release func(context.Context) error,
	what string, fn func(ctx context.Context, g G) error) (err error) {
	g, err := acquire(ctx)
	if err != nil {
		return err
	}
	fctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(sess.ctx, func() { cancel(sess.Err()) })
	defer func() {
		stop()
		cancel(nil)
		p := recover()
		rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		rerr := release(rctx)
		rcancel()
		if p != nil {
			panic(p)
		}
		if err != nil {
			return
		}
		if serr := sess.Err(); serr != nil {
			// The session ended while fn ran: fn may have run without
			// what it holds for a while.
			err = serr
			return
		}
		if rerr != nil {
			err = fmt.Errorf("grackle: release %s after running fn: %w", what, rerr)
		}
	}()
	return fn(fctx, g)
}
