package client

// One method of Client per RPC of grackle.proto's two services.

import (
	"context"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
)

// call runs one GrackleService RPC on the leader with policy pol.
func call[Req, Resp any](c *Client, ctx context.Context, pol policy, req Req, opts []grpc.CallOption,
	f func(pb.GrackleServiceClient, context.Context, Req, ...grpc.CallOption) (Resp, error)) (Resp, error) {
	var out Resp
	err := c.invoke(ctx, pol, opts, func(ctx context.Context, cc grpc.ClientConnInterface, o []grpc.CallOption) error {
		r, err := f(pb.NewGrackleServiceClient(cc), ctx, req, o...)
		if err == nil {
			out = r
		}
		return err
	})
	return out, err
}

// callCluster runs one ClusterService RPC on the leader with policy pol.
func callCluster[Req, Resp any](c *Client, ctx context.Context, pol policy, req Req, opts []grpc.CallOption,
	f func(pb.ClusterServiceClient, context.Context, Req, ...grpc.CallOption) (Resp, error)) (Resp, error) {
	var out Resp
	err := c.invoke(ctx, pol, opts, func(ctx context.Context, cc grpc.ClientConnInterface, o []grpc.CallOption) error {
		r, err := f(pb.NewClusterServiceClient(cc), ctx, req, o...)
		if err == nil {
			out = r
		}
		return err
	})
	return out, err
}

// CreateNamespace calls GrackleService.CreateNamespace on the leader.
// Not retried unless the error proves it never reached the log.
func (c *Client) CreateNamespace(ctx context.Context, in *pb.CreateNamespaceRequest, opts ...grpc.CallOption) (*pb.CreateNamespaceResponse, error) {
	return call(c, ctx, retryIfNotSent, in, opts, pb.GrackleServiceClient.CreateNamespace)
}

// GetNamespace calls GrackleService.GetNamespace on the leader.
// Retried on any Unavailable.
func (c *Client) GetNamespace(ctx context.Context, in *pb.GetNamespaceRequest, opts ...grpc.CallOption) (*pb.GetNamespaceResponse, error) {
	return call(c, ctx, retryAlways, in, opts, pb.GrackleServiceClient.GetNamespace)
}

// ListNamespaces calls GrackleService.ListNamespaces on the leader.
// Retried on any Unavailable.
func (c *Client) ListNamespaces(ctx context.Context, in *pb.ListNamespacesRequest, opts ...grpc.CallOption) (*pb.ListNamespacesResponse, error) {
	return call(c, ctx, retryAlways, in, opts, pb.GrackleServiceClient.ListNamespaces)
}

// UpdateNamespace calls GrackleService.UpdateNamespace on the leader.
// Retried on any Unavailable. A retry after an attempt that did apply answers InvalidArgument "version mismatch".
func (c *Client) UpdateNamespace(ctx context.Context, in *pb.UpdateNamespaceRequest, opts ...grpc.CallOption) (*pb.UpdateNamespaceResponse, error) {
	return call(c, ctx, retryAlways, in, opts, pb.GrackleServiceClient.UpdateNamespace)
}

// DeleteNamespace calls GrackleService.DeleteNamespace on the leader.
// Retried on any Unavailable.
func (c *Client) DeleteNamespace(ctx context.Context, in *pb.DeleteNamespaceRequest, opts ...grpc.CallOption) (*pb.DeleteNamespaceResponse, error) {
	return call(c, ctx, retryAlways, in, opts, pb.GrackleServiceClient.DeleteNamespace)
}

// CreateSemaphore calls GrackleService.CreateSemaphore on the leader.
// Not retried unless the error proves it never reached the log.
func (c *Client) CreateSemaphore(ctx context.Context, in *pb.CreateSemaphoreRequest, opts ...grpc.CallOption) (*pb.CreateSemaphoreResponse, error) {
	return call(c, ctx, retryIfNotSent, in, opts, pb.GrackleServiceClient.CreateSemaphore)
}

