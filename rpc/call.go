package rpc

import (
	"context"
	"strconv"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/grackle-coord/grackle/fsm"
	"github.com/grackle-coord/grackle/internal/fault"
	"github.com/grackle-coord/grackle/leader"
	fsmpb "github.com/grackle-coord/grackle/proto/grackle/fsm/v1"
	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
)

// One generic helper per call shape. Every handler: validate; then one of
// these, which runs the call on this node's term when it leads, or
// forwards it to the leader.

// RaftIndexKey is the response header that carries a write's Raft index
// (like etcd's response header revision: the commit position of the write,
// for clients that order events: benchmarks, checkers). A forwarding
// follower relays it.
const RaftIndexKey = "grackle-raft-index"

// remote is the forwarded form of a call: the same RPC on a connection to
// the leader.
type remote[Resp any] func(context.Context, grpc.ClientConnInterface) (Resp, error)

// grackleRPC makes the remote form of a GrackleService method.
func grackleRPC[Req, Resp any](r Req, m func(pb.GrackleServiceClient, context.Context, Req, ...grpc.CallOption) (Resp, error)) remote[Resp] {
	return func(ctx context.Context, cc grpc.ClientConnInterface) (Resp, error) {
		return m(pb.NewGrackleServiceClient(cc), ctx, r)
	}
}

// clusterRPC makes the remote form of a ClusterService method.
func clusterRPC[Req, Resp any](r Req, m func(pb.ClusterServiceClient, context.Context, Req, ...grpc.CallOption) (Resp, error)) remote[Resp] {
	return func(ctx context.Context, cc grpc.ClientConnInterface) (Resp, error) {
		return m(pb.NewClusterServiceClient(cc), ctx, r)
	}
}

// serve runs local on this node's ready term, or the remote form of the
// call on the leader.
func serve[Resp any](s *Service, ctx context.Context, fwd remote[Resp], local func(*leader.Term) (Resp, error)) (Resp, error) {
	var zero Resp
	if t := s.lead.Term(); t != nil {
		if err := t.Ready(ctx); err != nil {
			return zero, s.toStatus(ctx, err)
		}
		if s.cfg.Authorize != nil {
			if err := s.cfg.Authorize(ctx); err != nil {
				return zero, err
			}
		}
		out, err := local(t)
		if err != nil {
			return zero, s.toStatus(ctx, err)
		}
		return out, nil
	}
	var out Resp
	err := s.fwd.forward(ctx, func(ctx context.Context, cc grpc.ClientConnInterface) error {
		r, err := fwd(ctx, cc)
		out = r
		return err
	})
	if err != nil {
		return zero, s.toStatus(ctx, err)
	}
	return out, nil
}

// applied turns a term operation's result into a response: the Raft index
// goes into the response header, an FSM rejection becomes the error.
func applied[Resp any](ctx context.Context, res *fsm.Result, err error, build func(*fsm.Result) Resp) (Resp, error) {
	var zero Resp
	if err != nil {
		return zero, err
	}
	setIndex(ctx, res.Index)
	if res.Err != nil {
		return zero, res.Err
	}
	return build(res), nil
}

func setIndex(ctx context.Context, index uint64) {
	if index > 0 {
		// RaftIndexKey is lower case already: metadata.Pairs would lower it
		// again, in a copy, on every write. SendHeader, not SetHeader: the
		// header is the call's only one, and SetHeader would merge it into
		// the stream's (an empty map) as a second map copy (metadata.Join),
		// 4-5 % of the bytes a leader allocates per write; a unary
		// response's header goes out just before its message either way.
		_ = grpc.SendHeader(ctx, metadata.MD{RaftIndexKey: {strconv.FormatUint(index, 10)}})
	}
}

// write: one command, no waiter hand-off.
func write[Resp any](s *Service, ctx context.Context, fwd remote[Resp], cmd *fsmpb.Command, build func(*fsm.Result) Resp) (Resp, error) {
	return serve(s, ctx, fwd, func(t *leader.Term) (Resp, error) {
		res, err := t.Write(ctx, cmd)
		return applied(ctx, res, err, build)
	})
}

// read: a linearizable read at the leader's `now`: of the leader's state
// machine on the leader, of this node's own once it has applied the
// leader's read index on a follower (followerread.go).
func read[Resp any](s *Service, ctx context.Context, fwd remote[Resp], local func(now int64) (Resp, error)) (Resp, error) {
	if fault.On("stale-read") {
		out, err := local(time.Now().UnixNano()) // broken on purpose (faultinject builds only)
		return out, s.toStatus(ctx, err)
	}
	if s.lead.Term() == nil {
		if out, served, err := followerRead(s, ctx, local); served {
			return out, err
		}
		// The leader does not serve read indexes: forward the read (serve).
	}
	return serve(s, ctx, fwd, func(t *leader.Term) (Resp, error) {
		now, err := t.Linearize(ctx)
		if err != nil {
			var zero Resp
			return zero, err
		}
		return local(now)
	})
}
