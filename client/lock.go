package client

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grackle-coord/grackle/apierr"
	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
)

// LockMode is how a lease holds a lock.
type LockMode int

const (
	// Exclusive: no other lease holds the lock, nor any of its ancestors
	// or descendants ("orders" covers "orders/eu/42").
	Exclusive LockMode = iota + 1
	// Shared: other leases may hold the lock (and its relatives) shared
	// too; nobody else holds it, an ancestor or a descendant exclusively.
	Shared
)

// heldUnknown: the handle does not know how (or whether) its lease holds
// the lock (a resumed session, or an upgrade or downgrade whose answer was
// lost).
const heldUnknown LockMode = -1

func (m LockMode) String() string {
	switch m {
	case Exclusive:
		return "exclusive"
	case Shared:
		return "shared"
	}
	return fmt.Sprintf("LockMode(%d)", int(m))
}

func modeOf(exclusive bool) LockMode {
	if exclusive {
		return Exclusive
	}
	return Shared
}

// Lock is one lock under one lock session's lease: the lease is the
// holder. Get it with LockSession.Lock.
//
// A lease holds a lock at most once, in one mode. Acquiring again in the
// same mode re-acquires (a new fencing token, the same locked_at);
// Shared while holding Exclusive downgrades at once; Exclusive while
// holding Shared upgrades: it waits at the head of the queue until the
// lease is the only holder (if it ends without the grant, the shared hold
// stays). Release drops the hold whatever its mode. Calls on one handle
// are serialized.
type Lock struct {
	sess *LockSession
	name string
	lock chan struct{} // 1-buffered; serializes Acquire/TryAcquire/Release
	held LockMode      // as far as this handle knows (0: not held, heldUnknown); guarded by lock
}

// LockGrant is a successful lock acquisition.
type LockGrant struct {
	Namespace string
	Lock      string
	LeaseID   string
	// Mode is how the lease now holds the lock.
	Mode LockMode
	// FencingToken strictly increases with every grant across the cluster
	// (shared grants and re-acquires included: it is the Raft index of the
	// granting entry); pass it to the guarded resource so it can reject a
	// holder whose lock has since passed to someone else.
	FencingToken uint64
	// LockedAt is when the lease's hold was first granted (a re-acquire
	// keeps it); ExpiresAt is the lease's expiry at grant time. Both are
	// the leader's clock.
	LockedAt  time.Time
	ExpiresAt time.Time
	// Holder and State are the server's answer: the hold and the lock's
	// state right after the grant.
	Holder *pb.LockHolder
	State  *pb.Lock
}

// Name is the lock's name.
func (l *Lock) Name() string { return l.name }

// Session is the lock session whose lease holds the lock.
func (l *Lock) Session() *LockSession { return l.sess }

// Acquire takes the lock in mode (Exclusive or Shared), waiting until it
// is granted, the context ends, or the session ends. It waits as
// Semaphore.Acquire does:
//
//   - in server-side calls of at most Config.MaxAcquireTimeout each, sized
//     to what remains of ctx's deadline less a margin for the answer;
//     without a deadline it waits until granted;
//   - when leadership changes, the leader ends the waiting call with
//     Unavailable and Acquire asks the new leader again (a re-acquire in
//     the same mode under the same lease is idempotent);
//   - the deadline passing ends it with a *LockAcquireError matching
//     ErrTimeout, whose Reason and BlockingLocks say what it waited for;
//   - the session's lease being lost ends it with an error matching
//     ErrLeaseLost (a closed session: ErrSessionClosed);
//   - an upgrade (Exclusive while holding Shared) while another lease's
//     upgrade of the same lock waits fails at once with an error matching
//     ErrUpgradeConflict (two upgrades would wait for each other forever).
//
// If the context ends while a call is in flight, the call's outcome is
// unknown; if the lease did not hold the lock before, Acquire then
// releases it (bounded by 2 s past the context) so that a grant nobody
// will use is not kept. Other failures are returned as gRPC status errors
// (a bad lock name is InvalidArgument).
func (l *Lock) Acquire(ctx context.Context, mode LockMode, opts ...AcquireOption) (*LockGrant, error) {
	return l.acquire(ctx, mode, true, opts)
}

