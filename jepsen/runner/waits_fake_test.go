package runner

import (
	"context"
	"fmt"
	"math/rand"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/grackle-coord/grackle/apierr"
	"github.com/grackle-coord/grackle/jepsen/check"
	"github.com/grackle-coord/grackle/jepsen/history"
	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
)

// fakeWaitServer is an in-memory GrackleServiceClient serving the
// wait-group and barrier calls by the contract, one at a time under a
// lock (waits block outside it): it drives the runner's wait workloads
// and their recording without a cluster, so that a change to them is
// tested even where the server is not at hand. earlyComplete and
// earlyTrip break the rules the faults wg-early-complete and
// barrier-early-trip break.
type fakeWaitServer struct {
	pb.GrackleServiceClient // nil: any other call panics
	earlyComplete           bool
	earlyTrip               bool
	mu                      sync.Mutex
	wgs                     map[string]*fwGroup
	bars                    map[string]*fwBarrier
}

type fwGroup struct {
	g    *pb.WaitGroup
	jobs map[string]int64
	done chan struct{}
}

type fwBarrier struct {
	b     *pb.Barrier
	cur   []string
	prev  []string
	trips map[int64]chan struct{}
}

func newFakeWaitServer() *fakeWaitServer {
	return &fakeWaitServer{wgs: map[string]*fwGroup{}, bars: map[string]*fwBarrier{}}
}

func fwErr(code codes.Code, reason string, md map[string]string) error {
	st, _ := status.New(code, reason).WithDetails(&errdetails.ErrorInfo{Reason: reason, Domain: apierr.Domain, Metadata: md})
	return st.Err()
}

func now() int64 { return time.Now().UnixNano() }

// expire marks a group past expires_at EXPIRED (finished at expires_at).
func (f *fakeWaitServer) expire(w *fwGroup) {
	if w.g.Status == pb.WaitGroupStatus_WAIT_GROUP_STATUS_ACTIVE && w.g.ExpiresAt != 0 && w.g.ExpiresAt <= now() {
		w.g.Status, w.g.FinishedAt = pb.WaitGroupStatus_WAIT_GROUP_STATUS_EXPIRED, w.g.ExpiresAt
		close(w.done)
	}
}

func (f *fakeWaitServer) group(name string) (*fwGroup, error) {
	w := f.wgs[name]
	if w == nil {
		return nil, fwErr(codes.NotFound, apierr.WaitGroupNotFound, nil)
	}
	f.expire(w)
	return w, nil
}

func (f *fakeWaitServer) view(w *fwGroup) *pb.WaitGroup { return proto.Clone(w.g).(*pb.WaitGroup) }

func bview(b *fwBarrier) *pb.Barrier { return proto.Clone(b.b).(*pb.Barrier) }

func (f *fakeWaitServer) CreateWaitGroup(_ context.Context, in *pb.CreateWaitGroupRequest, _ ...grpc.CallOption) (*pb.CreateWaitGroupResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if in.ExpiresAt != 0 && in.ExpiresAt <= now() {
		return nil, status.Error(codes.InvalidArgument, "expires_at: in the past")
	}
	if f.wgs[in.WaitGroupName] != nil {
		return nil, status.Error(codes.AlreadyExists, "exists")
	}
	w := &fwGroup{g: &pb.WaitGroup{Name: in.WaitGroupName, Counter: in.Counter, ExpiresAt: in.ExpiresAt, Status: pb.WaitGroupStatus_WAIT_GROUP_STATUS_ACTIVE,
		LastActivityAt: now()}, jobs: map[string]int64{}, done: make(chan struct{})}
	f.wgs[in.WaitGroupName] = w
	if in.ExpiresAt != 0 {
		time.AfterFunc(time.Until(time.Unix(0, in.ExpiresAt))+10*time.Millisecond, func() {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.expire(w)
		})
	}
	return &pb.CreateWaitGroupResponse{WaitGroup: f.view(w)}, nil
}

