package client

// The wait-group and barrier RPCs of GrackleService, one method each
// (api.go has the semaphore ones, lockapi.go the lock ones).

import (
	"context"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
)

// CreateWaitGroup calls GrackleService.CreateWaitGroup on the leader. Not
// retried unless the error proves it never reached the log (a retry of one
// that applied would answer AlreadyExists).
func (c *Client) CreateWaitGroup(ctx context.Context, in *pb.CreateWaitGroupRequest, opts ...grpc.CallOption) (*pb.CreateWaitGroupResponse, error) {
	return call(c, ctx, retryIfNotSent, in, opts, pb.GrackleServiceClient.CreateWaitGroup)
}

// GetWaitGroup calls GrackleService.GetWaitGroup. Retried on any Unavailable.
func (c *Client) GetWaitGroup(ctx context.Context, in *pb.GetWaitGroupRequest, opts ...grpc.CallOption) (*pb.GetWaitGroupResponse, error) {
	return call(c, ctx, retryAlways, in, opts, pb.GrackleServiceClient.GetWaitGroup)
}

// ListWaitGroups calls GrackleService.ListWaitGroups. Retried on any Unavailable.
func (c *Client) ListWaitGroups(ctx context.Context, in *pb.ListWaitGroupsRequest, opts ...grpc.CallOption) (*pb.ListWaitGroupsResponse, error) {
	return call(c, ctx, retryAlways, in, opts, pb.GrackleServiceClient.ListWaitGroups)
}

// UpdateWaitGroup calls GrackleService.UpdateWaitGroup on the leader. Not
// retried unless it never reached the log (a retry of one that applied
// would answer "version mismatch").
func (c *Client) UpdateWaitGroup(ctx context.Context, in *pb.UpdateWaitGroupRequest, opts ...grpc.CallOption) (*pb.UpdateWaitGroupResponse, error) {
	return call(c, ctx, retryIfNotSent, in, opts, pb.GrackleServiceClient.UpdateWaitGroup)
}

// DeleteWaitGroup calls GrackleService.DeleteWaitGroup on the leader.
// Retried on any Unavailable (deleting a missing group is not an error).
func (c *Client) DeleteWaitGroup(ctx context.Context, in *pb.DeleteWaitGroupRequest, opts ...grpc.CallOption) (*pb.DeleteWaitGroupResponse, error) {
	return call(c, ctx, retryAlways, in, opts, pb.GrackleServiceClient.DeleteWaitGroup)
}

// CompleteJobsFromWaitGroup calls GrackleService.CompleteJobsFromWaitGroup
// on the leader. Retried on any Unavailable: completion is idempotent per
// job_id, so a retried batch never counts twice.
func (c *Client) CompleteJobsFromWaitGroup(ctx context.Context, in *pb.CompleteJobsFromWaitGroupRequest, opts ...grpc.CallOption) (*pb.CompleteJobsFromWaitGroupResponse, error) {
	return call(c, ctx, retryAlways, in, opts, pb.GrackleServiceClient.CompleteJobsFromWaitGroup)
}

// ListWaitGroupCompletedJobs calls GrackleService.ListWaitGroupCompletedJobs.
// Retried on any Unavailable.
func (c *Client) ListWaitGroupCompletedJobs(ctx context.Context, in *pb.ListWaitGroupCompletedJobsRequest, opts ...grpc.CallOption) (*pb.ListWaitGroupCompletedJobsResponse, error) {
	return call(c, ctx, retryAlways, in, opts, pb.GrackleServiceClient.ListWaitGroupCompletedJobs)
}

// WaitForWaitGroup calls GrackleService.WaitForWaitGroup on the leader.
// Retried on any Unavailable (a wait is a read; a leader change ends it
// and the retry waits on the new leader), asking only for what is left of
// the first attempt's timeout.
func (c *Client) WaitForWaitGroup(ctx context.Context, in *pb.WaitForWaitGroupRequest, opts ...grpc.CallOption) (*pb.WaitForWaitGroupResponse, error) {
	start, wait := time.Now(), time.Duration(in.GetTimeoutSeconds())*time.Second
	return call(c, waitingIf(ctx, wait > 0), retryAlways, in, opts, func(api pb.GrackleServiceClient, ctx context.Context, in *pb.WaitForWaitGroupRequest, o ...grpc.CallOption) (*pb.WaitForWaitGroupResponse, error) {
		if left, ok := remaining(start, wait); ok {
			req := proto.Clone(in).(*pb.WaitForWaitGroupRequest)
			req.TimeoutSeconds = left
			in = req
		}
		return api.WaitForWaitGroup(ctx, in, o...)
	})
}

