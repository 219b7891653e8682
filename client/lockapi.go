package client

// The lock RPCs of GrackleService, one method each (api.go has the rest).

import (
	"context"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
)

// CreateLockLease calls GrackleService.CreateLockLease on the leader.
// Not retried unless the error proves it never reached the log (a lost
// answer would leave an orphan lease, which expires after its TTL).
func (c *Client) CreateLockLease(ctx context.Context, in *pb.CreateLockLeaseRequest, opts ...grpc.CallOption) (*pb.CreateLockLeaseResponse, error) {
	return call(c, ctx, retryIfNotSent, in, opts, pb.GrackleServiceClient.CreateLockLease)
}

// GetLockLease calls GrackleService.GetLockLease on the leader.
// Retried on any Unavailable.
func (c *Client) GetLockLease(ctx context.Context, in *pb.GetLockLeaseRequest, opts ...grpc.CallOption) (*pb.GetLockLeaseResponse, error) {
	return call(c, ctx, retryAlways, in, opts, pb.GrackleServiceClient.GetLockLease)
}

// RefreshLockLease calls GrackleService.RefreshLockLease on the leader.
// Retried on any Unavailable.
func (c *Client) RefreshLockLease(ctx context.Context, in *pb.RefreshLockLeaseRequest, opts ...grpc.CallOption) (*pb.RefreshLockLeaseResponse, error) {
	return call(c, ctx, retryAlways, in, opts, pb.GrackleServiceClient.RefreshLockLease)
}

// RevokeLockLease calls GrackleService.RevokeLockLease on the leader.
// Retried on any Unavailable. A retry after an attempt that did apply
// answers NotFound.
func (c *Client) RevokeLockLease(ctx context.Context, in *pb.RevokeLockLeaseRequest, opts ...grpc.CallOption) (*pb.RevokeLockLeaseResponse, error) {
	return call(c, ctx, retryAlways, in, opts, pb.GrackleServiceClient.RevokeLockLease)
}

// ListLockLeases calls GrackleService.ListLockLeases on the leader.
// Retried on any Unavailable.
func (c *Client) ListLockLeases(ctx context.Context, in *pb.ListLockLeasesRequest, opts ...grpc.CallOption) (*pb.ListLockLeasesResponse, error) {
	return call(c, ctx, retryAlways, in, opts, pb.GrackleServiceClient.ListLockLeases)
}

// AcquireLock calls GrackleService.AcquireLock on the leader. Retried on
// any Unavailable (a re-acquire under the same lease is idempotent); a
// retry asks only for what is left of the first attempt's timeout.
func (c *Client) AcquireLock(ctx context.Context, in *pb.AcquireLockRequest, opts ...grpc.CallOption) (*pb.AcquireLockResponse, error) {
	start, wait := time.Now(), time.Duration(in.GetTimeoutSeconds())*time.Second
	return call(c, waitingIf(ctx, wait > 0), retryAlways, in, opts, func(api pb.GrackleServiceClient, ctx context.Context, in *pb.AcquireLockRequest, o ...grpc.CallOption) (*pb.AcquireLockResponse, error) {
		if left, ok := remaining(start, wait); ok {
			req := proto.Clone(in).(*pb.AcquireLockRequest)
			req.TimeoutSeconds = left
			in = req
		}
		return api.AcquireLock(ctx, in, o...)
	})
}

// ReleaseLock calls GrackleService.ReleaseLock on the leader.
// Retried on any Unavailable (releasing what is not held changes nothing).
func (c *Client) ReleaseLock(ctx context.Context, in *pb.ReleaseLockRequest, opts ...grpc.CallOption) (*pb.ReleaseLockResponse, error) {
	return call(c, ctx, retryAlways, in, opts, pb.GrackleServiceClient.ReleaseLock)
}

// GetLock calls GrackleService.GetLock on the leader.
// Retried on any Unavailable.
func (c *Client) GetLock(ctx context.Context, in *pb.GetLockRequest, opts ...grpc.CallOption) (*pb.GetLockResponse, error) {
	return call(c, ctx, retryAlways, in, opts, pb.GrackleServiceClient.GetLock)
}

// ListLocks calls GrackleService.ListLocks on the leader.
// Retried on any Unavailable.
func (c *Client) ListLocks(ctx context.Context, in *pb.ListLocksRequest, opts ...grpc.CallOption) (*pb.ListLocksResponse, error) {
	return call(c, ctx, retryAlways, in, opts, pb.GrackleServiceClient.ListLocks)
}

// DeleteLock calls GrackleService.DeleteLock on the leader.
// Retried on any Unavailable (deleting an unheld lock is not an error).
func (c *Client) DeleteLock(ctx context.Context, in *pb.DeleteLockRequest, opts ...grpc.CallOption) (*pb.DeleteLockResponse, error) {
	return call(c, ctx, retryAlways, in, opts, pb.GrackleServiceClient.DeleteLock)
}

// ListLockWaiters calls GrackleService.ListLockWaiters on the leader (the
// queue is leader memory). Retried on any Unavailable.
func (c *Client) ListLockWaiters(ctx context.Context, in *pb.ListLockWaitersRequest, opts ...grpc.CallOption) (*pb.ListLockWaitersResponse, error) {
	return call(c, ctx, retryAlways, in, opts, pb.GrackleServiceClient.ListLockWaiters)
}

// WatchLock opens GrackleService.WatchLock on the leader; opening is
// retried on any Unavailable until the first message (the full state) has
// arrived. A stream that ends later is not reopened.
func (c *Client) WatchLock(ctx context.Context, in *pb.WatchLockRequest, opts ...grpc.CallOption) (grpc.ServerStreamingClient[pb.WatchLockResponse], error) {
	return openPrimed(c, ctx, opts, func(ctx context.Context, cc grpc.ClientConnInterface, o []grpc.CallOption) (grpc.ServerStreamingClient[pb.WatchLockResponse], error) {
		return pb.NewGrackleServiceClient(cc).WatchLock(ctx, in, o...)
	})
}
