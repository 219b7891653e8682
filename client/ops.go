package client

import (
	"context"

	"google.golang.org/grpc"

	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
)

// GetNodeInfo calls ClusterService.GetNodeInfo on the node the client
// picks (the leader when known): that node answers about itself.
// Retried on any Unavailable.
func (c *Client) GetNodeInfo(ctx context.Context, in *pb.GetNodeInfoRequest, opts ...grpc.CallOption) (*pb.GetNodeInfoResponse, error) {
	return callCluster(c, ctx, retryAlways, in, opts, pb.ClusterServiceClient.GetNodeInfo)
}

// SaveSnapshot opens ClusterService.SaveSnapshot (any node relays the
// leader's stream). Opening is retried on any Unavailable until the first
// message has arrived; the stream returned starts with it. A stream that
// breaks later is not reopened: the caller saves again.
func (c *Client) SaveSnapshot(ctx context.Context, in *pb.SaveSnapshotRequest, opts ...grpc.CallOption) (grpc.ServerStreamingClient[pb.SaveSnapshotResponse], error) {
	return openPrimed(c, ctx, opts, func(ctx context.Context, cc grpc.ClientConnInterface, o []grpc.CallOption) (grpc.ServerStreamingClient[pb.SaveSnapshotResponse], error) {
		return pb.NewClusterServiceClient(cc).SaveSnapshot(ctx, in, o...)
	})
}

// openPrimed opens a server stream, retrying on any Unavailable until its
// first message has arrived (so a node that does not lead, or a leader
// change while opening, costs a retry and not an error); the stream it
// returns replays that message first.
func openPrimed[T any](c *Client, ctx context.Context, opts []grpc.CallOption,
	open func(context.Context, grpc.ClientConnInterface, []grpc.CallOption) (grpc.ServerStreamingClient[T], error)) (grpc.ServerStreamingClient[T], error) {
	var (
		st    grpc.ServerStreamingClient[T]
		first *T
	)
	// Watches follow the leader (a follower would only relay them).
	err := c.invoke(toLeader(ctx), retryAlways, opts, func(ctx context.Context, cc grpc.ClientConnInterface, o []grpc.CallOption) error {
		s, err := open(ctx, cc, o)
		if err != nil {
			return err
		}
		m, err := s.Recv()
		if err != nil {
			return err
		}
		st, first = s, m
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &primedStream[T]{ServerStreamingClient: st, first: first}, nil
}

// primedStream replays the message received while opening the stream.
type primedStream[T any] struct {
	grpc.ServerStreamingClient[T]
	first *T
}

func (p *primedStream[T]) Recv() (*T, error) {
	if m := p.first; m != nil {
		p.first = nil
		return m, nil
	}
	return p.ServerStreamingClient.Recv()
}
