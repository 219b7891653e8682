package e2e

import (
	"context"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
)

// Any is a minimal multi-endpoint caller for tests: it tries each
// endpoint in turn and retries Unavailable (no leader, node down) until
// the context ends. Only idempotent calls may go through it.
type Any struct {
	Conns []*grpc.ClientConn
	next  int
}

// Do runs fn against some node until it returns something other than
// Unavailable/DeadlineExceeded-per-try, or ctx ends.
func (a *Any) Do(ctx context.Context, fn func(ctx context.Context, c pb.GrackleServiceClient) error) error {
	var err error
	for ctx.Err() == nil {
		cc := a.Conns[a.next%len(a.Conns)]
		tctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		err = fn(tctx, pb.NewGrackleServiceClient(cc))
		cancel()
		switch status.Code(err) {
		case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled:
			a.next++
			time.Sleep(20 * time.Millisecond)
			continue
		}
		return err
	}
	if err == nil {
		err = ctx.Err()
	}
	return err
}
