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

	"github.com/grackle-coord/grackle/fsm"
)

// LeaderAddressKey is the trailer key that carries the leader's gRPC
// address on an Unavailable error, when this node knows it.
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

// unavailable builds the retryable "no leader here" error. It names the
// leader when known, in the message and in a trailer.
func (s *Service) unavailable(ctx context.Context, why string) error {
	id, addr := s.leaderInfo()
	msg := fmt.Sprintf("node %s: %s", s.cfg.NodeID, why)
	if addr != "" {
		msg += fmt.Sprintf("; the leader is %s at %s", id, addr)
		_ = grpc.SetTrailer(ctx, metadata.Pairs(LeaderAddressKey, addr))
	} else {
		msg += "; no leader is known right now"
	}
	return status.Error(codes.Unavailable, msg)
}

// fromRaft maps an error of raft.Apply/VerifyLeader/Barrier.
func (s *Service) fromRaft(ctx context.Context, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipTransferInProgress):
		return s.unavailable(ctx, "not the leader")
	case errors.Is(err, raft.ErrLeadershipLost):
		return s.unavailable(ctx, "leadership lost before the write committed (its outcome is unknown)")
	case errors.Is(err, raft.ErrRaftShutdown):
		return s.unavailable(ctx, "shutting down")
	case errors.Is(err, raft.ErrEnqueueTimeout):
		return status.Error(codes.Unavailable, "raft is overloaded: the write was not enqueued in time")
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, "deadline exceeded")
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, "canceled")
	}
	return status.Error(codes.Unavailable, err.Error())
}
