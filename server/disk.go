package server

import (
	"context"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// diskFullUnary says "the disk is full" in every failed call's message
// while this node's last write failed for lack of space: the code and
// details stay (a leader that cannot append still answers Unavailable, and
// clients retry elsewhere), but the reason is no longer "no leader".
func (s *Server) diskFullUnary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	resp, err := handler(ctx, req)
	return resp, s.withDiskFull(err)
}

func (s *Server) diskFullStream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	return s.withDiskFull(handler(srv, ss))
}

func (s *Server) withDiskFull(err error) error {
	if err == nil {
		return nil
	}
	full := s.Node.DiskFull()
	if full == nil {
		return err
	}
	st, ok := status.FromError(err)
	if !ok || st.Code() == codes.OK || st.Code() == codes.InvalidArgument || st.Code() == codes.NotFound {
		return err
	}
	p := st.Proto()
	p.Message = fmt.Sprintf("node %s: %v; %s", s.cfg.NodeID, full, p.Message)
	return status.FromProto(p).Err()
}
