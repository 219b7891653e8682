package client

import (
	"errors"
	"fmt"
	"strings"

	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
)

var (
	// ErrClientClosed: the Client was closed.
	ErrClientClosed = errors.New("grackle: client closed")

	// ErrSessionClosed: the Session was closed by Session.Close.
	ErrSessionClosed = errors.New("grackle: session closed")

	// ErrSessionOrphaned: the Session was left with Session.Orphan: its
	// lease is no longer refreshed but was not revoked.
	ErrSessionOrphaned = errors.New("grackle: session orphaned (lease left to expire or to be resumed)")

	// ErrLeaseLost: the session's lease is gone. Either the server said so
	// (a refresh or a check answered NotFound: it expired, or was revoked
	// out of band, or its namespace was deleted), or the lease's expiry
	// passed by the client's own conservative clock without a successful
	// refresh. Its holds are (or must be assumed) released.
	ErrLeaseLost = errors.New("grackle: lease lost")

	// ErrTimeout: a blocking acquire was not granted before its context's
	// deadline (outcome ACQUIRE_OUTCOME_TIMED_OUT). Returned wrapped in an
	// *AcquireError (a semaphore) or a *LockAcquireError (a lock).
	ErrTimeout = errors.New("grackle: acquire timed out")

	// ErrWouldBlock: a non-blocking acquire (TryAcquire) was not granted at
	// once, because the permits are in use or earlier waiters are queued
	// (outcome ACQUIRE_OUTCOME_UNAVAILABLE; not to be confused with the
	// gRPC code Unavailable). Returned wrapped in an *AcquireError. A
	// lock's TryAcquire returns it too, wrapped in a *LockAcquireError,
	// when a conflicting hold or an earlier conflicting request is in the
	// way.
	ErrWouldBlock = errors.New("grackle: permits not available without waiting")

	// ErrUpgradeConflict: an upgrade of a shared lock hold to exclusive
	// was refused at once because another lease's upgrade of the same lock
	// already waits (the two would wait for each other forever). The
	// shared hold stays; release it (and acquire again) to let the other
	// upgrade through. It wraps the server's FailedPrecondition with
	// reason UPGRADE_CONFLICT, so status.Code still reports that.
	ErrUpgradeConflict = errors.New("grackle: lock upgrade conflicts with another lease's waiting upgrade")

	// ErrWeightExceedsPermits: the weight asked for is larger than the
	// semaphore's permits, so it can never be granted (the server's
	// InvalidArgument with reason WEIGHT_EXCEEDS_PERMITS, which this error
	// wraps, so status.Code still reports InvalidArgument).
	ErrWeightExceedsPermits = errors.New("grackle: weight exceeds semaphore permits")

	// ErrWaitTimeout: a wait (WaitGroup.Wait, Barrier.Wait,
	// Barrier.ArriveAndWait) did not see what it waited for before its
	// context's deadline. Returned wrapped in a *WaitError, which also
	// matches context.DeadlineExceeded.
	ErrWaitTimeout = errors.New("grackle: wait timed out")

	// ErrWaitGroupExpired: the wait group reached its expires_at before
	// all its jobs were completed (status WAIT_GROUP_STATUS_EXPIRED): it
	// will never complete. WaitGroup.Wait returns it wrapped in a
	// *WaitError; CompleteJobs returns it, beside ErrWaitGroupNotActive,
	// for new jobs sent to an expired group.
	ErrWaitGroupExpired = errors.New("grackle: wait group expired")

	// ErrWaitGroupNotActive: new jobs were sent to a wait group that has
	// finished (COMPLETED or EXPIRED, or past its expires_at); nothing
	// changed. It wraps the server's FailedPrecondition with reason
	// WAIT_GROUP_NOT_ACTIVE, so status.Code still reports that.
	ErrWaitGroupNotActive = errors.New("grackle: wait group not active")

	// ErrGenerationMismatch: an arrival at (or a wait for) a barrier
	// generation that is neither the current one nor, for an arrival that
	// was counted, the previous one. Returned wrapped in a
	// *GenerationError, which names the barrier's current generation and
	// wraps the server's FailedPrecondition with reason
	// GENERATION_MISMATCH.
	ErrGenerationMismatch = errors.New("grackle: barrier generation mismatch")
)