// GetSemaphore calls GrackleService.GetSemaphore on the leader.
// Retried on any Unavailable.
func (c *Client) GetSemaphore(ctx context.Context, in *pb.GetSemaphoreRequest, opts ...grpc.CallOption) (*pb.GetSemaphoreResponse, error) {
	return call(c, ctx, retryAlways, in, opts, pb.GrackleServiceClient.GetSemaphore)
}

// ListSemaphores calls GrackleService.ListSemaphores on the leader.
// Retried on any Unavailable.
func (c *Client) ListSemaphores(ctx context.Context, in *pb.ListSemaphoresRequest, opts ...grpc.CallOption) (*pb.ListSemaphoresResponse, error) {
	return call(c, ctx, retryAlways, in, opts, pb.GrackleServiceClient.ListSemaphores)
}

// UpdateSemaphore calls GrackleService.UpdateSemaphore on the leader.
// Retried on any Unavailable. A retry after an attempt that did apply answers InvalidArgument "version mismatch".
func (c *Client) UpdateSemaphore(ctx context.Context, in *pb.UpdateSemaphoreRequest, opts ...grpc.CallOption) (*pb.UpdateSemaphoreResponse, error) {
	return call(c, ctx, retryAlways, in, opts, pb.GrackleServiceClient.UpdateSemaphore)
}

// DeleteSemaphore calls GrackleService.DeleteSemaphore on the leader.
// Retried on any Unavailable.
func (c *Client) DeleteSemaphore(ctx context.Context, in *pb.DeleteSemaphoreRequest, opts ...grpc.CallOption) (*pb.DeleteSemaphoreResponse, error) {
	return call(c, ctx, retryAlways, in, opts, pb.GrackleServiceClient.DeleteSemaphore)
}

// AcquireSemaphore calls GrackleService.AcquireSemaphore on the leader.
// Retried on any Unavailable (a re-acquire under the same lease is
// idempotent). Semaphore.Acquire instead sizes each call's timeout to what
// remains of the context.
//
// A retry (after a leader change ended the wait) asks only for what is
// left of the first attempt's timeout_seconds, so that the whole call waits
// about as long as asked (rounded up to whole seconds), not that again.
func (c *Client) AcquireSemaphore(ctx context.Context, in *pb.AcquireSemaphoreRequest, opts ...grpc.CallOption) (*pb.AcquireSemaphoreResponse, error) {
	start, wait := time.Now(), time.Duration(in.GetTimeoutSeconds())*time.Second
	return call(c, waitingIf(ctx, wait > 0), retryAlways, in, opts, func(api pb.GrackleServiceClient, ctx context.Context, in *pb.AcquireSemaphoreRequest, o ...grpc.CallOption) (*pb.AcquireSemaphoreResponse, error) {
		if left, ok := remaining(start, wait); ok {
			req := proto.Clone(in).(*pb.AcquireSemaphoreRequest)
			req.TimeoutSeconds = left
			in = req
		}
		return api.AcquireSemaphore(ctx, in, o...)
	})
}

// ReleaseSemaphore calls GrackleService.ReleaseSemaphore on the leader.
// Retried on any Unavailable.
func (c *Client) ReleaseSemaphore(ctx context.Context, in *pb.ReleaseSemaphoreRequest, opts ...grpc.CallOption) (*pb.ReleaseSemaphoreResponse, error) {
	return call(c, ctx, retryAlways, in, opts, pb.GrackleServiceClient.ReleaseSemaphore)
}

// ListSemaphoreHolders calls GrackleService.ListSemaphoreHolders on the leader.
// Retried on any Unavailable.
func (c *Client) ListSemaphoreHolders(ctx context.Context, in *pb.ListSemaphoreHoldersRequest, opts ...grpc.CallOption) (*pb.ListSemaphoreHoldersResponse, error) {
	return call(c, ctx, retryAlways, in, opts, pb.GrackleServiceClient.ListSemaphoreHolders)
}

// CreateSemaphoreLease calls GrackleService.CreateSemaphoreLease on the leader.
// Not retried unless the error proves it never reached the log (a lost answer would leave an orphan lease, which expires after its TTL).
func (c *Client) CreateSemaphoreLease(ctx context.Context, in *pb.CreateSemaphoreLeaseRequest, opts ...grpc.CallOption) (*pb.CreateSemaphoreLeaseResponse, error) {
	return call(c, ctx, retryIfNotSent, in, opts, pb.GrackleServiceClient.CreateSemaphoreLease)
}

