package client

import (
	"context"
	"errors"
	"net"
	"slices"
	"strconv"
	"sync"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grackle-coord/grackle/apierr"
	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
)

// barrierFake is one barrier with the contract's arrival rules (counted
// once per generation and process; a retry at the current or previous
// generation succeeds; any other generation is GENERATION_MISMATCH naming
// the current one), and hooks that script failures around an arrival.
type barrierFake struct {
	fakeNode
	mu       sync.Mutex
	expected int
	gen      int64
	arrived  map[int64][]string // the processes counted, per generation
	reqs     []*pb.ArriveAtBarrierRequest
	// after, when set for the n-th ArriveAtBarrier (1-based), runs after
	// it applied and replaces its answer with Unavailable (outcome
	// unknown): the answer was lost.
	after map[int]func(f *barrierFake)
	// refuse answers the n-th arrival NOT_LEADER without applying it.
	refuse map[int]bool
	// before runs before the n-th arrival applies.
	before map[int]func(f *barrierFake)
}

func newBarrierFake(expected int) *barrierFake {
	return &barrierFake{expected: expected, gen: 1, arrived: map[int64][]string{},
		after: map[int]func(*barrierFake){}, refuse: map[int]bool{}, before: map[int]func(*barrierFake){}}
}

func (f *barrierFake) state() *pb.Barrier {
	return &pb.Barrier{Name: "b", ExpectedProcesses: int64(f.expected), ArrivedProcesses: int64(len(f.arrived[f.gen])), Generation: f.gen}
}

// arriveLocked applies one arrival of pid at gen.
func (f *barrierFake) arriveLocked(pid string, gen int64) (bool, error) {
	switch {
	case gen == f.gen && slices.Contains(f.arrived[gen], pid):
		return false, nil
	case gen == f.gen:
		f.arrived[gen] = append(f.arrived[gen], pid)
		if len(f.arrived[gen]) == f.expected {
			f.gen++
			delete(f.arrived, f.gen-2)
			return true, nil
		}
		return false, nil
	case gen == f.gen-1 && slices.Contains(f.arrived[gen], pid):
		return true, nil
	}
	return false, mismatch(f.gen)
}

func mismatch(cur int64) error {
	st, _ := status.New(codes.FailedPrecondition, "expected_generation: barrier is at generation "+strconv.FormatInt(cur, 10)).WithDetails(
		&errdetails.ErrorInfo{Reason: apierr.GenerationMismatch, Domain: apierr.Domain,
			Metadata: map[string]string{apierr.KeyCurrentGeneration: strconv.FormatInt(cur, 10)}})
	return st.Err()
}

func (f *barrierFake) GetBarrier(context.Context, *pb.GetBarrierRequest) (*pb.GetBarrierResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return &pb.GetBarrierResponse{Barrier: f.state()}, nil
}

func (f *barrierFake) ArriveAtBarrier(_ context.Context, r *pb.ArriveAtBarrierRequest) (*pb.ArriveAtBarrierResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reqs = append(f.reqs, r)
	n := len(f.reqs)
	if f.refuse[n] {
		return nil, unavail(apierr.NotLeader, "", "node n1: not the leader")
	}
	if h := f.before[n]; h != nil {
		h(f)
	}
	all, err := f.arriveLocked(r.ProcessId, r.ExpectedGeneration)
	if h := f.after[n]; h != nil {
		h(f)
		return nil, unavail(apierr.OutcomeUnknown, "", "node n1: leadership lost before the write committed")
	}
	if err != nil {
		return nil, err
	}
	return &pb.ArriveAtBarrierResponse{Barrier: f.state(), AllArrived: all}, nil
}

// generations are the expected_generation of each arrival request.
func (f *barrierFake) generations() []int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []int64
	for _, r := range f.reqs {
		out = append(out, r.ExpectedGeneration)
	}
	return out
}

