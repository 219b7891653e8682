package client

import (
	"context"

	"google.golang.org/grpc"

	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
)

var _ pb.ACLServiceClient = (*Client)(nil)

// callACL runs one ACLService RPC on the leader with policy pol.
func callACL[Req, Resp any](c *Client, ctx context.Context, pol policy, req Req, opts []grpc.CallOption,
	f func(pb.ACLServiceClient, context.Context, Req, ...grpc.CallOption) (Resp, error)) (Resp, error) {
	var out Resp
	err := c.invoke(ctx, pol, opts, func(ctx context.Context, cc grpc.ClientConnInterface, o []grpc.CallOption) error {
		r, err := f(pb.NewACLServiceClient(cc), ctx, req, o...)
		if err == nil {
			out = r
		}
		return err
	})
	return out, err
}

// Bootstrap calls ACLService.Bootstrap on the leader. Not retried unless
// the error proves it never reached the log (a retry of one that applied
// would answer FailedPrecondition, and its secret would be lost).
func (c *Client) Bootstrap(ctx context.Context, in *pb.BootstrapRequest, opts ...grpc.CallOption) (*pb.BootstrapResponse, error) {
	return callACL(c, ctx, retryIfNotSent, in, opts, pb.ACLServiceClient.Bootstrap)
}

// CreateToken calls ACLService.CreateToken on the leader. Not retried
// unless the error proves it never reached the log.
func (c *Client) CreateToken(ctx context.Context, in *pb.CreateTokenRequest, opts ...grpc.CallOption) (*pb.CreateTokenResponse, error) {
	return callACL(c, ctx, retryIfNotSent, in, opts, pb.ACLServiceClient.CreateToken)
}

// ListTokens calls ACLService.ListTokens on the leader. Retried on any
// Unavailable.
func (c *Client) ListTokens(ctx context.Context, in *pb.ListTokensRequest, opts ...grpc.CallOption) (*pb.ListTokensResponse, error) {
	return callACL(c, ctx, retryAlways, in, opts, pb.ACLServiceClient.ListTokens)
}

// RevokeToken calls ACLService.RevokeToken on the leader. Retried on any
// Unavailable (a retry after one that applied answers NotFound).
func (c *Client) RevokeToken(ctx context.Context, in *pb.RevokeTokenRequest, opts ...grpc.CallOption) (*pb.RevokeTokenResponse, error) {
	return callACL(c, ctx, retryAlways, in, opts, pb.ACLServiceClient.RevokeToken)
}