// GetSemaphoreLease calls GrackleService.GetSemaphoreLease on the leader.
// Retried on any Unavailable.
func (c *Client) GetSemaphoreLease(ctx context.Context, in *pb.GetSemaphoreLeaseRequest, opts ...grpc.CallOption) (*pb.GetSemaphoreLeaseResponse, error) {
	return call(c, ctx, retryAlways, in, opts, pb.GrackleServiceClient.GetSemaphoreLease)
}

// RefreshSemaphoreLease calls GrackleService.RefreshSemaphoreLease on the leader.
// Retried on any Unavailable.
func (c *Client) RefreshSemaphoreLease(ctx context.Context, in *pb.RefreshSemaphoreLeaseRequest, opts ...grpc.CallOption) (*pb.RefreshSemaphoreLeaseResponse, error) {
	return call(c, ctx, retryAlways, in, opts, pb.GrackleServiceClient.RefreshSemaphoreLease)
}

// RevokeSemaphoreLease calls GrackleService.RevokeSemaphoreLease on the leader.
// Retried on any Unavailable. A retry after an attempt that did apply answers NotFound.
func (c *Client) RevokeSemaphoreLease(ctx context.Context, in *pb.RevokeSemaphoreLeaseRequest, opts ...grpc.CallOption) (*pb.RevokeSemaphoreLeaseResponse, error) {
	return call(c, ctx, retryAlways, in, opts, pb.GrackleServiceClient.RevokeSemaphoreLease)
}

// ListSemaphoreLeases calls GrackleService.ListSemaphoreLeases on the leader.
// Retried on any Unavailable.
func (c *Client) ListSemaphoreLeases(ctx context.Context, in *pb.ListSemaphoreLeasesRequest, opts ...grpc.CallOption) (*pb.ListSemaphoreLeasesResponse, error) {
	return call(c, ctx, retryAlways, in, opts, pb.GrackleServiceClient.ListSemaphoreLeases)
}

// GetClusterStatus calls ClusterService.GetClusterStatus on the leader.
// Retried on any Unavailable. It is sent to the leader, whose view is the freshest.
func (c *Client) GetClusterStatus(ctx context.Context, in *pb.GetClusterStatusRequest, opts ...grpc.CallOption) (*pb.GetClusterStatusResponse, error) {
	return callCluster(c, ctx, retryAlways, in, opts, pb.ClusterServiceClient.GetClusterStatus)
}

// AddMember calls ClusterService.AddMember on the leader.
// Not retried unless the error proves it never reached the leader.
func (c *Client) AddMember(ctx context.Context, in *pb.AddMemberRequest, opts ...grpc.CallOption) (*pb.AddMemberResponse, error) {
	return callCluster(c, ctx, retryIfNotSent, in, opts, pb.ClusterServiceClient.AddMember)
}

// RemoveMember calls ClusterService.RemoveMember on the leader.
// Not retried unless the error proves it never reached the leader.
func (c *Client) RemoveMember(ctx context.Context, in *pb.RemoveMemberRequest, opts ...grpc.CallOption) (*pb.RemoveMemberResponse, error) {
	return callCluster(c, ctx, retryIfNotSent, in, opts, pb.ClusterServiceClient.RemoveMember)
}

// TransferLeadership calls ClusterService.TransferLeadership on the leader.
// Not retried unless the error proves it never reached the leader. On
// success the client forgets the leader it knew and finds the new one on
// the next call.
func (c *Client) TransferLeadership(ctx context.Context, in *pb.TransferLeadershipRequest, opts ...grpc.CallOption) (*pb.TransferLeadershipResponse, error) {
	out, err := callCluster(c, ctx, retryIfNotSent, in, opts, pb.ClusterServiceClient.TransferLeadership)
	if err == nil {
		c.forgetLeader()
	}
	return out, err
}
