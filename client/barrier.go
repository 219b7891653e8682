package client

import (
	"context"
	"fmt"
	"strconv"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grackle-coord/grackle/apierr"
	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
)

// Barrier is one barrier of a namespace: expected_processes processes
// arrive (Arrive), and each waits until all have (Wait), generation after
// generation. ArriveAndWait does both. Get it with Client.Barrier; the
// barrier itself is made with Client.CreateBarrier. A Barrier holds no
// state of its own beyond its names and is safe for concurrent use.
type Barrier struct {
	c    *Client
	ns   string
	name string
}

// Barrier returns a handle on barrier name of namespace ns. It makes no
// call: a barrier that does not exist fails the handle's calls with
// NotFound (reason BARRIER_NOT_FOUND).
func (c *Client) Barrier(ns, name string) *Barrier {
	return &Barrier{c: c, ns: ns, name: name}
}

// Name is the barrier's name.
func (b *Barrier) Name() string { return b.name }

// Namespace is the barrier's namespace.
func (b *Barrier) Namespace() string { return b.ns }

// Get reads the barrier (linearizable).
func (b *Barrier) Get(ctx context.Context) (*pb.Barrier, error) {
	r, err := b.c.GetBarrier(ctx, &pb.GetBarrierRequest{NamespaceName: b.ns, BarrierName: b.name})
	if err != nil {
		return nil, err
	}
	return r.GetBarrier(), nil
}

// ArriveOption configures an arrival.
type ArriveOption func(*arriveOptions)

type arriveOptions struct {
	metadata map[string]string
}

// WithArrivalMetadata sets the participant's metadata (shown by
// ListBarrierParticipants; a retried arrival keeps the first).
func WithArrivalMetadata(md map[string]string) ArriveOption {
	return func(o *arriveOptions) { o.metadata = md }
}

// Arrival is a counted arrival at a barrier.
type Arrival struct {
	Namespace string
	Barrier   string
	ProcessID string
	// Generation is the generation the arrival counted in.
	Generation int64
	// AllArrived: that generation has tripped (by this arrival, or before
	// it was retried). When false, Wait(ctx, Generation) waits for it.
	AllArrived bool
	// State is the barrier as the server answered (nil in the one case
	// described at Arrive where no answer says it, and a Get failed too).
	State *pb.Barrier
}

// Arrive counts processID as arrived at the barrier's generation
// generation, without waiting. Generation 0 means the current one: Arrive
// reads it first (Get), and if the barrier trips between that read and the
// arrival (the server's answer proves the arrival was not counted: reason
// GENERATION_MISMATCH), arrives again at the generation the server names.
//
// An arrival counts once per (generation, process), so it is retried on
// any Unavailable with the same expected_generation: a retry of an
// arrival that was counted succeeds (AllArrived true if that generation
// has tripped since), and nothing counts twice. The one case the server
// cannot settle: an attempt whose outcome is unknown, then two trips
// before the retry, so that the retry's generation is no longer kept.
// That generation has tripped; Arrive reports the arrival as counted there
// (AllArrived true) rather than arrive again and risk counting twice.
//
// A generation given explicitly that is neither the current one nor (for
// an arrival counted already) the previous one fails with a
// *GenerationError (errors.Is(err, ErrGenerationMismatch)) naming the
// current generation. A missing barrier is NotFound (reason
// BARRIER_NOT_FOUND).
func (b *Barrier) Arrive(ctx context.Context, processID string, generation int64, opts ...ArriveOption) (*Arrival, error) {
	var o arriveOptions
	for _, f := range opts {
		f(&o)
	}
	auto := generation == 0
	gen := generation
	if auto {
		cur, err := b.Get(ctx)
		if err != nil {
			return nil, err
		}
		gen = cur.GetGeneration()
	}
	for {
		// One request for every attempt: a retry carries the same
		// expected_generation, so the server can tell it from a new
		// arrival.
		req := &pb.ArriveAtBarrierRequest{NamespaceName: b.ns, BarrierName: b.name, ProcessId: processID,
			ExpectedGeneration: gen, Metadata: o.metadata}
		var resp *pb.ArriveAtBarrierResponse
		uncertain := false // an attempt may have been counted
		err := b.c.invoke(ctx, retryAlways, nil, func(ctx context.Context, cc grpc.ClientConnInterface, co []grpc.CallOption) error {
			r, err := pb.NewGrackleServiceClient(cc).ArriveAtBarrier(ctx, req, co...)
			if err != nil && status.Code(err) == codes.Unavailable && !apierr.ProvesNotSent(err) {
				uncertain = true
			}
			resp = r
			return err
		})
		if err == nil {
			return &Arrival{Namespace: b.ns, Barrier: b.name, ProcessID: processID, Generation: gen,
				AllArrived: resp.GetAllArrived(), State: resp.GetBarrier()}, nil
		}
		ge := b.generationErr(gen, err)
		if ge == nil {
			return nil, err
		}
		switch {
		case uncertain && ge.Current > gen+1:
			// Counted at gen or not, gen has tripped; arriving again
			// might count this process twice.
			a := &Arrival{Namespace: b.ns, Barrier: b.name, ProcessID: processID, Generation: gen, AllArrived: true}
			a.State, _ = b.Get(ctx)
			return a, nil
		case auto && ge.Current > 0 && ge.Current != gen:
			// Not counted (the server keeps the current and the previous
			// generation's arrivals, and this was neither, or it would
			// have succeeded): arrive at the current one.
			gen = ge.Current
			continue
		}
		return nil, ge
	}
}

