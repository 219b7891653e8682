package server

import (
	"context"

	"google.golang.org/grpc"

	"github.com/grackle-coord/grackle/client"
	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
	"github.com/grackle-coord/grackle/rpc"
	"github.com/grackle-coord/grackle/watch"
	"github.com/grackle-coord/grackle/webui"
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

// uiBackend is the web view's view of the API: a Go client of this node
// (it follows the leader like any client), made on the first page load.
// It carries no token of its own: each page request passes the browser's.
func (s *Server) uiBackend(ctx context.Context) (webui.Backend, error) {
	cfg := client.Config{Endpoints: []string{s.GRPCAddr()}, Logger: s.log.Named("webui")}
	if s.sec.api != nil {
		cfg.DialOptions = []grpc.DialOption{grpc.WithTransportCredentials(s.sec.peerDialCreds())}
	}
	c, err := client.New(ctx, cfg)
	if err != nil {
		return nil, err
	}
	s.uiClient.Store(c)
	return c, nil
}