// TryAcquire takes the lock in mode only if it is granted at once
// (timeout_seconds 0): no conflicting holder and no earlier conflicting
// request waiting. Otherwise it returns a *LockAcquireError matching
// ErrWouldBlock, whose Reason and BlockingLocks say what is in the way.
func (l *Lock) TryAcquire(ctx context.Context, mode LockMode, opts ...AcquireOption) (*LockGrant, error) {
	return l.acquire(ctx, mode, false, opts)
}

// Release drops the session's hold of the lock, whatever its mode.
// Releasing what is not held is not an error.
func (l *Lock) Release(ctx context.Context) error {
	if err := l.lockCtx(ctx); err != nil {
		return err
	}
	defer l.unlock()
	return l.releaseLocked(ctx)
}

func (l *Lock) releaseLocked(ctx context.Context) error {
	s := l.sess.s
	_, err := s.c.ReleaseLock(ctx, &pb.ReleaseLockRequest{NamespaceName: s.ns, LockName: l.name, LeaseId: s.leaseID})
	if err == nil {
		l.held = 0
	}
	return err
}

func (l *Lock) lockCtx(ctx context.Context) error {
	select {
	case l.lock <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (l *Lock) unlock() { <-l.lock }

func (l *Lock) acquire(ctx context.Context, mode LockMode, blocking bool, opts []AcquireOption) (*LockGrant, error) {
	if mode != Exclusive && mode != Shared {
		return nil, fmt.Errorf("grackle: acquire lock %q: mode must be Exclusive or Shared, got %v", l.name, mode)
	}
	s := l.sess.s
	if err := s.Err(); err != nil {
		return nil, err
	}
	var o acquireOptions
	for _, f := range opts {
		f(&o)
	}
	if err := l.lockCtx(ctx); err != nil {
		return nil, l.ctxErr(ctx, mode, nil, nil)
	}
	defer l.unlock()

	// The calls end when the caller's context or the session ends.
	callCtx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(s.ctx, cancel)
	defer func() {
		stop()
		cancel()
	}()

	heldBefore := l.held
	// last is the last not-acquired answer: when the deadline cuts the
	// final call short, its reason is still the best account of the wait.
	var last *pb.AcquireLockResponse
	req := &pb.AcquireLockRequest{NamespaceName: s.ns, LockName: l.name, LeaseId: s.leaseID, Exclusive: mode == Exclusive, Metadata: o.metadata}
	for {
		var resp *pb.AcquireLockResponse
		err := s.c.invoke(waitingIf(callCtx, blocking), retryAlways, nil, func(ctx context.Context, cc grpc.ClientConnInterface, co []grpc.CallOption) error {
			req.TimeoutSeconds = 0
			if blocking {
				if req.TimeoutSeconds = waitSeconds(s.c, ctx); req.TimeoutSeconds < 0 {
					return errDeadlineNear
				}
			}
			r, err := pb.NewGrackleServiceClient(cc).AcquireLock(ctx, req, co...)
			resp = r
			return err
		})
		if err == nil {
			switch resp.Outcome {
			case pb.AcquireOutcome_ACQUIRE_OUTCOME_ACQUIRED:
				l.held = modeOf(resp.Holder.GetExclusive())
				return l.grant(resp), nil
			case pb.AcquireOutcome_ACQUIRE_OUTCOME_UNAVAILABLE:
				return nil, l.acquireError(mode, resp.Outcome, resp, ErrWouldBlock, nil)
			case pb.AcquireOutcome_ACQUIRE_OUTCOME_TIMED_OUT:
				switch {
				case s.ctx.Err() != nil:
					return nil, s.Err()
				case ctx.Err() != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded):
					return nil, l.ctxErr(ctx, mode, nil, nil)
				case !blocking || waitSeconds(s.c, ctx) < 0:
					return nil, l.acquireError(mode, resp.Outcome, resp, ErrTimeout, nil)
				}
				last = resp
				continue // time is left: wait again (at the queue's tail)
			default:
				return nil, fmt.Errorf("grackle: acquire lock %q: unexpected outcome %v", l.name, resp.Outcome)
			}
		}
		if errors.Is(err, errDeadlineNear) {
			return nil, l.acquireError(mode, pb.AcquireOutcome_ACQUIRE_OUTCOME_TIMED_OUT, last, ErrTimeout, context.DeadlineExceeded)
		}
		if ambiguous(err) && s.ctx.Err() == nil {
			switch {
			case heldBefore == 0:
				// The last call may have been granted: do not keep a hold
				// nobody will use.
				cctx, ccancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
				_ = l.releaseLocked(cctx) // on failure, the lease's end releases it
				ccancel()
			case heldBefore != mode:
				// An upgrade or downgrade may have been applied; the hold
				// itself is the caller's and stays.
				l.held = heldUnknown
			}
		}
		if s.ctx.Err() != nil {
			return nil, s.Err()
		}
		if ctx.Err() != nil {
			return nil, l.ctxErr(ctx, mode, last, err)
		}
		if _, has := ctx.Deadline(); has && status.Code(err) == codes.DeadlineExceeded {
			// The caller's deadline cut the call short, seen by the
			// server or the transport a moment before ctx itself ends.
			return nil, l.acquireError(mode, pb.AcquireOutcome_ACQUIRE_OUTCOME_TIMED_OUT, last, ErrTimeout, context.DeadlineExceeded)
		}
		switch {
		case apierr.LeaseGone(err):
			// The lease is gone (revoked, expired, its namespace deleted):
			// the session is lost.
			s.endGone(err)
			return nil, s.Err()
		case status.Code(err) == codes.FailedPrecondition && apierr.ReasonOf(err) == apierr.UpgradeConflict:
			return nil, fmt.Errorf("%w: %w", ErrUpgradeConflict, err)
		}
		return nil, err
	}
}

// ctxErr is the error of an acquire whose context ended; lastResp is the
// last not-acquired answer (or nil), lastErr the last call's error.
func (l *Lock) ctxErr(ctx context.Context, mode LockMode, lastResp *pb.AcquireLockResponse, lastErr error) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return l.acquireError(mode, pb.AcquireOutcome_ACQUIRE_OUTCOME_TIMED_OUT, lastResp, ErrTimeout, ctx.Err())
	}
	if lastErr != nil {
		return fmt.Errorf("grackle: acquire lock %q: %w (last error: %v)", l.name, ctx.Err(), lastErr)
	}
	return fmt.Errorf("grackle: acquire lock %q: %w", l.name, ctx.Err())
}

