package rpc

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/grackle-coord/grackle/apierr"
	"github.com/grackle-coord/grackle/fsm"
	"github.com/grackle-coord/grackle/leader"
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
	st := status.New(c, e.Msg)
	if e.Reason != "" {
		st = apierr.WithMetadata(st, e.Reason, e.Meta)
	}
	// An error about one request field names it (apierr.FieldOf).
	return apierr.WithField(st, e.Field, "").Err()
}

// toStatus converts any error of a handler's work into a gRPC status: FSM
// rejections, the leader package's errors (with this node's view of the
// leader added), and statuses (the leader's, passed on) as they are.
func (s *Service) toStatus(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	var fe *fsm.Error
	if errors.As(err, &fe) {
		return statusFromFSM(fe)
	}
	var le *leader.Error
	if errors.As(err, &le) {
		return s.failure(ctx, le.Code, le.Reason, le.Msg)
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	return status.Error(codes.Internal, err.Error())
}

// failure builds the status of a failure of leader work. Failures about
// leadership (Unavailable, and a deadline or cancellation with a reason)
// name this node and the leader: in the message, in the ErrorInfo
// metadata, and in the LeaderAddressKey trailer. Others carry their
// message as it is, with the reason when there is one.
func (s *Service) failure(ctx context.Context, code codes.Code, reason, msg string) error {
	leadership := code == codes.Unavailable || ((code == codes.DeadlineExceeded || code == codes.Canceled) && reason != "")
	if !leadership {
		if reason == "" {
			return status.Error(code, msg)
		}
		return apierr.New(code, reason, s.cfg.NodeID, apierr.Leader{}, msg)
	}
	id, addr := s.leaderInfo()
	msg = fmt.Sprintf("node %s: %s", s.cfg.NodeID, msg)
	if addr != "" {
		msg += fmt.Sprintf("; the leader is %s at %s", id, addr)
		_ = grpc.SetTrailer(ctx, metadata.Pairs(LeaderAddressKey, addr))
	} else {
		msg += "; no leader is known right now"
	}
	return apierr.New(code, reason, s.cfg.NodeID, apierr.Leader{ID: id, Address: addr}, msg)
}

// fromRaft maps an error of a raft call made by a handler itself
// (membership changes).
func (s *Service) fromRaft(ctx context.Context, err error) error {
	return s.toStatus(ctx, leader.RaftError(err))
}

// statusFromErr converts an error of the FSM's validation and read API.
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