func startBarrierFake(t *testing.T, f *barrierFake) *Barrier {
	t.Helper()
	c, err := New(testCtx(t), fastConfig(startFakeServer(t, f)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c.Barrier("ns", "b")
}

// fakeService is a fake that embeds fakeNode (for leader discovery) and
// overrides some of its RPCs.
type fakeService interface {
	pb.GrackleServiceServer
	pb.ClusterServiceServer
	node() *fakeNode
}

func (f *fakeNode) node() *fakeNode { return f }

// startFakeServer serves f on 127.0.0.1:0, as its own leader, and
// returns its address.
func startFakeServer(t *testing.T, f fakeService) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	pb.RegisterGrackleServiceServer(s, f)
	pb.RegisterClusterServiceServer(s, f)
	go s.Serve(lis)
	t.Cleanup(s.Stop)
	n := f.node()
	n.addr = lis.Addr().String()
	n.leader.Store(&n.addr)
	return n.addr
}

// An arrival whose answer was lost after it counted is retried with the
// same expected_generation even though the barrier tripped in between:
// the server answers all_arrived for the previous generation, and the
// process is counted once.
func TestArriveRetryKeepsTheGeneration(t *testing.T) {
	f := newBarrierFake(2)
	f.arrived[1] = []string{"other"}
	f.after[1] = func(*barrierFake) {} // "p" completes generation 1, the answer is lost
	b := startBarrierFake(t, f)
	a, err := b.Arrive(testCtx(t), "p", 0)
	if err != nil {
		t.Fatal(err)
	}
	if a.Generation != 1 || !a.AllArrived || a.State.GetGeneration() != 2 || a.State.GetArrivedProcesses() != 0 {
		t.Fatalf("arrival %+v", a)
	}
	if g := f.generations(); !slices.Equal(g, []int64{1, 1}) {
		t.Fatalf("expected_generation per attempt %v, want [1 1]", g)
	}
}

// Between the Get and the arrival the barrier tripped without this
// process: the server's GENERATION_MISMATCH proves the arrival did not
// count, so Arrive (generation 0: the current one) arrives at the
// generation it names.
func TestArriveFollowsATripBeforeItCounted(t *testing.T) {
	f := newBarrierFake(1)
	f.before[1] = func(f *barrierFake) { f.arriveLocked("someone", 1) } // trips 1 before p arrives
	b := startBarrierFake(t, f)
	a, err := b.Arrive(testCtx(t), "p", 0)
	if err != nil {
		t.Fatal(err)
	}
	if a.Generation != 2 || !a.AllArrived {
		t.Fatalf("arrival %+v, want counted at 2 (where it trips, expected 1)", a)
	}
	if g := f.generations(); !slices.Equal(g, []int64{1, 2}) {
		t.Fatalf("expected_generation per attempt %v, want [1 2]", g)
	}
}

// The case the server cannot settle: an attempt that counted, its answer
// lost, then two trips before the retry. Arrive must not arrive again at
// the current generation (that would count the process twice): it
// reports generation 1 as passed.
func TestArriveNeverCountsTwiceAfterTwoTrips(t *testing.T) {
	f := newBarrierFake(2)
	f.arrived[1] = []string{"x"}
	f.after[1] = func(f *barrierFake) {
		f.arriveLocked("y", 2)
		f.arriveLocked("z", 2) // generation 2 trips too: now at 3
	}
	b := startBarrierFake(t, f)
	a, err := b.Arrive(testCtx(t), "p", 0)
	if err != nil {
		t.Fatal(err)
	}
	if a.Generation != 1 || !a.AllArrived || a.State.GetGeneration() != 3 {
		t.Fatalf("arrival %+v", a)
	}
	if g := f.generations(); !slices.Equal(g, []int64{1, 1}) {
		t.Fatalf("expected_generation per attempt %v, want [1 1] (no arrival at 3)", g)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.arrived[3]) != 0 {
		t.Fatalf("counted at generation 3: %v", f.arrived[3])
	}
}

// A refusal that proves the arrival never reached the log (NOT_LEADER)
// is not "uncertain": after two trips, Arrive arrives at the current
// generation; and a generation given explicitly is not changed: the
// mismatch is returned, naming the current generation.
func TestArriveAfterRefusalAndExplicitGeneration(t *testing.T) {
	f := newBarrierFake(1)
	f.refuse[1] = true
	f.before[2] = func(f *barrierFake) {
		f.arriveLocked("y", 1)
		f.arriveLocked("z", 2) // now at 3
	}
	b := startBarrierFake(t, f)
	a, err := b.Arrive(testCtx(t), "p", 0)
	if err != nil {
		t.Fatal(err)
	}
	if a.Generation != 3 || !a.AllArrived {
		t.Fatalf("arrival %+v, want counted at 3", a)
	}
	_, err = b.Arrive(testCtx(t), "p", 2)
	var ge *GenerationError
	if !errors.Is(err, ErrGenerationMismatch) || !errors.As(err, &ge) || ge.Current != 4 || ge.Expected != 2 ||
		status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("explicit stale generation: %v", err)
	}
}

