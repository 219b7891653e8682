package leader

import (
	"context"
	"errors"
	"fmt"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc/codes"

	"github.com/grackle-coord/grackle/apierr"
)

// Error is a failure of leader work: a gRPC code, an apierr reason and a
// message. The API layer turns it into a status, adding who the leader is
// (this package never sees a gRPC call).
type Error struct {
	Code   codes.Code
	Reason string
	Msg    string
}

func (e *Error) Error() string { return fmt.Sprintf("%s (%s): %s", e.Code, e.Reason, e.Msg) }

func newError(c codes.Code, reason, format string, a ...any) *Error {
	return &Error{Code: c, Reason: reason, Msg: fmt.Sprintf(format, a...)}
}

var (
	errNotLeader      = newError(codes.Unavailable, apierr.NotLeader, "leadership lost")
	errWaitLeadership = newError(codes.Unavailable, apierr.OutcomeUnknown, "leadership lost while waiting")
)

// notProposed is the error of a call whose context ended before anything
// was proposed.
func notProposed(err error) *Error {
	c := codes.DeadlineExceeded
	if errors.Is(err, context.Canceled) {
		c = codes.Canceled
	}
	return newError(c, apierr.NotSent, "%v", err)
}

// fromRaft maps an error of raft.Apply/VerifyLeader/Barrier (or of the
// caller's context while one was pending): unless raft proves it refused
// the entry, the outcome is unknown.
func fromRaft(err error) *Error {
	switch {
	case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipTransferInProgress):
		return newError(codes.Unavailable, apierr.NotLeader, "not the leader")
	case errors.Is(err, raft.ErrEnqueueTimeout):
		return newError(codes.Unavailable, apierr.NotSent, "raft is overloaded: the write was not enqueued in time")
	case errors.Is(err, raft.ErrLeadershipLost):
		return newError(codes.Unavailable, apierr.OutcomeUnknown, "leadership lost before the write committed (its outcome is unknown)")
	case errors.Is(err, raft.ErrRaftShutdown):
		return newError(codes.Unavailable, apierr.OutcomeUnknown, "shutting down")
	case errors.Is(err, context.DeadlineExceeded):
		return newError(codes.DeadlineExceeded, apierr.OutcomeUnknown, "deadline exceeded")
	case errors.Is(err, context.Canceled):
		return newError(codes.Canceled, apierr.OutcomeUnknown, "canceled")
	}
	return newError(codes.Unavailable, apierr.OutcomeUnknown, "%v", err)
}

// RaftError maps an error of a raft call (nil stays nil) for callers
// outside this package that call raft themselves (membership changes).
func RaftError(err error) error {
	if err == nil {
		return nil
	}
	return fromRaft(err)
}
