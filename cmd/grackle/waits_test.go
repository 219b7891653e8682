package main

// The waitgroup and barrier commands against an in-process fake: flags,
// requests, output and exit codes, without a real server.

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/grackle-coord/grackle/apierr"
	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
)

// waitsFake adds wait groups and barriers (one namespace) to fakeServer,
// with the contract's rules in a few lines each; a change wakes the
// waiting calls.
type waitsFake struct {
	*fakeServer
	groups   map[string]*pb.WaitGroup
	jobs     map[string]map[string]bool
	barriers map[string]*pb.Barrier
	arrived  map[string]map[int64][]string // barrier -> generation -> processes
	wake     chan struct{}                 // closed and replaced on every change
}

func startWaitsFake(t *testing.T) (*waitsFake, string) {
	t.Helper()
	f := &waitsFake{
		fakeServer: &fakeServer{namespaces: map[string]*pb.Namespace{}, semaphores: map[string]*pb.Semaphore{}, leases: map[string]*pb.SemaphoreLease{}},
		groups:     map[string]*pb.WaitGroup{}, jobs: map[string]map[string]bool{},
		barriers: map[string]*pb.Barrier{}, arrived: map[string]map[int64][]string{}, wake: make(chan struct{}),
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	pb.RegisterGrackleServiceServer(srv, f)
	pb.RegisterClusterServiceServer(srv, f)
	f.addr = lis.Addr().String()
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	return f, f.addr
}

// requestsOf returns the recorded requests of T's type, in order.
func requestsOf[T proto.Message](f *fakeServer) []T {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []T
	for _, r := range f.requests {
		if x, ok := r.(T); ok {
			out = append(out, x)
		}
	}
	return out
}

func (f *waitsFake) changedLocked() {
	close(f.wake)
	f.wake = make(chan struct{})
}

// errWithInfo is a status error with a Grackle ErrorInfo.
func errWithInfo(code codes.Code, reason, msg string, md map[string]string) error {
	st, _ := status.New(code, msg).WithDetails(&errdetails.ErrorInfo{Reason: reason, Domain: apierr.Domain, Metadata: md})
	return st.Err()
}

func (f *waitsFake) groupLocked(name string) (*pb.WaitGroup, error) {
	g, ok := f.groups[name]
	if !ok {
		return nil, notFound(apierr.WaitGroupNotFound, "wait group %q not found", name)
	}
	return g, nil
}

func (f *waitsFake) CreateWaitGroup(ctx context.Context, r *pb.CreateWaitGroupRequest) (*pb.CreateWaitGroupResponse, error) {
	f.record(ctx, r)
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.groups[r.WaitGroupName]; ok {
		return nil, status.Errorf(codes.AlreadyExists, "wait group %q already exists", r.WaitGroupName)
	}
	g := &pb.WaitGroup{Name: r.WaitGroupName, Description: r.Description, Counter: r.Counter, Status: pb.WaitGroupStatus_WAIT_GROUP_STATUS_ACTIVE,
		ExpiresAt: r.ExpiresAt, DeleteAfterFinishedSeconds: r.DeleteAfterFinishedSeconds, Metadata: r.Metadata, Version: 1,
		CreatedAt: seedCreated, UpdatedAt: seedCreated, LastActivityAt: seedCreated}
	f.groups[g.Name] = g
	f.jobs[g.Name] = map[string]bool{}
	return &pb.CreateWaitGroupResponse{WaitGroup: proto.Clone(g).(*pb.WaitGroup)}, nil
}

func (f *waitsFake) GetWaitGroup(ctx context.Context, r *pb.GetWaitGroupRequest) (*pb.GetWaitGroupResponse, error) {
	f.record(ctx, r)
	f.mu.Lock()
	defer f.mu.Unlock()
	g, err := f.groupLocked(r.WaitGroupName)
	if err != nil {
		return nil, err
	}
	return &pb.GetWaitGroupResponse{WaitGroup: proto.Clone(g).(*pb.WaitGroup)}, nil
}

func (f *waitsFake) ListWaitGroups(ctx context.Context, r *pb.ListWaitGroupsRequest) (*pb.ListWaitGroupsResponse, error) {
	f.record(ctx, r)
	f.mu.Lock()
	defer f.mu.Unlock()
	out := &pb.ListWaitGroupsResponse{}
	for _, g := range f.groups {
		out.WaitGroups = append(out.WaitGroups, proto.Clone(g).(*pb.WaitGroup))
	}
	sort.Slice(out.WaitGroups, func(i, j int) bool { return out.WaitGroups[i].Name < out.WaitGroups[j].Name })
	return out, nil
}

func (f *waitsFake) UpdateWaitGroup(ctx context.Context, r *pb.UpdateWaitGroupRequest) (*pb.UpdateWaitGroupResponse, error) {
	f.record(ctx, r)
	f.mu.Lock()
	defer f.mu.Unlock()
	g, err := f.groupLocked(r.WaitGroupName)
	if err != nil {
		return nil, err
	}
	if r.ExpectedVersion != g.Version {
		return nil, status.Error(codes.InvalidArgument, "version mismatch")
	}
	g.Description, g.Counter, g.ExpiresAt, g.DeleteAfterFinishedSeconds, g.Metadata = r.Description, r.Counter, r.ExpiresAt, r.DeleteAfterFinishedSeconds, r.Metadata
	g.Version++
	if g.CompletedJobs == g.Counter {
		g.Status, g.FinishedAt = pb.WaitGroupStatus_WAIT_GROUP_STATUS_COMPLETED, seedExpires
		f.changedLocked()
	}
	return &pb.UpdateWaitGroupResponse{WaitGroup: proto.Clone(g).(*pb.WaitGroup)}, nil
}

func (f *waitsFake) DeleteWaitGroup(ctx context.Context, r *pb.DeleteWaitGroupRequest) (*pb.DeleteWaitGroupResponse, error) {
	f.record(ctx, r)
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.groups[r.WaitGroupName]
	delete(f.groups, r.WaitGroupName)
	f.changedLocked()
	return &pb.DeleteWaitGroupResponse{Existed: ok}, nil
}

func (f *waitsFake) CompleteJobsFromWaitGroup(ctx context.Context, r *pb.CompleteJobsFromWaitGroupRequest) (*pb.CompleteJobsFromWaitGroupResponse, error) {
	f.record(ctx, r)
	f.mu.Lock()
	defer f.mu.Unlock()
	g, err := f.groupLocked(r.WaitGroupName)
	if err != nil {
		return nil, err
	}
	fresh := map[string]bool{}
	for _, j := range r.Jobs {
		if !f.jobs[g.Name][j.JobId] {
			fresh[j.JobId] = true
		}
	}
	switch {
	case len(fresh) > 0 && g.Status != pb.WaitGroupStatus_WAIT_GROUP_STATUS_ACTIVE:
		return nil, errWithInfo(codes.FailedPrecondition, apierr.WaitGroupNotActive, "wait group "+strconv.Quote(g.Name)+" is "+g.Status.String(),
			map[string]string{apierr.KeyStatus: g.Status.String()})
	case g.CompletedJobs+int64(len(fresh)) > g.Counter:
		return nil, status.Error(codes.InvalidArgument, "jobs: too many jobs")
	}
	for id := range fresh {
		f.jobs[g.Name][id] = true
	}
	g.CompletedJobs += int64(len(fresh))
	if g.CompletedJobs == g.Counter {
		g.Status, g.FinishedAt = pb.WaitGroupStatus_WAIT_GROUP_STATUS_COMPLETED, seedExpires
		f.changedLocked()
	}
	return &pb.CompleteJobsFromWaitGroupResponse{WaitGroup: proto.Clone(g).(*pb.WaitGroup), NewlyCompleted: int64(len(fresh))}, nil
}

func (f *waitsFake) ListWaitGroupCompletedJobs(ctx context.Context, r *pb.ListWaitGroupCompletedJobsRequest) (*pb.ListWaitGroupCompletedJobsResponse, error) {
	f.record(ctx, r)
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, err := f.groupLocked(r.WaitGroupName); err != nil {
		return nil, err
	}
	out := &pb.ListWaitGroupCompletedJobsResponse{}
	for id := range f.jobs[r.WaitGroupName] {
		out.Jobs = append(out.Jobs, &pb.WaitGroupJob{JobId: id, CompletedAt: seedCreated})
	}
	sort.Slice(out.Jobs, func(i, j int) bool { return out.Jobs[i].JobId < out.Jobs[j].JobId })
	return out, nil
}

// await waits until done() (under f.mu) or timeout; it returns with f.mu
// held.
func (f *waitsFake) await(ctx context.Context, timeout time.Duration, done func() (bool, error)) error {
	end := time.After(timeout)
	f.mu.Lock()
	for {
		if ok, err := done(); ok || err != nil {
			return err
		}
		wake := f.wake
		f.mu.Unlock()
		select {
		case <-wake:
		case <-end:
			f.mu.Lock()
			return nil
		case <-ctx.Done():
			f.mu.Lock()
			return ctx.Err()
		}
		f.mu.Lock()
	}
}

func (f *waitsFake) WaitForWaitGroup(ctx context.Context, r *pb.WaitForWaitGroupRequest) (*pb.WaitForWaitGroupResponse, error) {
	f.record(ctx, r)
	var g *pb.WaitGroup
	err := f.await(ctx, time.Duration(r.TimeoutSeconds)*time.Second, func() (bool, error) {
		var err error
		g, err = f.groupLocked(r.WaitGroupName)
		return err == nil && g.Status != pb.WaitGroupStatus_WAIT_GROUP_STATUS_ACTIVE, err
	})
	defer f.mu.Unlock()
	if err != nil {
		return nil, err
	}
	out := &pb.WaitForWaitGroupResponse{WaitGroup: proto.Clone(g).(*pb.WaitGroup), Outcome: pb.WaitGroupWaitOutcome_WAIT_GROUP_WAIT_OUTCOME_TIMED_OUT}
	switch g.Status {
	case pb.WaitGroupStatus_WAIT_GROUP_STATUS_COMPLETED:
		out.Outcome = pb.WaitGroupWaitOutcome_WAIT_GROUP_WAIT_OUTCOME_COMPLETED
	case pb.WaitGroupStatus_WAIT_GROUP_STATUS_EXPIRED:
		out.Outcome = pb.WaitGroupWaitOutcome_WAIT_GROUP_WAIT_OUTCOME_EXPIRED
	}
	return out, nil
}

func (f *waitsFake) barrierLocked(name string) (*pb.Barrier, error) {
	b, ok := f.barriers[name]
	if !ok {
		return nil, notFound(apierr.BarrierNotFound, "barrier %q not found", name)
	}
	return b, nil
}

func mismatchErr(cur int64, msg string) error {
	return errWithInfo(codes.FailedPrecondition, apierr.GenerationMismatch, msg, map[string]string{apierr.KeyCurrentGeneration: strconv.FormatInt(cur, 10)})
}

func (f *waitsFake) CreateBarrier(ctx context.Context, r *pb.CreateBarrierRequest) (*pb.CreateBarrierResponse, error) {
	f.record(ctx, r)
	f.mu.Lock()
	defer f.mu.Unlock()
	b := &pb.Barrier{Name: r.BarrierName, Description: r.Description, ExpectedProcesses: r.ExpectedProcesses, Generation: 1,
		DeleteInactiveAfterSeconds: r.DeleteInactiveAfterSeconds, Metadata: r.Metadata, Version: 1,
		CreatedAt: seedCreated, UpdatedAt: seedCreated, LastActivityAt: seedCreated}
	f.barriers[b.Name] = b
	f.arrived[b.Name] = map[int64][]string{}
	return &pb.CreateBarrierResponse{Barrier: proto.Clone(b).(*pb.Barrier)}, nil
}

func (f *waitsFake) GetBarrier(ctx context.Context, r *pb.GetBarrierRequest) (*pb.GetBarrierResponse, error) {
	f.record(ctx, r)
	f.mu.Lock()
	defer f.mu.Unlock()
	b, err := f.barrierLocked(r.BarrierName)
	if err != nil {
		return nil, err
	}
	return &pb.GetBarrierResponse{Barrier: proto.Clone(b).(*pb.Barrier)}, nil
}

func (f *waitsFake) ListBarriers(ctx context.Context, r *pb.ListBarriersRequest) (*pb.ListBarriersResponse, error) {
	f.record(ctx, r)
	f.mu.Lock()
	defer f.mu.Unlock()
	out := &pb.ListBarriersResponse{}
	for _, b := range f.barriers {
		out.Barriers = append(out.Barriers, proto.Clone(b).(*pb.Barrier))
	}
	sort.Slice(out.Barriers, func(i, j int) bool { return out.Barriers[i].Name < out.Barriers[j].Name })
	return out, nil
}

// tripLocked ends b's generation.
func (f *waitsFake) tripLocked(b *pb.Barrier) {
	b.Generation++
	b.ArrivedProcesses = 0
	f.changedLocked()
}

func (f *waitsFake) UpdateBarrier(ctx context.Context, r *pb.UpdateBarrierRequest) (*pb.UpdateBarrierResponse, error) {
	f.record(ctx, r)
	f.mu.Lock()
	defer f.mu.Unlock()
	b, err := f.barrierLocked(r.BarrierName)
	if err != nil {
		return nil, err
	}
	if r.ExpectedVersion != b.Version {
		return nil, status.Error(codes.InvalidArgument, "version mismatch")
	}
	if r.ExpectedProcesses < b.ArrivedProcesses {
		return nil, status.Error(codes.FailedPrecondition, "expected_processes: below the arrivals")
	}
	b.Description, b.ExpectedProcesses, b.DeleteInactiveAfterSeconds, b.Metadata = r.Description, r.ExpectedProcesses, r.DeleteInactiveAfterSeconds, r.Metadata
	b.Version++
	tripped := b.ArrivedProcesses > 0 && b.ArrivedProcesses == b.ExpectedProcesses
	if tripped {
		f.tripLocked(b)
	}
	return &pb.UpdateBarrierResponse{Barrier: proto.Clone(b).(*pb.Barrier), Tripped: tripped}, nil
}

func (f *waitsFake) DeleteBarrier(ctx context.Context, r *pb.DeleteBarrierRequest) (*pb.DeleteBarrierResponse, error) {
	f.record(ctx, r)
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.barriers[r.BarrierName]
	delete(f.barriers, r.BarrierName)
	f.changedLocked()
	return &pb.DeleteBarrierResponse{Existed: ok}, nil
}

func (f *waitsFake) ArriveAtBarrier(ctx context.Context, r *pb.ArriveAtBarrierRequest) (*pb.ArriveAtBarrierResponse, error) {
	f.record(ctx, r)
	f.mu.Lock()
	defer f.mu.Unlock()
	b, err := f.barrierLocked(r.BarrierName)
	if err != nil {
		return nil, err
	}
	arr := f.arrived[b.Name]
	all := false
	switch g := r.ExpectedGeneration; {
	case g == b.Generation && slices.Contains(arr[g], r.ProcessId):
	case g == b.Generation:
		arr[g] = append(arr[g], r.ProcessId)
		b.ArrivedProcesses++
		if b.ArrivedProcesses == b.ExpectedProcesses {
			f.tripLocked(b)
			all = true
		}
	case g == b.Generation-1 && slices.Contains(arr[g], r.ProcessId):
		all = true
	default:
		return nil, mismatchErr(b.Generation, "expected_generation: barrier "+strconv.Quote(b.Name)+" is at generation "+strconv.FormatInt(b.Generation, 10))
	}
	return &pb.ArriveAtBarrierResponse{Barrier: proto.Clone(b).(*pb.Barrier), AllArrived: all}, nil
}

func (f *waitsFake) WaitAtBarrier(ctx context.Context, r *pb.WaitAtBarrierRequest) (*pb.WaitAtBarrierResponse, error) {
	f.record(ctx, r)
	var b *pb.Barrier
	err := f.await(ctx, time.Duration(r.TimeoutSeconds)*time.Second, func() (bool, error) {
		var err error
		if b, err = f.barrierLocked(r.BarrierName); err != nil {
			return false, err
		}
		if r.ExpectedGeneration > b.Generation {
			return false, mismatchErr(b.Generation, "expected_generation: not begun")
		}
		return b.Generation > r.ExpectedGeneration, nil
	})
	defer f.mu.Unlock()
	if err != nil {
		return nil, err
	}
	out := &pb.WaitAtBarrierResponse{Barrier: proto.Clone(b).(*pb.Barrier), Outcome: pb.BarrierWaitOutcome_BARRIER_WAIT_OUTCOME_TIMED_OUT}
	if b.Generation > r.ExpectedGeneration {
		out.Outcome = pb.BarrierWaitOutcome_BARRIER_WAIT_OUTCOME_TRIPPED
	}
	return out, nil
}

func (f *waitsFake) ListBarrierParticipants(ctx context.Context, r *pb.ListBarrierParticipantsRequest) (*pb.ListBarrierParticipantsResponse, error) {
	f.record(ctx, r)
	f.mu.Lock()
	defer f.mu.Unlock()
	b, err := f.barrierLocked(r.BarrierName)
	if err != nil {
		return nil, err
	}
	g := r.Generation
	if g == 0 {
		g = b.Generation
	}
	out := &pb.ListBarrierParticipantsResponse{Generation: g}
	for _, p := range f.arrived[b.Name][g] {
		out.Participants = append(out.Participants, &pb.BarrierParticipant{ProcessId: p, Generation: g, ArrivedAt: seedCreated})
	}
	return out, nil
}

func TestWaitGroupCommandsAgainstFake(t *testing.T) {
	f, addr := startWaitsFake(t)
	env := map[string]string{"GRACKLE_ENDPOINTS": addr}

	t.Run("create: flags as the user types them", func(t *testing.T) {
		r := runCLI(t, env, "waitgroup", "create", "ns", "nightly", "--counter", "3", "--expires-in", "10m",
			"--delete-after-finished", "1h", "--description", "tonight", "--metadata", "team=data")
		wantOK(t, r)
		reqs := requestsOf[*pb.CreateWaitGroupRequest](f.fakeServer)
		want := &pb.CreateWaitGroupRequest{NamespaceName: "ns", WaitGroupName: "nightly", Description: "tonight", Counter: 3,
			ExpiresAt: testNow.Add(10 * time.Minute).UnixNano(), DeleteAfterFinishedSeconds: 3600, Metadata: map[string]string{"team": "data"}}
		if !proto.Equal(reqs[len(reqs)-1], want) {
			t.Errorf("request %v, want %v", reqs[len(reqs)-1], want)
		}
		for _, line := range []string{"Status:         ACTIVE\n", "Jobs done:      0 of 3 (3 left)\n",
			"Expires:        2023-09-27T15:05:00Z (in 10m00s)\n", "Deleted:        1h0m0s after finishing\n"} {
			if !strings.Contains(r.stdout, line) {
				t.Errorf("table lacks %q:\n%s", line, r.stdout)
			}
		}
		r = runCLI(t, env, "waitgroup", "create", "ns", "at", "--counter", "1", "--expires-at", "2023-09-27T16:00:00+01:00", "-o", "id")
		wantOK(t, r)
		if reqs := requestsOf[*pb.CreateWaitGroupRequest](f.fakeServer); reqs[len(reqs)-1].ExpiresAt != testNow.Add(5*time.Minute).UnixNano() || r.stdout != "at\n" {
			t.Errorf("--expires-at: %v, %q", reqs[len(reqs)-1], r.stdout)
		}
	})

	t.Run("update sends back what is not given, with the version read", func(t *testing.T) {
		r := runCLI(t, env, "waitgroup", "update", "ns", "nightly", "--counter", "5", "-o", "json")
		wantOK(t, r)
		reqs := requestsOf[*pb.UpdateWaitGroupRequest](f.fakeServer)
		want := &pb.UpdateWaitGroupRequest{NamespaceName: "ns", WaitGroupName: "nightly", Description: "tonight", Counter: 5,
			ExpiresAt: testNow.Add(10 * time.Minute).UnixNano(), DeleteAfterFinishedSeconds: 3600, Metadata: map[string]string{"team": "data"}, ExpectedVersion: 1}
		if !proto.Equal(reqs[len(reqs)-1], want) {
			t.Errorf("request %v, want %v", reqs[len(reqs)-1], want)
		}
		r = runCLI(t, env, "waitgroup", "update", "ns", "nightly", "--expires-at", "never", "--clear-metadata")
		wantOK(t, r)
		reqs = requestsOf[*pb.UpdateWaitGroupRequest](f.fakeServer)
		if got := reqs[len(reqs)-1]; got.ExpiresAt != 0 || got.Metadata != nil || got.Counter != 5 || got.ExpectedVersion != 2 {
			t.Errorf("request %v", got)
		}
		r = runCLI(t, env, "waitgroup", "update", "ns", "nightly", "--description", "x", "--expected-version", "1")
		if r.code != exitUsage || r.stderr != "grackle: waitgroup update: version mismatch\n" {
			t.Errorf("stale version: %d %q", r.code, r.stderr)
		}
	})

	t.Run("complete: batches of 100, new jobs counted, idempotent", func(t *testing.T) {
		wantOK(t, runCLI(t, env, "waitgroup", "create", "ns", "big", "--counter", "250"))
		var ids []string
		for i := range 240 {
			ids = append(ids, "job-"+strconv.Itoa(i))
		}
		file := filepath.Join(t.TempDir(), "jobs")
		if err := os.WriteFile(file, []byte(strings.Join(ids[10:], "\n")+"\n\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		before := len(requestsOf[*pb.CompleteJobsFromWaitGroupRequest](f.fakeServer))
		args := append([]string{"waitgroup", "complete", "ns", "big"}, ids[:10]...)
		r := runCLI(t, env, append(args, "--jobs-file", file, "--metadata", "worker=w1")...)
		wantOK(t, r)
		reqs := requestsOf[*pb.CompleteJobsFromWaitGroupRequest](f.fakeServer)[before:]
		var sizes []int
		for _, q := range reqs {
			sizes = append(sizes, len(q.Jobs))
		}
		if !slices.Equal(sizes, []int{100, 100, 40}) || reqs[0].Jobs[0].JobId != "job-0" || reqs[2].Jobs[39].JobId != "job-239" ||
			reqs[1].Jobs[5].Metadata["worker"] != "w1" {
			t.Fatalf("batches %v", sizes)
		}
		if !strings.HasSuffix(r.stdout, "240 new of 240 job(s) given; 240 of 250 done, ACTIVE\n") {
			t.Errorf("stdout:\n%s", r.stdout)
		}
		r = runCLI(t, env, "waitgroup", "complete", "ns", "big", "job-1", "job-1", "job-240", "-o", "template={{.newly_completed}} {{.wait_group.completed_jobs}}")
		wantOK(t, r)
		if r.stdout != "1 241\n" {
			t.Errorf("again: %q", r.stdout)
		}
		r = runCLI(t, env, "waitgroup", "jobs", "ns", "big", "-o", "id")
		if wantOK(t, r); strings.Count(r.stdout, "\n") != 241 {
			t.Errorf("jobs: %d lines", strings.Count(r.stdout, "\n"))
		}
	})

	t.Run("complete: too many jobs is bad input; an expired group exits 5", func(t *testing.T) {
		wantOK(t, runCLI(t, env, "waitgroup", "create", "ns", "two", "--counter", "2"))
		r := runCLI(t, env, "waitgroup", "complete", "ns", "two", "a", "b", "c")
		if r.code != exitUsage || r.stderr != "grackle: waitgroup complete: jobs: too many jobs\n" {
			t.Errorf("too many: %d %q", r.code, r.stderr)
		}
		f.mu.Lock()
		f.groups["two"].Status = pb.WaitGroupStatus_WAIT_GROUP_STATUS_EXPIRED
		f.mu.Unlock()
		r = runCLI(t, env, "waitgroup", "complete", "ns", "two", "a")
		if r.code != exitExpired || r.stderr != "grackle: waitgroup complete: wait group \"two\" is WAIT_GROUP_STATUS_EXPIRED\n" {
			t.Errorf("expired: %d %q", r.code, r.stderr)
		}
		var ids []string
		for i := range 150 {
			ids = append(ids, "j"+strconv.Itoa(i))
		}
		wantOK(t, runCLI(t, env, "waitgroup", "create", "ns", "done", "--counter", "100"))
		r = runCLI(t, env, append([]string{"waitgroup", "complete", "ns", "done"}, ids...)...)
		if r.code != exitCallFailed || r.stderr != "grackle: waitgroup complete: call 2 of 2 (jobs 101..150; the calls before it are applied): wait group \"done\" is WAIT_GROUP_STATUS_COMPLETED\n" {
			t.Errorf("second call refused: %d %q", r.code, r.stderr)
		}
	})

	t.Run("wait: exit codes", func(t *testing.T) {
		// COMPLETED at once; a --wait past the server's maximum asks 300s.
		r := runCLI(t, env, "waitgroup", "wait", "ns", "done", "--wait", "10m", "-o", "template={{.outcome}}")
		wantOK(t, r)
		req, left := f.last()
		if r.stdout != "WAIT_GROUP_WAIT_OUTCOME_COMPLETED\n" || req.(*pb.WaitForWaitGroupRequest).TimeoutSeconds != 300 ||
			left <= 300*time.Second || left > 300*time.Second+defaultTimeout {
			t.Errorf("completed: %q %v deadline %v", r.stdout, req, left)
		}
		// EXPIRED: 5.
		r = runCLI(t, env, "waitgroup", "wait", "ns", "two")
		if r.code != exitExpired || r.stderr != "grackle: waitgroup wait: EXPIRED: wait group \"two\" expired with 0 of 2 jobs done; it will never complete\n" ||
			!strings.HasPrefix(r.stdout, "Outcome:        EXPIRED\n") {
			t.Errorf("expired: %d %q\n%s", r.code, r.stderr, r.stdout)
		}
		// Look once, and a wait that times out: 3.
		r = runCLI(t, env, "waitgroup", "wait", "ns", "big", "--wait", "0")
		if r.code != exitNotAcquired || r.stderr != "grackle: waitgroup wait: TIMED_OUT: wait group \"big\" has not finished (241 of 250 jobs done; --wait 30s waits)\n" {
			t.Errorf("look once: %d %q", r.code, r.stderr)
		}
		if req, _ := f.last(); req.(*pb.WaitForWaitGroupRequest).TimeoutSeconds != 0 {
			t.Errorf("look once sent %v", req)
		}
		start := time.Now()
		r = runCLI(t, env, "waitgroup", "wait", "ns", "big", "--wait", "1500ms")
		if r.code != exitNotAcquired || r.stderr != "grackle: waitgroup wait: TIMED_OUT: wait group \"big\" not finished within 1.5s (241 of 250 jobs done)\n" {
			t.Errorf("timed out: %d %q", r.code, r.stderr)
		}
		if d := time.Since(start); d < 1500*time.Millisecond || d > 5*time.Second {
			t.Errorf("timed out after %v", d)
		}
		// Woken by the completing call.
		done := make(chan cliResult, 1)
		go func() { done <- runCLI(t, env, "waitgroup", "wait", "ns", "big", "--wait", "30s", "-o", "id") }()
		time.Sleep(300 * time.Millisecond)
		var rest []string
		for i := 240; i < 250; i++ {
			rest = append(rest, "job-"+strconv.Itoa(i))
		}
		wantOK(t, runCLI(t, env, append([]string{"waitgroup", "complete", "ns", "big"}, rest...)...))
		select {
		case r := <-done:
			if r.code != 0 || r.stdout != "big\n" {
				t.Errorf("woken: %d %q %q", r.code, r.stdout, r.stderr)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the wait was not woken by the completion")
		}
		r = runCLI(t, env, "waitgroup", "wait", "ns", "missing")
		if r.code != exitCallFailed || r.stderr != "grackle: waitgroup wait: wait group \"missing\" not found\n" {
			t.Errorf("missing: %d %q", r.code, r.stderr)
		}
	})

	t.Run("wait: a status line with the jobs done, on a terminal only", func(t *testing.T) {
		wantOK(t, runCLI(t, env, "waitgroup", "create", "ns", "slow", "--counter", "4"))
		wantOK(t, runCLI(t, env, "waitgroup", "complete", "ns", "slow", "a"))
		r := runCLIOpts(t, context.Background(), env, nil, true, "waitgroup", "wait", "ns", "slow", "--wait", "2s", "-o", "id")
		if r.code != exitNotAcquired || !strings.Contains(r.stdout, "\r\x1b[2Kwaiting for wait group ns/slow: ") ||
			!strings.Contains(r.stdout, "s left, 1 of 4 jobs done") || !strings.HasSuffix(r.stdout, "\r\x1b[2Kslow\n") {
			t.Errorf("terminal: %d %q", r.code, r.stdout)
		}
		r = runCLIOpts(t, context.Background(), env, nil, true, "waitgroup", "wait", "ns", "slow", "--wait", "1s", "-o", "id", "--quiet")
		if r.code != exitNotAcquired || r.stdout != "slow\n" {
			t.Errorf("quiet: %d %q", r.code, r.stdout)
		}
	})

	t.Run("delete and list", func(t *testing.T) {
		r := runCLI(t, env, "waitgroup", "list", "ns")
		wantOK(t, r)
		if !strings.HasPrefix(r.stdout, "NAME     STATUS     DONE  COUNTER  EXPIRES") || !strings.Contains(r.stdout, "\nbig      COMPLETED  250   250 ") {
			t.Errorf("list:\n%s", r.stdout)
		}
		if got := strings.Join(completions(t, env, "waitgroup", "wait", "ns", "s"), " "); got != "slow" {
			t.Errorf("completion: %q", got)
		}
		r = runCLI(t, env, "waitgroup", "delete", "ns", "slow")
		if wantOK(t, r); r.stdout != "wait group \"slow\" deleted from namespace \"ns\"\n" {
			t.Errorf("delete: %q", r.stdout)
		}
		r = runCLI(t, env, "waitgroup", "delete", "ns", "slow")
		if wantOK(t, r); r.stdout != "wait group \"slow\" did not exist in namespace \"ns\"\n" {
			t.Errorf("delete again: %q", r.stdout)
		}
	})
}

func TestBarrierCommandsAgainstFake(t *testing.T) {
	f, addr := startWaitsFake(t)
	env := map[string]string{"GRACKLE_ENDPOINTS": addr}

	r := runCLI(t, env, "barrier", "create", "ns", "phase", "--expected-processes", "2", "--delete-inactive-after", "24h")
	wantOK(t, r)
	if !strings.Contains(r.stdout, "Arrived:        0 of 2\n") || !strings.Contains(r.stdout, "Deleted:        24h0m0s after the last activity\n") {
		t.Errorf("create:\n%s", r.stdout)
	}

	// Arrive at the current generation (read first); -o id prints it.
	f.mu.Lock()
	f.barriers["phase"].Generation = 4
	f.mu.Unlock()
	r = runCLI(t, env, "barrier", "arrive", "ns", "phase", "--process-id", "shard-1", "--metadata", "host=a", "-o", "id")
	wantOK(t, r)
	reqs := requestsOf[*pb.ArriveAtBarrierRequest](f.fakeServer)
	if want := (&pb.ArriveAtBarrierRequest{NamespaceName: "ns", BarrierName: "phase", ProcessId: "shard-1", ExpectedGeneration: 4,
		Metadata: map[string]string{"host": "a"}}); !proto.Equal(reqs[len(reqs)-1], want) || r.stdout != "4\n" {
		t.Errorf("arrive: %v, %q", reqs[len(reqs)-1], r.stdout)
	}
	r = runCLI(t, env, "barrier", "arrive", "ns", "phase", "--process-id", "shard-1")
	wantOK(t, r)
	if !strings.HasPrefix(r.stdout, "Arrived at generation:  4\nAll arrived:            no\n") || !strings.Contains(r.stdout, "Arrived:                1 of 2\n") {
		t.Errorf("arrive again (counted once):\n%s", r.stdout)
	}
	r = runCLI(t, env, "barrier", "arrive", "ns", "phase", "--process-id", "shard-1", "--generation", "2")
	if r.code != exitCallFailed || r.stderr != "grackle: barrier arrive: GENERATION_MISMATCH: barrier \"phase\" is at generation 4, not 2\n" {
		t.Errorf("mismatch: %d %q", r.code, r.stderr)
	}

	// A waiting arrival is released by the last one, which returns at once.
	done := make(chan cliResult, 1)
	go func() {
		done <- runCLI(t, env, "barrier", "arrive", "ns", "phase", "--process-id", "shard-1", "--wait=30s", "-o", "id")
	}()
	time.Sleep(300 * time.Millisecond)
	r = runCLI(t, env, "barrier", "arrive", "ns", "phase", "--process-id", "shard-2", "--wait=30s", "-o", "json")
	wantOK(t, r)
	if !strings.Contains(r.stdout, `"outcome": "BARRIER_WAIT_OUTCOME_TRIPPED"`) || !strings.Contains(r.stdout, `"generation": 5`) {
		t.Errorf("the last arrival:\n%s", r.stdout)
	}
	select {
	case r := <-done:
		if r.code != 0 || r.stdout != "4\n" {
			t.Errorf("released: %d %q %q", r.code, r.stdout, r.stderr)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiting arrival was not released")
	}

	// wait: a tripped generation at once; the current one times out (3).
	r = runCLI(t, env, "barrier", "wait", "ns", "phase", "--generation", "4", "-o", "id")
	if wantOK(t, r); r.stdout != "4\n" {
		t.Errorf("wait for 4: %q", r.stdout)
	}
	wantOK(t, runCLI(t, env, "barrier", "arrive", "ns", "phase", "--process-id", "x"))
	r = runCLI(t, env, "barrier", "wait", "ns", "phase", "--wait", "1s")
	if r.code != exitNotAcquired || r.stderr != "grackle: barrier wait: TIMED_OUT: barrier \"phase\" generation 5 has not tripped within 1s (1 of 2 arrived at generation 5)\n" {
		t.Errorf("timed out: %d %q", r.code, r.stderr)
	}
	r = runCLIOpts(t, context.Background(), env, nil, true, "barrier", "arrive", "ns", "phase", "--process-id", "x", "--wait=2s", "-o", "id")
	if r.code != exitNotAcquired || !strings.Contains(r.stdout, "waiting for barrier ns/phase generation 5: ") ||
		!strings.Contains(r.stdout, "1 of 2 arrived at generation 5") || !strings.HasSuffix(r.stdout, "\r\x1b[2K5\n") ||
		!strings.Contains(r.stderr, "barrier arrive: TIMED_OUT") {
		t.Errorf("arrive --wait on a terminal: %d %q %q", r.code, r.stdout, r.stderr)
	}
	r = runCLI(t, env, "barrier", "participants", "ns", "phase")
	wantOK(t, r)
	if !strings.HasPrefix(r.stdout, "PROCESS ID  GENERATION  ARRIVED") || !strings.Contains(r.stdout, "\nx           5  ") {
		t.Errorf("participants:\n%s", r.stdout)
	}

	// update: lowering expected_processes to the arrivals trips it.
	r = runCLI(t, env, "barrier", "update", "ns", "phase", "--expected-processes", "1")
	wantOK(t, r)
	if !strings.HasSuffix(r.stdout, "barrier \"phase\" tripped by this update: generation 5 passed, now at 6\n") {
		t.Errorf("update:\n%s", r.stdout)
	}
	ureqs := requestsOf[*pb.UpdateBarrierRequest](f.fakeServer)
	if want := (&pb.UpdateBarrierRequest{NamespaceName: "ns", BarrierName: "phase", ExpectedProcesses: 1, DeleteInactiveAfterSeconds: 86400,
		ExpectedVersion: 1}); !proto.Equal(ureqs[len(ureqs)-1], want) {
		t.Errorf("update request %v", ureqs[len(ureqs)-1])
	}
	if got := strings.Join(completions(t, env, "barrier", "arrive", "ns", ""), " "); got != "phase" {
		t.Errorf("completion: %q", got)
	}
	r = runCLI(t, env, "barrier", "list", "ns", "-o", "id")
	if wantOK(t, r); r.stdout != "phase\n" {
		t.Errorf("list: %q", r.stdout)
	}
	r = runCLI(t, env, "barrier", "delete", "ns", "phase")
	if wantOK(t, r); r.stdout != "barrier \"phase\" deleted from namespace \"ns\"\n" {
		t.Errorf("delete: %q", r.stdout)
	}
}

// Bad input never reaches the network: one line naming the flag, exit 2.
func TestWaitsUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args   []string
		stderr string
	}{
		{[]string{"waitgroup", "create", "ns", "g"}, "grackle: waitgroup create: --counter is required (the number of jobs that complete the group, at least 1)"},
		{[]string{"waitgroup", "create", "ns", "g", "--counter", "0"}, "grackle: waitgroup create: --counter 0: must be at least 1"},
		{[]string{"waitgroup", "create", "ns", "g", "--counter", "1", "--expires-in", "1m", "--expires-at", "never"}, "grackle: waitgroup create: --expires-at and --expires-in exclude each other"},
		{[]string{"waitgroup", "create", "ns", "g", "--counter", "1", "--expires-at", "tomorrow"}, `grackle: waitgroup create: --expires-at tomorrow: want an RFC 3339 time like 2026-01-02T15:04:05Z (or never)`},
		{[]string{"waitgroup", "create", "ns", "g", "--counter", "1", "--expires-at", "2023-09-27T14:00:00Z"}, "grackle: waitgroup create: --expires-at 2023-09-27T14:00:00Z: not in the future (now 2023-09-27T14:55:00Z)"},
		{[]string{"waitgroup", "create", "ns", "g", "--counter", "1", "--expires-in", "-5m"}, "grackle: waitgroup create: --expires-in -5m: must be positive"},
		{[]string{"waitgroup", "create", "ns", "g", "--counter", "1", "--delete-after-finished", "31d"}, `grackle: waitgroup create: --delete-after-finished 31d: want a duration like 30s, 1m or 250ms (a bare number is seconds)`},
		{[]string{"waitgroup", "create", "ns", "g", "--counter", "1", "--delete-after-finished", "721h"}, "grackle: waitgroup create: --delete-after-finished 721h: at most 720h0m0s (30 days)"},
		{[]string{"waitgroup", "update", "ns", "g"}, "grackle: waitgroup update: nothing to update: give --counter"},
		{[]string{"waitgroup", "update", "ns", "g", "--counter", "-1"}, "grackle: waitgroup update: --counter -1: must be at least 1"},
		{[]string{"waitgroup", "complete", "ns", "g"}, "grackle: waitgroup complete: no jobs: give JOB_IDs or --jobs-file"},
		{[]string{"waitgroup", "complete", "ns"}, "grackle: waitgroup complete: want arguments NAMESPACE WAIT_GROUP JOB_ID..., got 1"},
		{[]string{"waitgroup", "complete", "ns", "g", "a", ""}, "grackle: waitgroup complete: JOB_ID: must not be empty"},
		{[]string{"waitgroup", "complete", "ns", "g", "--jobs-file", "/nonexistent/jobs"}, "grackle: waitgroup complete: --jobs-file /nonexistent/jobs: no such file or directory"},
		{[]string{"waitgroup", "complete", "ns", "g", "job 1"}, `grackle: waitgroup complete: JOB_ID "job 1": may contain only [-_0-9a-zA-Z], found ' ' at byte 3`},
		{[]string{"waitgroup", "wait", "ns", "g", "--wait", "-1s"}, "grackle: waitgroup wait: --wait -1s: must not be negative"},
		{[]string{"barrier", "create", "ns", "b"}, "grackle: barrier create: --expected-processes is required (how many processes trip the barrier, at least 1)"},
		{[]string{"barrier", "create", "ns", "b", "--expected-processes", "0"}, "grackle: barrier create: --expected-processes 0: must be at least 1"},
		{[]string{"barrier", "arrive", "ns", "b"}, "grackle: barrier arrive: --process-id is required (a stable ID of the arriving process, e.g. shard-3)"},
		{[]string{"barrier", "arrive", "ns", "b", "--process-id", "p", "--generation", "0"}, "grackle: barrier arrive: --generation 0: must be at least 1"},
		{[]string{"barrier", "wait", "ns", "b", "--generation", "-2"}, "grackle: barrier wait: --generation -2: must be at least 1"},
		{[]string{"barrier", "participants", "ns", "b", "--generation", "-1"}, "grackle: barrier participants: --generation -1: must be at least 0"},
		{[]string{"barrier", "update", "ns", "b", "--metadata", "a=1", "--clear-metadata"}, "grackle: barrier update: --metadata and --clear-metadata exclude each other"},
	} {
		r := runCLI(t, map[string]string{"GRACKLE_ENDPOINTS": "127.0.0.1:1"}, tc.args...)
		if r.code != exitUsage || !strings.HasPrefix(r.stderr, tc.stderr) || strings.Count(r.stderr, "\n") != 1 {
			t.Errorf("%q: exit %d stderr %q, want %q", tc.args, r.code, r.stderr, tc.stderr)
		}
	}
}
