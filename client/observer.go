package client

// Telemetry per acquire, with the three events of the weighted-semaphore
// library this project's fairness rules come from (its
// [:semaphore, :acquire, :start | :rejected | :stop] events):
//
//   - AcquireStart at the beginning of every Semaphore.Acquire and
//     TryAcquire (and so of every WithPermits);
//   - AcquireRejected when the acquire is refused without waiting: a
//     TryAcquire that found the permits taken (outcome UNAVAILABLE), or a
//     weight above the semaphore's permits. Always followed at once by its
//     AcquireStop;
//   - AcquireStop when the call returns, with how long it took and its
//     result: acquired, timed_out, rejected (TryAcquire found the permits
//     taken) or error (anything else, a weight above the permits included,
//     as the library counts it).
//
// Exactly one start and one stop per call, from the caller's goroutine,
// in that order. Adapters: package client/promobserver (Prometheus).

import (
	"errors"
	"sync/atomic"
	"time"
)

// AcquireResult is the result of an acquire in AcquireStopEvent.
type AcquireResult string

// The results of AcquireStopEvent.
const (
	ResultAcquired AcquireResult = "acquired"
	ResultTimedOut AcquireResult = "timed_out"
	ResultRejected AcquireResult = "rejected"
	ResultError    AcquireResult = "error"
)

// RejectReason says why an acquire was refused without waiting.
type RejectReason string

// The reasons of AcquireRejectedEvent.
const (
	// RejectUnavailable: a TryAcquire found the permits taken or others
	// queued (outcome ACQUIRE_OUTCOME_UNAVAILABLE).
	RejectUnavailable RejectReason = "unavailable"
	// RejectWeightExceedsPermits: the weight is above the semaphore's
	// permits, so it can never be granted.
	RejectWeightExceedsPermits RejectReason = "weight_exceeds_permits"
)

// AcquireEvent identifies one acquire call; the three events of a call
// share it (ID is unique per Client).
type AcquireEvent struct {
	ID        uint64
	Namespace string
	Semaphore string
	LeaseID   string
	Weight    int64
	// Blocking is false for TryAcquire.
	Blocking bool
}

// AcquireStartEvent begins an acquire.
type AcquireStartEvent struct {
	AcquireEvent
	Time time.Time // when the call began (the library's system_time)
}

// AcquireRejectedEvent: refused without waiting.
type AcquireRejectedEvent struct {
	AcquireEvent
	Reason RejectReason
}

// AcquireStopEvent ends an acquire.
type AcquireStopEvent struct {
	AcquireEvent
	Duration time.Duration // monotonic, from the start event
	Result   AcquireResult
	// FencingToken of the grant (ResultAcquired), else 0.
	FencingToken uint64
	// Err is the call's error (nil when acquired).
	Err error
}

// Observer receives the acquire events (Config.Observer). Its methods are
// called synchronously on the caller's goroutine: keep them quick.
type Observer interface {
	AcquireStart(AcquireStartEvent)
	AcquireRejected(AcquireRejectedEvent)
	AcquireStop(AcquireStopEvent)
}

var acquireIDs atomic.Uint64

// observe wraps one acquire call with the observer's events.
func (m *Semaphore) observe(weight int64, blocking bool, call func() (*Grant, error)) (*Grant, error) {
	obs := m.sess.c.cfg.Observer
	if obs == nil {
		return call()
	}
	ev := AcquireEvent{ID: acquireIDs.Add(1), Namespace: m.sess.ns, Semaphore: m.name, LeaseID: m.sess.leaseID, Weight: weight, Blocking: blocking}
	start := time.Now()
	obs.AcquireStart(AcquireStartEvent{AcquireEvent: ev, Time: start})
	g, err := call()
	stop := AcquireStopEvent{AcquireEvent: ev, Duration: time.Since(start), Err: err}
	switch {
	case err == nil:
		stop.Result, stop.FencingToken = ResultAcquired, g.FencingToken
	case errors.Is(err, ErrWouldBlock):
		obs.AcquireRejected(AcquireRejectedEvent{AcquireEvent: ev, Reason: RejectUnavailable})
		stop.Result = ResultRejected
	case errors.Is(err, ErrWeightExceedsPermits):
		obs.AcquireRejected(AcquireRejectedEvent{AcquireEvent: ev, Reason: RejectWeightExceedsPermits})
		stop.Result = ResultError
	case errors.Is(err, ErrTimeout):
		stop.Result = ResultTimedOut
	default:
		stop.Result = ResultError
	}
	obs.AcquireStop(stop)
	return g, err
}
