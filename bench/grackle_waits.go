package bench

import (
	"context"
	"fmt"
	"strconv"
	"time"

	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
)

// The wait-group and barrier calls of the Grackle backend: the generated
// stubs of the RPCs client/waitapi.go wraps, over the backend's
// connections, as every other workload's.

var _ Backend = (*Grackle)(nil)

func (g *Grackle) CreateWaitGroup(ctx context.Context, w int, name string, counter int64) error {
	_, err := g.cl(w).CreateWaitGroup(ctx, &pb.CreateWaitGroupRequest{NamespaceName: g.ns, WaitGroupName: name, Counter: counter})
	return err
}

func (g *Grackle) CompleteJobs(ctx context.Context, w int, name string, jobs []string) error {
	req := &pb.CompleteJobsFromWaitGroupRequest{NamespaceName: g.ns, WaitGroupName: name, Jobs: make([]*pb.WaitGroupJob, len(jobs))}
	for i, j := range jobs {
		req.Jobs[i] = &pb.WaitGroupJob{JobId: j}
	}
	_, err := g.cl(w).CompleteJobsFromWaitGroup(ctx, req)
	return err
}

// WaitWaitGroup is WaitForWaitGroup (60 s, again on TIMED_OUT): one call
// that the leader answers from the commit that completes the group.
func (g *Grackle) WaitWaitGroup(ctx context.Context, w int, name string) error {
	for {
		r, err := g.cl(w).WaitForWaitGroup(ctx, &pb.WaitForWaitGroupRequest{NamespaceName: g.ns, WaitGroupName: name, TimeoutSeconds: 60})
		if err != nil {
			return err
		}
		switch r.Outcome {
		case pb.WaitGroupWaitOutcome_WAIT_GROUP_WAIT_OUTCOME_COMPLETED:
			return nil
		case pb.WaitGroupWaitOutcome_WAIT_GROUP_WAIT_OUTCOME_TIMED_OUT:
			continue
		default:
			return fmt.Errorf("wait: outcome %v", r.Outcome)
		}
	}
}

func (g *Grackle) DeleteWaitGroup(ctx context.Context, w int, name string) error {
	_, err := g.cl(w).DeleteWaitGroup(ctx, &pb.DeleteWaitGroupRequest{NamespaceName: g.ns, WaitGroupName: name})
	return err
}

// NewBarrier creates a barrier of parties expected processes; round r is
// its generation r.
func (g *Grackle) NewBarrier(ctx context.Context, name string, parties int) (Barrier, error) {
	if _, err := g.conns[0].CreateBarrier(ctx, &pb.CreateBarrierRequest{NamespaceName: g.ns, BarrierName: name, ExpectedProcesses: int64(parties)}); err != nil {
		return nil, err
	}
	return &grackleBarrier{g: g, name: name}, nil
}

type grackleBarrier struct {
	g    *Grackle
	name string
}

// Meet is ArriveAtBarrier at generation round; unless that arrival
// tripped it (all_arrived), WaitAtBarrier for it.
func (b *grackleBarrier) Meet(ctx context.Context, w int, round int64) (time.Time, bool, bool, error) {
	cl := b.g.cl(w)
	r, err := cl.ArriveAtBarrier(ctx, &pb.ArriveAtBarrierRequest{NamespaceName: b.g.ns, BarrierName: b.name,
		ProcessId: "bench-" + strconv.Itoa(w), ExpectedGeneration: round})
	arrived := time.Now()
	if err != nil {
		return arrived, false, true, fmt.Errorf("arrive: %w", err)
	}
	if r.AllArrived {
		return arrived, true, true, nil
	}
	for {
		wr, err := cl.WaitAtBarrier(ctx, &pb.WaitAtBarrierRequest{NamespaceName: b.g.ns, BarrierName: b.name, ExpectedGeneration: round, TimeoutSeconds: 60})
		if err != nil {
			return arrived, false, true, fmt.Errorf("wait: %w", err)
		}
		if wr.Outcome == pb.BarrierWaitOutcome_BARRIER_WAIT_OUTCOME_TRIPPED {
			return arrived, false, true, nil
		}
	}
}

func (b *grackleBarrier) LastArrival(context.Context, int64) (int, error) {
	return 0, fmt.Errorf("grackle: Meet tells the last arrival")
}

func (b *grackleBarrier) Close(ctx context.Context) error {
	_, err := b.g.conns[0].DeleteBarrier(ctx, &pb.DeleteBarrierRequest{NamespaceName: b.g.ns, BarrierName: b.name})
	return err
}