func (f *fakeWaitServer) CompleteJobsFromWaitGroup(_ context.Context, in *pb.CompleteJobsFromWaitGroupRequest, _ ...grpc.CallOption) (*pb.CompleteJobsFromWaitGroupResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	w, err := f.group(in.WaitGroupName)
	if err != nil {
		return nil, err
	}
	fresh := map[string]bool{}
	for _, j := range in.Jobs {
		if _, ok := w.jobs[j.JobId]; !ok {
			fresh[j.JobId] = true
		}
	}
	if len(fresh) == 0 {
		return &pb.CompleteJobsFromWaitGroupResponse{WaitGroup: f.view(w)}, nil
	}
	if w.g.Status != pb.WaitGroupStatus_WAIT_GROUP_STATUS_ACTIVE {
		return nil, fwErr(codes.FailedPrecondition, apierr.WaitGroupNotActive, map[string]string{apierr.KeyStatus: w.g.Status.String()})
	}
	if w.g.CompletedJobs+int64(len(fresh)) > w.g.Counter {
		return nil, status.Error(codes.InvalidArgument, "too many jobs")
	}
	t := now()
	for j := range fresh {
		w.jobs[j] = t
	}
	w.g.CompletedJobs += int64(len(fresh))
	w.g.LastActivityAt = t
	if f.earlyComplete && w.g.Counter > 1 && w.g.CompletedJobs == w.g.Counter-1 {
		w.g.Counter--
	}
	if w.g.CompletedJobs == w.g.Counter {
		w.g.Status, w.g.FinishedAt = pb.WaitGroupStatus_WAIT_GROUP_STATUS_COMPLETED, t
		close(w.done)
	}
	return &pb.CompleteJobsFromWaitGroupResponse{WaitGroup: f.view(w), NewlyCompleted: int64(len(fresh))}, nil
}

func (f *fakeWaitServer) GetWaitGroup(_ context.Context, in *pb.GetWaitGroupRequest, _ ...grpc.CallOption) (*pb.GetWaitGroupResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	w, err := f.group(in.WaitGroupName)
	if err != nil {
		return nil, err
	}
	return &pb.GetWaitGroupResponse{WaitGroup: f.view(w)}, nil
}

func (f *fakeWaitServer) ListWaitGroupCompletedJobs(_ context.Context, in *pb.ListWaitGroupCompletedJobsRequest, _ ...grpc.CallOption) (*pb.ListWaitGroupCompletedJobsResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	w, err := f.group(in.WaitGroupName)
	if err != nil {
		return nil, err
	}
	r := &pb.ListWaitGroupCompletedJobsResponse{}
	for id, at := range w.jobs {
		r.Jobs = append(r.Jobs, &pb.WaitGroupJob{JobId: id, CompletedAt: at})
	}
	sort.Slice(r.Jobs, func(i, j int) bool { return r.Jobs[i].JobId < r.Jobs[j].JobId })
	return r, nil
}

