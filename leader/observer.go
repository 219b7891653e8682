package leader

import (
	"time"

	"github.com/grackle-coord/grackle/fsm"
)

// Observer receives the leader's events, for metrics and tracing. Calls
// are made synchronously from the leader's hot paths (some with a queue's
// lock held): an implementation must be fast, must not block, and must not
// call back into the Leader. Events are structs so that fields can be
// added without breaking implementations.
type Observer interface {
	WaiterEvent(WaiterEvent)
	ExpiryEvent(ExpiryEvent)
}

// WaiterEventKind says what happened to a waiter.
type WaiterEventKind int

const (
	// WaiterQueued: the leader decided the call must wait.
	WaiterQueued WaiterEventKind = iota + 1
	// WaiterGranted: a waiter was granted by a later command (a hand-off);
	// HandOff is the time from proposing that command to its result. The
	// grant rides in the same Raft entry as the release, revoke or raise
	// that frees the permits, so there is no commit between the two:
	// this is the whole hand-off as the leader sees it.
	WaiterGranted
	// WaiterEnded: a waiter left its queue without a grant (timed out,
	// caller gone, superseded, its lease/semaphore gone, leadership lost).
	WaiterEnded
)

// WaiterEvent describes one waiter's change. Waited is the time since the
// call reached the leader.
type WaiterEvent struct {
	Kind WaiterEventKind
	// Key names the semaphore; for a lock waiter, Key.Semaphore is empty
	// and Lock names the lock.
	Key     fsm.SemKey
	Lock    string
	LeaseID string
	Weight  int64
	Waited  time.Duration
	HandOff time.Duration
}

// ExpiryEvent describes one expiry command: Lateness is how long after the
// earliest expires_at (by the leader's clock) the command reaping it was
// committed and applied.
type ExpiryEvent struct {
	Lateness time.Duration
	Err      error
}

// EntryEvent describes one Raft entry the leader proposed: how many
// commands it carries (1 unless writes were packed), and how long the
// hold kept it back for the callers of the entry before it (0: not held).
type EntryEvent struct {
	Commands int
	Held     time.Duration
}

// EntryObserver is an Observer that also wants EntryEvent (optional, so
// that observers written before it still satisfy Observer). Called on
// the proposer's goroutine for every entry it proposes.
type EntryObserver interface {
	EntryEvent(EntryEvent)
}

// onEntry is o's EntryEvent, or nil when o does not take them.
func onEntry(o Observer) func(EntryEvent) {
	if eo, ok := o.(EntryObserver); ok {
		return eo.EntryEvent
	}
	return nil
}

// ReadRoundEvent describes one leadership confirmation (a raft
// VerifyLeader round) that linearizable reads on the leader and follower
// read-index requests shared: Reads is how many shared it, Err its error
// (nil: confirmed).
type ReadRoundEvent struct {
	Reads int
	Err   error
}

// ReadRoundObserver is an Observer that also wants ReadRoundEvent
// (optional, as EntryObserver). Called on the rounds' goroutine after each
// round, before its readers are answered: it must be fast.
type ReadRoundObserver interface {
	ReadRoundEvent(ReadRoundEvent)
}

// onReadRound is o's ReadRoundEvent, or nil when o does not take them.
func onReadRound(o Observer) func(ReadRoundEvent) {
	if ro, ok := o.(ReadRoundObserver); ok {
		return ro.ReadRoundEvent
	}
	return nil
}

type nopObserver struct{}

func (nopObserver) WaiterEvent(WaiterEvent) {}
func (nopObserver) ExpiryEvent(ExpiryEvent) {}
