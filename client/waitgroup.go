package client

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grackle-coord/grackle/apierr"
	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
)

// MaxJobsPerCall is the most jobs one CompleteJobsFromWaitGroup call may
// carry with the server's default limit (--max-jobs-per-call): the batch
// size of WaitGroup.CompleteJobs unless WaitGroup.BatchSize says otherwise.
const MaxJobsPerCall = 100

// WaitGroup is one wait group of a namespace: workers complete its jobs
// (Complete, CompleteJobs), anyone waits until all of them are done
// (Wait). Get it with Client.WaitGroup; the group itself is made with
// Client.CreateWaitGroup. A WaitGroup holds no state of its own beyond
// its names and is safe for concurrent use.
type WaitGroup struct {
	c    *Client
	ns   string
	name string

	// BatchSize is the most jobs CompleteJobs sends in one call (0:
	// MaxJobsPerCall). Set it before use, to the server's
	// --max-jobs-per-call when that was lowered.
	BatchSize int
}

// WaitGroup returns a handle on wait group name of namespace ns. It makes
// no call: a group that does not exist fails the handle's calls with
// NotFound (reason WAIT_GROUP_NOT_FOUND).
func (c *Client) WaitGroup(ns, name string) *WaitGroup {
	return &WaitGroup{c: c, ns: ns, name: name}
}

// Name is the wait group's name.
func (w *WaitGroup) Name() string { return w.name }

// Namespace is the wait group's namespace.
func (w *WaitGroup) Namespace() string { return w.ns }

// Get reads the wait group (linearizable).
func (w *WaitGroup) Get(ctx context.Context) (*pb.WaitGroup, error) {
	r, err := w.c.GetWaitGroup(ctx, &pb.GetWaitGroupRequest{NamespaceName: w.ns, WaitGroupName: w.name})
	if err != nil {
		return nil, err
	}
	return r.GetWaitGroup(), nil
}

// Completion is the result of Complete or CompleteJobs.
type Completion struct {
	// WaitGroup is the group's state after the last batch: COMPLETED once
	// completed_jobs has reached counter.
	WaitGroup *pb.WaitGroup
	// NewlyCompleted counts the jobs this call completed; the others were
	// completed already (by an earlier call, a retry, or twice in the
	// call), and count nothing twice.
	NewlyCompleted int64
}

// Complete marks the jobs jobIDs as done, as CompleteJobs does (without
// metadata).
func (w *WaitGroup) Complete(ctx context.Context, jobIDs ...string) (*Completion, error) {
	jobs := make([]*pb.WaitGroupJob, len(jobIDs))
	for i, id := range jobIDs {
		jobs[i] = &pb.WaitGroupJob{JobId: id}
	}
	return w.CompleteJobs(ctx, jobs)
}

// CompleteJobs marks jobs as done (each a job_id and, optionally,
// metadata; the first completion's metadata stays). It sends them in
// batches of BatchSize, in order; each batch is all or none.
//
// Completion is idempotent per job_id, so a batch is retried on any
// Unavailable (a retry after one that applied counts nothing twice), and
// so is calling CompleteJobs again with the same jobs after a failure: the
// batches before the failing one are applied, the rest are not. Errors:
//
//   - new jobs for a group that is COMPLETED or EXPIRED (or past its
//     expires_at): an error matching ErrWaitGroupNotActive, and also
//     ErrWaitGroupExpired when the group expired (a batch of only jobs
//     completed already succeeds, whatever the status);
//   - new jobs past counter: InvalidArgument ("too many jobs"), that batch
//     unapplied;
//   - a missing group: NotFound (reason WAIT_GROUP_NOT_FOUND);
//   - no jobs at all: InvalidArgument, without a call.
//
// Errors keep their gRPC status (status.Code reports it).
func (w *WaitGroup) CompleteJobs(ctx context.Context, jobs []*pb.WaitGroupJob) (*Completion, error) {
	if len(jobs) == 0 {
		return nil, status.Errorf(codes.InvalidArgument, "grackle: complete jobs of wait group %q: jobs: need at least 1", w.name)
	}
	size := w.BatchSize
	if size <= 0 {
		size = MaxJobsPerCall
	}
	out := &Completion{}
	batches := (len(jobs) + size - 1) / size
	for i := 0; i < len(jobs); i += size {
		batch := jobs[i:min(i+size, len(jobs))]
		r, err := w.c.CompleteJobsFromWaitGroup(ctx, &pb.CompleteJobsFromWaitGroupRequest{
			NamespaceName: w.ns, WaitGroupName: w.name, Jobs: batch,
		})
		if err != nil {
			err = waitGroupErr(err)
			if batches > 1 {
				return nil, fmt.Errorf("grackle: complete jobs of wait group %q: batch %d of %d (jobs %d..%d; the batches before it are applied): %w",
					w.name, i/size+1, batches, i+1, i+len(batch), err)
			}
			return nil, err
		}
		out.WaitGroup = r.GetWaitGroup()
		out.NewlyCompleted += r.GetNewlyCompleted()
	}
	return out, nil
}