// CreateBarrier calls GrackleService.CreateBarrier on the leader. Not
// retried unless it never reached the log.
func (c *Client) CreateBarrier(ctx context.Context, in *pb.CreateBarrierRequest, opts ...grpc.CallOption) (*pb.CreateBarrierResponse, error) {
	return call(c, ctx, retryIfNotSent, in, opts, pb.GrackleServiceClient.CreateBarrier)
}

// GetBarrier calls GrackleService.GetBarrier. Retried on any Unavailable.
func (c *Client) GetBarrier(ctx context.Context, in *pb.GetBarrierRequest, opts ...grpc.CallOption) (*pb.GetBarrierResponse, error) {
	return call(c, ctx, retryAlways, in, opts, pb.GrackleServiceClient.GetBarrier)
}

// ListBarriers calls GrackleService.ListBarriers. Retried on any Unavailable.
func (c *Client) ListBarriers(ctx context.Context, in *pb.ListBarriersRequest, opts ...grpc.CallOption) (*pb.ListBarriersResponse, error) {
	return call(c, ctx, retryAlways, in, opts, pb.GrackleServiceClient.ListBarriers)
}

// UpdateBarrier calls GrackleService.UpdateBarrier on the leader. Not
// retried unless it never reached the log.
func (c *Client) UpdateBarrier(ctx context.Context, in *pb.UpdateBarrierRequest, opts ...grpc.CallOption) (*pb.UpdateBarrierResponse, error) {
	return call(c, ctx, retryIfNotSent, in, opts, pb.GrackleServiceClient.UpdateBarrier)
}

// DeleteBarrier calls GrackleService.DeleteBarrier on the leader. Retried
// on any Unavailable.
func (c *Client) DeleteBarrier(ctx context.Context, in *pb.DeleteBarrierRequest, opts ...grpc.CallOption) (*pb.DeleteBarrierResponse, error) {
	return call(c, ctx, retryAlways, in, opts, pb.GrackleServiceClient.DeleteBarrier)
}

// ArriveAtBarrier calls GrackleService.ArriveAtBarrier on the leader.
// Retried on any Unavailable: an arrival counts once per (generation,
// process), and a retry after the trip answers all_arrived.
func (c *Client) ArriveAtBarrier(ctx context.Context, in *pb.ArriveAtBarrierRequest, opts ...grpc.CallOption) (*pb.ArriveAtBarrierResponse, error) {
	return call(c, ctx, retryAlways, in, opts, pb.GrackleServiceClient.ArriveAtBarrier)
}

// WaitAtBarrier calls GrackleService.WaitAtBarrier on the leader. Retried
// on any Unavailable with what is left of the first attempt's timeout.
func (c *Client) WaitAtBarrier(ctx context.Context, in *pb.WaitAtBarrierRequest, opts ...grpc.CallOption) (*pb.WaitAtBarrierResponse, error) {
	start, wait := time.Now(), time.Duration(in.GetTimeoutSeconds())*time.Second
	return call(c, waitingIf(ctx, wait > 0), retryAlways, in, opts, func(api pb.GrackleServiceClient, ctx context.Context, in *pb.WaitAtBarrierRequest, o ...grpc.CallOption) (*pb.WaitAtBarrierResponse, error) {
		if left, ok := remaining(start, wait); ok {
			req := proto.Clone(in).(*pb.WaitAtBarrierRequest)
			req.TimeoutSeconds = left
			in = req
		}
		return api.WaitAtBarrier(ctx, in, o...)
	})
}

// ListBarrierParticipants calls GrackleService.ListBarrierParticipants.
// Retried on any Unavailable.
func (c *Client) ListBarrierParticipants(ctx context.Context, in *pb.ListBarrierParticipantsRequest, opts ...grpc.CallOption) (*pb.ListBarrierParticipantsResponse, error) {
	return call(c, ctx, retryAlways, in, opts, pb.GrackleServiceClient.ListBarrierParticipants)
}

// remaining is the whole seconds left of a wait of `wait` that began at
// start, rounded up, once at least a second has passed (ok false before:
// the request goes out unchanged).
func remaining(start time.Time, wait time.Duration) (seconds int64, ok bool) {
	elapsed := time.Since(start)
	if wait <= 0 || elapsed < time.Second {
		return 0, false
	}
	return int64((max(wait-elapsed, 0) + time.Second - 1) / time.Second), true
}