func (f *fakeWaitServer) WaitForWaitGroup(ctx context.Context, in *pb.WaitForWaitGroupRequest, _ ...grpc.CallOption) (*pb.WaitForWaitGroupResponse, error) {
	f.mu.Lock()
	w, err := f.group(in.WaitGroupName)
	f.mu.Unlock()
	if err != nil {
		return nil, err
	}
	select {
	case <-w.done:
	case <-time.After(time.Duration(in.TimeoutSeconds) * time.Second):
	case <-ctx.Done():
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.expire(w)
	out := map[pb.WaitGroupStatus]pb.WaitGroupWaitOutcome{
		pb.WaitGroupStatus_WAIT_GROUP_STATUS_COMPLETED: pb.WaitGroupWaitOutcome_WAIT_GROUP_WAIT_OUTCOME_COMPLETED,
		pb.WaitGroupStatus_WAIT_GROUP_STATUS_EXPIRED:   pb.WaitGroupWaitOutcome_WAIT_GROUP_WAIT_OUTCOME_EXPIRED,
		pb.WaitGroupStatus_WAIT_GROUP_STATUS_ACTIVE:    pb.WaitGroupWaitOutcome_WAIT_GROUP_WAIT_OUTCOME_TIMED_OUT,
	}[w.g.Status]
	return &pb.WaitForWaitGroupResponse{WaitGroup: f.view(w), Outcome: out}, nil
}

func (f *fakeWaitServer) CreateBarrier(_ context.Context, in *pb.CreateBarrierRequest, _ ...grpc.CallOption) (*pb.CreateBarrierResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.bars[in.BarrierName] != nil {
		return nil, status.Error(codes.AlreadyExists, "exists")
	}
	b := &fwBarrier{b: &pb.Barrier{Name: in.BarrierName, ExpectedProcesses: in.ExpectedProcesses, Generation: 1}, trips: map[int64]chan struct{}{1: make(chan struct{})}}
	f.bars[in.BarrierName] = b
	return &pb.CreateBarrierResponse{Barrier: bview(b)}, nil
}

func (f *fakeWaitServer) barrier(name string) (*fwBarrier, error) {
	b := f.bars[name]
	if b == nil {
		return nil, fwErr(codes.NotFound, apierr.BarrierNotFound, nil)
	}
	return b, nil
}

func mismatch(b *fwBarrier) error {
	return fwErr(codes.FailedPrecondition, apierr.GenerationMismatch, map[string]string{apierr.KeyCurrentGeneration: strconv.FormatInt(b.b.Generation, 10)})
}

func in(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

func (f *fakeWaitServer) ArriveAtBarrier(_ context.Context, in_ *pb.ArriveAtBarrierRequest, _ ...grpc.CallOption) (*pb.ArriveAtBarrierResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	b, err := f.barrier(in_.BarrierName)
	if err != nil {
		return nil, err
	}
	g := in_.ExpectedGeneration
	all := false
	switch {
	case g == b.b.Generation:
		if !in(b.cur, in_.ProcessId) {
			b.cur = append(b.cur, in_.ProcessId)
		}
		if n := int64(len(b.cur)); n >= b.b.ExpectedProcesses || f.earlyTrip && n >= b.b.ExpectedProcesses-1 {
			close(b.trips[g])
			b.prev, b.cur = b.cur, nil
			b.b.Generation++
			b.trips[b.b.Generation] = make(chan struct{})
			all = true
		}
		b.b.ArrivedProcesses = int64(len(b.cur))
	case g == b.b.Generation-1 && in(b.prev, in_.ProcessId):
		all = true
	default:
		return nil, mismatch(b)
	}
	return &pb.ArriveAtBarrierResponse{Barrier: bview(b), AllArrived: all}, nil
}

func (f *fakeWaitServer) WaitAtBarrier(ctx context.Context, in_ *pb.WaitAtBarrierRequest, _ ...grpc.CallOption) (*pb.WaitAtBarrierResponse, error) {
	f.mu.Lock()
	b, err := f.barrier(in_.BarrierName)
	if err != nil {
		f.mu.Unlock()
		return nil, err
	}
	if in_.ExpectedGeneration > b.b.Generation {
		f.mu.Unlock()
		return nil, mismatch(b)
	}
	ch := b.trips[in_.ExpectedGeneration]
	f.mu.Unlock()
	out := pb.BarrierWaitOutcome_BARRIER_WAIT_OUTCOME_TRIPPED
	if ch != nil { // nil: long tripped
		select {
		case <-ch:
		case <-time.After(time.Duration(in_.TimeoutSeconds) * time.Second):
			out = pb.BarrierWaitOutcome_BARRIER_WAIT_OUTCOME_TIMED_OUT
		case <-ctx.Done():
			return nil, status.FromContextError(ctx.Err()).Err()
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if out == pb.BarrierWaitOutcome_BARRIER_WAIT_OUTCOME_TIMED_OUT && b.b.Generation > in_.ExpectedGeneration {
		out = pb.BarrierWaitOutcome_BARRIER_WAIT_OUTCOME_TRIPPED
	}
	return &pb.WaitAtBarrierResponse{Barrier: bview(b), Outcome: out}, nil
}

func (f *fakeWaitServer) GetBarrier(_ context.Context, in_ *pb.GetBarrierRequest, _ ...grpc.CallOption) (*pb.GetBarrierResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	b, err := f.barrier(in_.BarrierName)
	if err != nil {
		return nil, err
	}
	return &pb.GetBarrierResponse{Barrier: bview(b)}, nil
}

func (f *fakeWaitServer) ListBarrierParticipants(_ context.Context, in_ *pb.ListBarrierParticipantsRequest, _ ...grpc.CallOption) (*pb.ListBarrierParticipantsResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	b, err := f.barrier(in_.BarrierName)
	if err != nil {
		return nil, err
	}
	g := in_.Generation
	if g == 0 {
		g = b.b.Generation
	}
	var ps []string
	switch g {
	case b.b.Generation:
		ps = b.cur
	case b.b.Generation - 1:
		ps = b.prev
	default:
		return nil, mismatch(b)
	}
	r := &pb.ListBarrierParticipantsResponse{Generation: g}
	for _, p := range ps {
		r.Participants = append(r.Participants, &pb.BarrierParticipant{ProcessId: p, Generation: g})
	}
	return r, nil
}

// runFakeWaits runs the wait workloads against the fake for d.
func runFakeWaits(t *testing.T, f *fakeWaitServer, d time.Duration) *history.History {
	t.Helper()
	w := &world{rec: &recorder{t0: time.Now()}, reg: map[string]uint64{}}
	w.pick = func(*rand.Rand) (pb.GrackleServiceClient, string) { return f, "fake" }
	ctx := context.Background()
	if err := w.setupBarriers(ctx, rand.New(rand.NewSource(1)), 2); err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithTimeout(ctx, d)
	defer stop()
	var wg sync.WaitGroup
	w.startWaits(runCtx, &wg, 1, 4)
	wg.Wait()
	h := &history.History{Seed: 1, Nodes: 1, Duration: d, Permits: map[string]int64{}, Meta: map[string]string{}}
	h.HealedAt = w.rec.since()
	w.finalWaits(ctx, rand.New(rand.NewSource(99)), time.Now().Add(10*time.Second))
	h.ServedAgainAt = h.HealedAt
	h.Ops = w.rec.ops
	sort.SliceStable(h.Ops, func(i, j int) bool { return h.Ops[i].Invoke < h.Ops[j].Invoke })
	return h
}

// The runner's wait workloads on the fake: a correct fake passes both
// checkers and the run exercises them; the two faults' rules catch the
// faulty fake.
func TestWaitWorkloadOnFake(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the workloads for seconds")
	}
	h := runFakeWaits(t, newFakeWaitServer(), 4*time.Second)
	counts := map[string]int{}
	for _, o := range h.Ops {
		counts[o.Kind+":"+o.Outcome+o.WaitOutcome]++
	}
	t.Logf("%d ops: %v", len(h.Ops), counts)
	rs := waitResults(h)
	for _, name := range []string{check.NameWaitGroups, check.NameBarriers} {
		r := rs[name]
		t.Logf("%s: %s %v", name, r.Valid, r.Stats)
		for _, a := range r.Anomalies {
			t.Errorf("%s: %s: %s", name, a.Kind, a.Description)
			for _, o := range a.Ops {
				t.Logf("    %s", check.FormatOp(o))
			}
		}
	}
	for _, k := range []string{"groups_completed", "groups_expired", "completed_observations"} {
		if rs[check.NameWaitGroups].Stats[k] == 0 {
			t.Errorf("waitgroup: %s is 0", k)
		}
	}
	for _, k := range []string{"generations_tripped", "waits_tripped", "participant_reads"} {
		if rs[check.NameBarriers].Stats[k] == 0 {
			t.Errorf("barrier: %s is 0", k)
		}
	}
	for _, k := range []string{"wg_complete:fail", "wg_wait:okCOMPLETED", "wg_jobs:ok", "barrier_wait:okTRIPPED"} {
		if counts[k] == 0 {
			t.Errorf("no %s in the history", k)
		}
	}

	for _, c := range []struct {
		f       *fakeWaitServer
		checker string
		kinds   []string
	}{
		{&fakeWaitServer{earlyComplete: true}, check.NameWaitGroups, []string{"wg-early-complete", "wg-completed-short"}},
		{&fakeWaitServer{earlyTrip: true}, check.NameBarriers, []string{"barrier-early-trip", "barrier-early-release", "barrier-trip-short"}},
	} {
		c.f.wgs, c.f.bars = map[string]*fwGroup{}, map[string]*fwBarrier{}
		r := waitResults(runFakeWaits(t, c.f, 3*time.Second))[c.checker]
		for _, k := range c.kinds {
			if r.Stats["anomaly:"+k] == 0 {
				t.Errorf("%s on the faulty fake: no %s; stats %v", c.checker, k, r.Stats)
			}
		}
		t.Logf("%s on the faulty fake: %s", c.checker, fmt.Sprint(r.Stats))
	}
}
