package server

import (
	"context"

	"google.golang.org/grpc"

	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
	"github.com/grackle-coord/grackle/rpc"
	"github.com/grackle-coord/grackle/watch"
)

// grackleAPI is the GrackleService of a node: the rpc package's calls,
// with the queue-visibility calls served by the watch package.
type grackleAPI struct {
	*rpc.Service
	watch *watch.Service
}

func (a grackleAPI) ListSemaphoreWaiters(ctx context.Context, r *pb.ListSemaphoreWaitersRequest) (*pb.ListSemaphoreWaitersResponse, error) {
	return a.watch.ListSemaphoreWaiters(ctx, r)
}

func (a grackleAPI) WatchSemaphore(r *pb.WatchSemaphoreRequest, st grpc.ServerStreamingServer[pb.WatchSemaphoreResponse]) error {
	return a.watch.WatchSemaphore(r, st)
}