func (l *Lock) acquireError(mode LockMode, outcome pb.AcquireOutcome, r *pb.AcquireLockResponse, sentinel, cause error) error {
	return &LockAcquireError{Namespace: l.sess.s.ns, Lock: l.name, Mode: mode, Outcome: outcome,
		Reason: r.GetReason(), BlockingLocks: r.GetBlockingLocks(), State: r.GetLock(), sentinel: sentinel, cause: cause}
}

func (l *Lock) grant(r *pb.AcquireLockResponse) *LockGrant {
	h := r.Holder
	return &LockGrant{Namespace: l.sess.s.ns, Lock: l.name, LeaseID: h.GetLeaseId(), Mode: modeOf(h.GetExclusive()),
		FencingToken: h.GetFencingToken(), LockedAt: time.Unix(0, h.GetLockedAt()), ExpiresAt: time.Unix(0, h.GetExpiresAt()),
		Holder: h, State: r.Lock}
}

// LockAcquireError reports a lock acquire that ended without a grant and
// without a failure: TIMED_OUT (errors.Is(err, ErrTimeout)) or, for
// TryAcquire, UNAVAILABLE (errors.Is(err, ErrWouldBlock)).
type LockAcquireError struct {
	Namespace string
	Lock      string
	// Mode is the mode that was asked for.
	Mode LockMode
	// Outcome is ACQUIRE_OUTCOME_TIMED_OUT or ACQUIRE_OUTCOME_UNAVAILABLE.
	Outcome pb.AcquireOutcome
	// Reason says what kept the acquire waiting when the server last
	// decided it: a holder of the same lock (PEER), of an ancestor or of a
	// descendant, or an earlier conflicting request still waiting (QUEUE).
	// CONTENTION_REASON_UNSPECIFIED when the deadline passed on the
	// client's side before any answer (when it cut a later call short,
	// these fields are the last answer's).
	Reason pb.ContentionReason
	// BlockingLocks names (up to 50 of) the locks involved.
	BlockingLocks []string
	// State is the lock's state as the server last reported it (nil when
	// the deadline passed on the client's side before any answer).
	State *pb.Lock

	sentinel error // ErrTimeout or ErrWouldBlock
	cause    error // the context's error, when the deadline ended it
}