// jobsFake counts CompleteJobsFromWaitGroup batches and refuses new jobs
// once the group has expired.
type jobsFake struct {
	fakeNode
	mu      sync.Mutex
	batches [][]string
	done    map[string]bool
	expired bool
}

func (f *jobsFake) CompleteJobsFromWaitGroup(_ context.Context, r *pb.CompleteJobsFromWaitGroupRequest) (*pb.CompleteJobsFromWaitGroupResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var ids []string
	newly := int64(0)
	for _, j := range r.Jobs {
		ids = append(ids, j.JobId)
		if !f.done[j.JobId] {
			newly++
		}
	}
	f.batches = append(f.batches, ids)
	if newly > 0 && f.expired {
		st, _ := status.New(codes.FailedPrecondition, `wait group "g" is WAIT_GROUP_STATUS_EXPIRED`).WithDetails(
			&errdetails.ErrorInfo{Reason: apierr.WaitGroupNotActive, Domain: apierr.Domain,
				Metadata: map[string]string{apierr.KeyStatus: "WAIT_GROUP_STATUS_EXPIRED"}})
		return nil, st.Err()
	}
	for _, id := range ids {
		f.done[id] = true
	}
	return &pb.CompleteJobsFromWaitGroupResponse{WaitGroup: &pb.WaitGroup{Name: "g", CompletedJobs: int64(len(f.done)), Counter: 1000},
		NewlyCompleted: newly}, nil
}

// CompleteJobs sends batches of BatchSize in order and sums the new
// jobs; new jobs for an expired group match ErrWaitGroupNotActive and
// ErrWaitGroupExpired and keep their gRPC code.
func TestCompleteJobsBatchesAndExpiry(t *testing.T) {
	f := &jobsFake{done: map[string]bool{}}
	addr := startFakeServer(t, f)
	c, err := New(testCtx(t), fastConfig(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	w := c.WaitGroup("ns", "g")
	var ids []string
	for i := range 250 {
		ids = append(ids, "job-"+strconv.Itoa(i))
	}
	ids = append(ids, "job-7") // twice in one call: counted once
	res, err := w.Complete(testCtx(t), ids...)
	if err != nil {
		t.Fatal(err)
	}
	if res.NewlyCompleted != 250 || res.WaitGroup.GetCompletedJobs() != 250 {
		t.Fatalf("completion %+v", res)
	}
	f.mu.Lock()
	sizes := []int{}
	for _, b := range f.batches {
		sizes = append(sizes, len(b))
	}
	f.mu.Unlock()
	if !slices.Equal(sizes, []int{100, 100, 51}) {
		t.Fatalf("batch sizes %v", sizes)
	}
	// Again: nothing new.
	w.BatchSize = 200
	res, err = w.Complete(testCtx(t), ids...)
	if err != nil || res.NewlyCompleted != 0 {
		t.Fatalf("again: %+v %v", res, err)
	}
	if _, err := w.Complete(testCtx(t)); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("no jobs: %v", err)
	}
	f.mu.Lock()
	f.expired = true
	f.mu.Unlock()
	_, err = w.Complete(testCtx(t), "job-1", "late")
	if !errors.Is(err, ErrWaitGroupNotActive) || !errors.Is(err, ErrWaitGroupExpired) || status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("expired: %v", err)
	}
	// Only jobs done already: succeeds whatever the status.
	if res, err := w.Complete(testCtx(t), "job-1"); err != nil || res.NewlyCompleted != 0 {
		t.Fatalf("retry into an expired group: %+v %v", res, err)
	}
}