// WaitError reports a wait for a wait group or a barrier that ended
// without what it waited for and without a failure: the context's
// deadline passed (errors.Is(err, ErrWaitTimeout), and
// context.DeadlineExceeded), or the wait group expired
// (errors.Is(err, ErrWaitGroupExpired)).
type WaitError struct {
	Namespace string
	// Kind is "wait group" or "barrier"; Name is its name.
	Kind string
	Name string
	// Generation is the barrier generation waited for (0 for a wait group).
	Generation int64

	sentinel error // ErrWaitTimeout or ErrWaitGroupExpired
	cause    error // the context's error, when the deadline ended it
}

func (e *WaitError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%v: %s %q in namespace %q", e.sentinel, e.Kind, e.Name, e.Namespace)
	if e.Generation > 0 {
		fmt.Fprintf(&b, " (generation %d)", e.Generation)
	}
	if e.cause != nil {
		fmt.Fprintf(&b, ": %v", e.cause)
	}
	return b.String()
}

// Unwrap lets errors.Is match the sentinel and, when the context's
// deadline ended the wait, context.DeadlineExceeded.
func (e *WaitError) Unwrap() []error {
	if e.cause != nil {
		return []error{e.sentinel, e.cause}
	}
	return []error{e.sentinel}
}

// GenerationError reports an arrival or a wait at a barrier generation
// the server refused (errors.Is(err, ErrGenerationMismatch)).
type GenerationError struct {
	Namespace string
	Barrier   string
	// Expected is the generation the call named.
	Expected int64
	// Current is the barrier's current generation as the server said
	// (0 when it did not say).
	Current int64

	err error // the server's FailedPrecondition
}

func (e *GenerationError) Error() string {
	return fmt.Sprintf("%v: barrier %q in namespace %q is at generation %d, not %d: %v",
		ErrGenerationMismatch, e.Barrier, e.Namespace, e.Current, e.Expected, e.err)
}

// Unwrap lets errors.Is match ErrGenerationMismatch and status.Code
// report the server's code.
func (e *GenerationError) Unwrap() []error { return []error{ErrGenerationMismatch, e.err} }

// AcquireError reports an acquire that ended without a grant and without
// a failure: TIMED_OUT (errors.Is(err, ErrTimeout)) or, for TryAcquire,
// UNAVAILABLE (errors.Is(err, ErrWouldBlock)).
type AcquireError struct {
	Namespace string
	Semaphore string
	// Outcome is ACQUIRE_OUTCOME_TIMED_OUT or ACQUIRE_OUTCOME_UNAVAILABLE.
	Outcome pb.AcquireOutcome
	// State is the semaphore's state as the server last reported it (nil
	// when the deadline passed on the client's side before an answer).
	State *pb.Semaphore

	sentinel error // ErrTimeout or ErrWouldBlock
	cause    error // the context's error, when the deadline ended it
}

func (e *AcquireError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%v: semaphore %q in namespace %q", e.sentinel, e.Semaphore, e.Namespace)
	if e.State != nil {
		fmt.Fprintf(&b, " (%d of %d permits held)", e.State.ActiveHolds, e.State.Permits)
	}
	if e.cause != nil {
		fmt.Fprintf(&b, ": %v", e.cause)
	}
	return b.String()
}

// Unwrap lets errors.Is match ErrTimeout / ErrWouldBlock and, when the
// context's deadline ended the wait, context.DeadlineExceeded.
func (e *AcquireError) Unwrap() []error {
	if e.cause != nil {
		return []error{e.sentinel, e.cause}
	}
	return []error{e.sentinel}
}