// generationErr is err as a *GenerationError when it is the server's
// GENERATION_MISMATCH (nil otherwise).
func (b *Barrier) generationErr(expected int64, err error) *GenerationError {
	if status.Code(err) != codes.FailedPrecondition || apierr.ReasonOf(err) != apierr.GenerationMismatch {
		return nil
	}
	cur, _ := strconv.ParseInt(apierr.Info(err).GetMetadata()[apierr.KeyCurrentGeneration], 10, 64)
	return &GenerationError{Namespace: b.ns, Barrier: b.name, Expected: expected, Current: cur, err: err}
}

// Wait waits until the barrier's generation generation has tripped, the
// context ends, or the barrier is deleted, and returns the barrier's
// state then. It returns at once when the barrier is past generation
// already. It waits on the leader, woken by the commit that trips the
// barrier (no polling), in calls of at most Config.MaxAcquireTimeout each,
// sized to what is left of ctx's deadline; without a deadline it waits
// until the trip. A leader change ends a call with Unavailable and the
// wait goes on at the new leader.
//
// Errors: ctx's deadline passing first, a *WaitError matching
// ErrWaitTimeout and context.DeadlineExceeded (the barrier returned is
// the last state seen, or nil); a generation that has not begun, a
// *GenerationError; a missing or deleted barrier, NotFound (reason
// BARRIER_NOT_FOUND).
func (b *Barrier) Wait(ctx context.Context, generation int64) (*pb.Barrier, error) {
	var last *pb.Barrier
	timedOut := func() (*pb.Barrier, error) {
		return last, &WaitError{Namespace: b.ns, Kind: "barrier", Name: b.name, Generation: generation,
			sentinel: ErrWaitTimeout, cause: context.DeadlineExceeded}
	}
	for {
		secs := waitSeconds(b.c, ctx)
		if secs < 0 {
			return timedOut()
		}
		r, err := b.c.WaitAtBarrier(ctx, &pb.WaitAtBarrierRequest{NamespaceName: b.ns, BarrierName: b.name,
			ExpectedGeneration: generation, TimeoutSeconds: secs})
		if err != nil {
			if waitDeadlinePassed(ctx, err) {
				return timedOut()
			}
			if ctx.Err() != nil {
				return last, fmt.Errorf("grackle: wait at barrier %q: %w (last error: %v)", b.name, ctx.Err(), err)
			}
			if ge := b.generationErr(generation, err); ge != nil {
				return last, ge
			}
			return last, err
		}
		last = r.GetBarrier()
		switch r.GetOutcome() {
		case pb.BarrierWaitOutcome_BARRIER_WAIT_OUTCOME_TRIPPED:
			return last, nil
		case pb.BarrierWaitOutcome_BARRIER_WAIT_OUTCOME_TIMED_OUT:
			if _, has := ctx.Deadline(); has && waitSeconds(b.c, ctx) < 0 {
				return timedOut()
			}
			// Time is left (or there is no deadline): wait again.
		default:
			return last, fmt.Errorf("grackle: wait at barrier %q: unexpected outcome %v", b.name, r.GetOutcome())
		}
	}
}

// ArriveAndWait arrives at the barrier's current generation as processID
// (Arrive with generation 0) and waits until that generation has tripped
// (Wait), returning at once when this arrival was the last one. It returns
// the generation it passed. Retries never count the process twice (see
// Arrive); calling ArriveAndWait again after a failure arrives at the
// generation current then, which is the same one while it has not
// tripped (the arrival counted already is not counted again).
//
// Errors are those of Arrive and Wait; on a wait's error the generation
// the arrival counted in is still returned.
func (b *Barrier) ArriveAndWait(ctx context.Context, processID string, opts ...ArriveOption) (int64, error) {
	a, err := b.Arrive(ctx, processID, 0, opts...)
	if err != nil {
		return 0, err
	}
	if a.AllArrived {
		return a.Generation, nil
	}
	if _, err := b.Wait(ctx, a.Generation); err != nil {
		return a.Generation, err
	}
	return a.Generation, nil
}
