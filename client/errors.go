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
)

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
