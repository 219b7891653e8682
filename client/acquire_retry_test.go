package client

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/grackle-coord/grackle/apierr"
	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
)

// waitFake answers the first AcquireSemaphore after holdFirst with an
// Unavailable whose outcome is unknown (a leader that stepped down while
// the call waited), and records each request's timeout_seconds.
type waitFake struct {
	fakeNode
	holdFirst time.Duration
	mu        sync.Mutex
	timeouts  []int64
}

func (f *waitFake) AcquireSemaphore(ctx context.Context, r *pb.AcquireSemaphoreRequest) (*pb.AcquireSemaphoreResponse, error) {
	f.mu.Lock()
	f.timeouts = append(f.timeouts, r.TimeoutSeconds)
	n := len(f.timeouts)
	f.mu.Unlock()
	if n == 1 {
		time.Sleep(f.holdFirst)
		return nil, unavail(apierr.OutcomeUnknown, "", "node n1: leadership lost while the acquire waited")
	}
	return &pb.AcquireSemaphoreResponse{Outcome: pb.AcquireOutcome_ACQUIRE_OUTCOME_TIMED_OUT, Semaphore: &pb.Semaphore{Name: r.SemaphoreName}}, nil
}

// A retried AcquireSemaphore asks only for what is left of the wait: the
// whole call waits about timeout_seconds, not that again after a failover.
func TestAcquireRetryAsksForTheRestOfTheWait(t *testing.T) {
	f := &waitFake{holdFirst: 1200 * time.Millisecond}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	pb.RegisterGrackleServiceServer(s, f)
	pb.RegisterClusterServiceServer(s, f)
	go s.Serve(lis)
	t.Cleanup(s.Stop)
	f.addr = lis.Addr().String()
	f.leader.Store(&f.addr)

	c, err := New(testCtx(t), fastConfig(f.addr))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	resp, err := c.AcquireSemaphore(testCtx(t), &pb.AcquireSemaphoreRequest{NamespaceName: "n", SemaphoreName: "s",
		LeaseId: "ls_00000000000000000000", Weight: 1, TimeoutSeconds: 10})
	if err != nil || resp.Outcome != pb.AcquireOutcome_ACQUIRE_OUTCOME_TIMED_OUT {
		t.Fatalf("%v %v", resp, err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.timeouts) != 2 || f.timeouts[0] != 10 || f.timeouts[1] >= 10 || f.timeouts[1] < 1 {
		t.Fatalf("timeout_seconds per attempt %v: want 10, then less (what was left)", f.timeouts)
	}
}
