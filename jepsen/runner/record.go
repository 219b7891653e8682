package runner

import (
	"context"
	"errors"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grackle-coord/grackle/apierr"
	"github.com/grackle-coord/grackle/jepsen/history"
)

// recorder collects operations with monotonic times since the run's start.
type recorder struct {
	t0  time.Time
	mu  sync.Mutex
	ops []history.Op
	id  int
}

func (r *recorder) since() time.Duration { return time.Since(r.t0) }

// begin stamps an op's invoke time and returns it for completion.
func (r *recorder) begin(op history.Op) *history.Op {
	op.Invoke = r.since()
	return &op
}

// end stamps the completion and stores the op. Indeterminate ops keep an
// open end (Complete 0).
func (r *recorder) end(op *history.Op, err error) {
	now := r.since()
	op.Outcome = classify(op.Kind, err)
	if err != nil {
		st := status.Convert(err)
		op.Error = st.Code().String() + ": " + st.Message()
		op.Code = st.Code().String()
		op.Reason = reasonOf(st)
	}
	if op.Outcome != history.Info {
		op.Complete = now
	}
	r.mu.Lock()
	r.id++
	op.ID = r.id
	r.ops = append(r.ops, *op)
	r.mu.Unlock()
}

// reasonOf is the ErrorInfo reason of a failed call (every Grackle reason,
// access and TLS refusals included, is in apierr.Domain).
func reasonOf(st *status.Status) string {
	return apierr.ReasonOf(st.Err())
}

// classify decides whether a failed call certainly did not happen (Fail)
// or might have (Info), from the gRPC code and the apierr reason. Reads
// change nothing, so a failed read is Fail.
func classify(kind string, err error) string {
	if err == nil {
		return history.OK
	}
	switch kind {
	case history.GetSemaphore, history.ListHolders, history.ClusterStatus, history.ListWaiters,
		history.GetLock, history.ListLocks, history.LockWaiters,
		history.WGGet, history.WGWait, history.WGJobs, history.BarrierGet, history.BarrierWait, history.BarrierParticipants:
		return history.Fail
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return history.Info
	}
	switch status.Code(err) {
	case codes.InvalidArgument, codes.NotFound, codes.AlreadyExists, codes.FailedPrecondition,
		codes.ResourceExhausted, codes.Aborted:
		return history.Fail
	case codes.Unavailable:
		// Only a reason proves the call never reached the log: the node's
		// (not the leader, not ready, could not forward, not enqueued) or
		// the connection's own (no transport ever carried the request).
		if apierr.ProvesNotSent(err) {
			return history.Fail
		}
	}
	return history.Info
}