// waitGroupErr adds the sentinels of a wait group's reasons to err.
func waitGroupErr(err error) error {
	if status.Code(err) != codes.FailedPrecondition || apierr.ReasonOf(err) != apierr.WaitGroupNotActive {
		return err
	}
	if expiredStatus(apierr.Info(err).GetMetadata()[apierr.KeyStatus]) {
		return fmt.Errorf("%w (%w): %w", ErrWaitGroupNotActive, ErrWaitGroupExpired, err)
	}
	return fmt.Errorf("%w: %w", ErrWaitGroupNotActive, err)
}

// expiredStatus reports whether an ErrorInfo status value names
// WAIT_GROUP_STATUS_EXPIRED (in full or as EXPIRED).
func expiredStatus(s string) bool {
	return s == pb.WaitGroupStatus_WAIT_GROUP_STATUS_EXPIRED.String() || s == "EXPIRED"
}

// Wait waits until the wait group has finished, the context ends, or the
// group is deleted. It waits on the leader, woken by the commit that
// finishes the group (no polling), in calls of at most
// Config.MaxAcquireTimeout each (the server's maximum), sized to what is
// left of ctx's deadline; without a deadline it waits until the group
// finishes. A leader change ends a call with Unavailable and the wait goes
// on at the new leader.
//
// It returns the group's last state and the outcome:
//
//   - COMPLETED: err is nil;
//   - EXPIRED (expires_at passed first): err matches ErrWaitGroupExpired;
//   - TIMED_OUT (ctx's deadline passed first): err is a *WaitError
//     matching ErrWaitTimeout and context.DeadlineExceeded; the group is
//     the last state seen (nil if none was);
//   - UNSPECIFIED: another failure (ctx cancelled; the group missing or
//     deleted while waited for: NotFound, reason WAIT_GROUP_NOT_FOUND).
func (w *WaitGroup) Wait(ctx context.Context) (*pb.WaitGroup, pb.WaitGroupWaitOutcome, error) {
	var last *pb.WaitGroup
	timedOut := func(cause error) (*pb.WaitGroup, pb.WaitGroupWaitOutcome, error) {
		return last, pb.WaitGroupWaitOutcome_WAIT_GROUP_WAIT_OUTCOME_TIMED_OUT,
			&WaitError{Namespace: w.ns, Kind: "wait group", Name: w.name, sentinel: ErrWaitTimeout, cause: cause}
	}
	for {
		secs := waitSeconds(w.c, ctx)
		if secs < 0 {
			return timedOut(context.DeadlineExceeded)
		}
		r, err := w.c.WaitForWaitGroup(ctx, &pb.WaitForWaitGroupRequest{NamespaceName: w.ns, WaitGroupName: w.name, TimeoutSeconds: secs})
		if err != nil {
			if waitDeadlinePassed(ctx, err) {
				return timedOut(context.DeadlineExceeded)
			}
			if ctx.Err() != nil {
				return last, pb.WaitGroupWaitOutcome_WAIT_GROUP_WAIT_OUTCOME_UNSPECIFIED,
					fmt.Errorf("grackle: wait for wait group %q: %w (last error: %v)", w.name, ctx.Err(), err)
			}
			return last, pb.WaitGroupWaitOutcome_WAIT_GROUP_WAIT_OUTCOME_UNSPECIFIED, err
		}
		last = r.GetWaitGroup()
		switch r.GetOutcome() {
		case pb.WaitGroupWaitOutcome_WAIT_GROUP_WAIT_OUTCOME_COMPLETED:
			return last, r.GetOutcome(), nil
		case pb.WaitGroupWaitOutcome_WAIT_GROUP_WAIT_OUTCOME_EXPIRED:
			return last, r.GetOutcome(), &WaitError{Namespace: w.ns, Kind: "wait group", Name: w.name, sentinel: ErrWaitGroupExpired}
		case pb.WaitGroupWaitOutcome_WAIT_GROUP_WAIT_OUTCOME_TIMED_OUT:
			if _, has := ctx.Deadline(); has && waitSeconds(w.c, ctx) < 0 {
				return timedOut(context.DeadlineExceeded)
			}
			// Time is left (or there is no deadline): wait again.
		default:
			return last, r.GetOutcome(), fmt.Errorf("grackle: wait for wait group %q: unexpected outcome %v", w.name, r.GetOutcome())
		}
	}
}

// waitDeadlinePassed reports whether a wait call's error is ctx's
// deadline (seen by ctx, the server or the transport).
func waitDeadlinePassed(ctx context.Context, err error) bool {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return true
	}
	_, has := ctx.Deadline()
	return has && ctx.Err() == nil && status.Code(err) == codes.DeadlineExceeded
}
