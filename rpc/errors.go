package rpc

import (
	"context"
	"errors"
	"fmt"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/grackle-coord/grackle/apierr"
	"github.com/grackle-coord/grackle/fsm"
)

// LeaderAddressKey is the trailer key that carries the leader's gRPC
// address on an Unavailable error, when this node knows it (for tools such
// as grpcurl; programs read the ErrorInfo detail, see package apierr).
const LeaderAddressKey = "grackle-leader-address"

// statusFromFSM maps the FSM's typed errors one-to-one onto gRPC codes.
func statusFromFSM(e *fsm.Error) error {
	if e == nil {
		return nil
	}
	var c codes.Code
	switch e.Code {
	case fsm.CodeInvalidArgument:
		c = codes.InvalidArgument
	case fsm.CodeNotFound:
		c = codes.NotFound
	case fsm.CodeAlreadyExists:
		c = codes.AlreadyExists
	case fsm.CodeFailedPrecondition:
		c = codes.FailedPrecondition
	case fsm.CodeResourceExhausted:
		c = codes.ResourceExhausted
	default:
		c = codes.Internal
	}
	if e.Reason != "" {
		return apierr.New(c, e.Reason, "", apierr.Leader{}, e.Msg)
	}
	return status.Error(c, e.Msg)
}

// statusFromErr converts an error of the FSM's read API.
func statusFromErr(err error) error {
	var fe *fsm.Error
	if errors.As(err, &fe) {
		return statusFromFSM(fe)
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	return status.Error(codes.Internal, err.Error())
}

// unavailable builds a retryable Unavailable error with reason (see
// package apierr). It names the leader when known: in the ErrorInfo
// metadata, in the message, and in the LeaderAddressKey trailer.
func (s *Service) unavailable(ctx context.Context, reason, why string) error {
	return s.failure(ctx, codes.Unavailable, reason, why)
}

func (s *Service) failure(ctx context.Context, code codes.Code, reason, why string) error {
	id, addr := s.leaderInfo()
	msg := fmt.Sprintf("node %s: %s", s.cfg.NodeID, why)
	if addr != "" {
		msg += fmt.Sprintf("; the leader is %s at %s", id, addr)
		_ = grpc.SetTrailer(ctx, metadata.Pairs(LeaderAddressKey, addr))
	} else {
		msg += "; no leader is known right now"
	}
	return apierr.New(code, reason, s.cfg.NodeID, apierr.Leader{ID: id, Address: addr}, msg)
}

// fromRaft maps an error of raft.Apply/VerifyLeader/Barrier (or of the
// caller's context while one was pending) after the command was handed to
// raft: unless raft proves it refused the entry, the outcome is unknown.
func (s *Service) fromRaft(ctx context.Context, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipTransferInProgress):
		// raft refused the entry before appending it.
		return s.unavailable(ctx, apierr.NotLeader, "not the leader")
	case errors.Is(err, raft.ErrEnqueueTimeout):
		return s.unavailable(ctx, apierr.NotSent, "raft is overloaded: the write was not enqueued in time")
	case errors.Is(err, raft.ErrLeadershipLost):
		return s.unavailable(ctx, apierr.OutcomeUnknown, "leadership lost before the write committed (its outcome is unknown)")
	case errors.Is(err, raft.ErrRaftShutdown):
		return s.unavailable(ctx, apierr.OutcomeUnknown, "shutting down")
	case errors.Is(err, context.DeadlineExceeded):
		return s.failure(ctx, codes.DeadlineExceeded, apierr.OutcomeUnknown, "deadline exceeded")
	case errors.Is(err, context.Canceled):
		return s.failure(ctx, codes.Canceled, apierr.OutcomeUnknown, "canceled")
	}
	return s.unavailable(ctx, apierr.OutcomeUnknown, err.Error())
}

// notProposed maps the caller's context error when nothing was proposed.
func (s *Service) notProposed(ctx context.Context, err error) error {
	code := codes.DeadlineExceeded
	if errors.Is(err, context.Canceled) {
		code = codes.Canceled
	}
	return s.failure(ctx, code, apierr.NotSent, err.Error())
}