func (e *LockAcquireError) Error() string {
	var b strings.Builder
	how := "before the deadline"
	if errors.Is(e.sentinel, ErrWouldBlock) {
		how = "without waiting"
	}
	fmt.Fprintf(&b, "grackle: lock %q in namespace %q not acquired %s %s", e.Lock, e.Namespace, e.Mode, how)
	if why := ContentionText(e.Reason, e.BlockingLocks); why != "" {
		fmt.Fprintf(&b, ": %s", why)
	}
	if e.cause != nil {
		fmt.Fprintf(&b, ": %v", e.cause)
	}
	return b.String()
}

// Unwrap lets errors.Is match ErrTimeout / ErrWouldBlock and, when the
// context's deadline ended the wait, context.DeadlineExceeded.
func (e *LockAcquireError) Unwrap() []error {
	if e.cause != nil {
		return []error{e.sentinel, e.cause}
	}
	return []error{e.sentinel}
}

// ContentionText says in words what a ContentionReason and its blocking
// locks mean: "held by another lease", "an ancestor is held (orders)", ...
// ("" for CONTENTION_REASON_UNSPECIFIED). The CLI prints it too.
func ContentionText(r pb.ContentionReason, blocking []string) string {
	var what string
	switch r {
	case pb.ContentionReason_CONTENTION_REASON_PEER:
		what = "held by another lease"
	case pb.ContentionReason_CONTENTION_REASON_ANCESTOR:
		what = "an ancestor is held"
	case pb.ContentionReason_CONTENTION_REASON_DESCENDANT:
		what = "a descendant is held"
	case pb.ContentionReason_CONTENTION_REASON_QUEUE:
		what = "an earlier conflicting request is waiting"
	case pb.ContentionReason_CONTENTION_REASON_UNSPECIFIED:
		return ""
	default:
		what = r.String()
	}
	if len(blocking) == 0 {
		return what
	}
	const show = 3
	names := strings.Join(blocking[:min(len(blocking), show)], ", ")
	if len(blocking) > show {
		names += fmt.Sprintf(", +%d more", len(blocking)-show)
	}
	return what + " (" + names + ")"
}

// WithLock runs fn while holding lk in mode, as WithPermits does for a
// semaphore:
//
//   - it acquires as Lock.Acquire does (an acquire error is returned and
//     fn does not run);
//   - fn's context is cancelled when ctx ends or the session ends (the
//     lease lost: stop touching the resource, another process may hold
//     the lock now);
//   - the lock is released however fn ends: on return, on error, and on
//     panic, after which the panic goes on (re-panicked with the same
//     value once the release is done);
//   - the result is fn's error; else, if the session ended while fn ran,
//     the session's error (matching ErrLeaseLost, ErrSessionClosed or
//     ErrClientClosed: fn may have run without the lock for a while);
//     else the release's error, if any.
//
// The release runs even if ctx has ended (with its own bound of 10 s).
// WithLock is not reentrant: a nested call on the same lock and session
// re-acquires the same hold (or upgrades or downgrades it), and its
// release drops it.
func WithLock(ctx context.Context, lk *Lock, mode LockMode, fn func(ctx context.Context, g *LockGrant) error) error {
	return withHeld(ctx, lk.sess.s, func(ctx context.Context) (*LockGrant, error) { return lk.Acquire(ctx, mode) },
		lk.Release, fmt.Sprintf("lock %q", lk.name), fn)
}
