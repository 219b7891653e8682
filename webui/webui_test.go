package webui

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/grackle-coord/grackle/apierr"
	"github.com/grackle-coord/grackle/client"
	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
)

// fake is a Backend whose answers the test sets; it records the requests.
type fake struct {
	mu        sync.Mutex
	locks     []*pb.Lock
	waiters   []*pb.LockWaiter
	leases    []*pb.LockLease
	streams   []*fakeStream // handed out by WatchLock in turn; then Unavailable
	semWatch  []client.WatchUpdate
	lockReqs  []*pb.ListLocksRequest
	waitReqs  []*pb.ListLockWaitersRequest
	leaseReqs []*pb.ListLockLeasesRequest
	watchReqs []*pb.WatchLockRequest
	tokens    []string
	w         fakeWaits
}

func (f *fake) token(ctx context.Context) {
	md, _ := metadata.FromOutgoingContext(ctx)
	f.tokens = append(f.tokens, strings.Join(md.Get("authorization"), ","))
}

// page serves items from the offset the token names, limit at a time.
func page[T any](items []T, tok string, limit int32) ([]T, string) {
	from := 0
	if tok != "" {
		fmt.Sscanf(tok, "at-%d", &from)
	}
	to := min(from+int(limit), len(items))
	next := ""
	if to < len(items) {
		next = fmt.Sprintf("at-%d", to)
	}
	return items[from:to], next
}

func (f *fake) ListNamespaces(context.Context, *pb.ListNamespacesRequest, ...grpc.CallOption) (*pb.ListNamespacesResponse, error) {
	return &pb.ListNamespacesResponse{}, nil
}

func (f *fake) ListSemaphores(context.Context, *pb.ListSemaphoresRequest, ...grpc.CallOption) (*pb.ListSemaphoresResponse, error) {
	return &pb.ListSemaphoresResponse{}, nil
}

func (f *fake) ListSemaphoreLeases(context.Context, *pb.ListSemaphoreLeasesRequest, ...grpc.CallOption) (*pb.ListSemaphoreLeasesResponse, error) {
	return &pb.ListSemaphoreLeasesResponse{}, nil
}

func (f *fake) GetClusterStatus(context.Context, *pb.GetClusterStatusRequest, ...grpc.CallOption) (*pb.GetClusterStatusResponse, error) {
	return &pb.GetClusterStatusResponse{}, nil
}

func (f *fake) Watch(ctx context.Context, ns, sem string) <-chan client.WatchUpdate {
	f.mu.Lock()
	ups := f.semWatch
	f.mu.Unlock()
	out := make(chan client.WatchUpdate)
	go func() {
		defer close(out)
		for _, u := range ups {
			select {
			case out <- u:
			case <-ctx.Done():
				return
			}
		}
		<-ctx.Done()
	}()
	return out
}

func (f *fake) ListLocks(ctx context.Context, in *pb.ListLocksRequest, _ ...grpc.CallOption) (*pb.ListLocksResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lockReqs = append(f.lockReqs, in)
	f.token(ctx)
	var sel []*pb.Lock
	for _, l := range f.locks {
		if in.Prefix == "" || l.Name == in.Prefix || strings.HasPrefix(l.Name, in.Prefix+"/") {
			sel = append(sel, l)
		}
	}
	got, next := page(sel, in.PaginationToken, in.Limit)
	return &pb.ListLocksResponse{Locks: got, NextPaginationToken: next}, nil
}

func (f *fake) ListLockWaiters(ctx context.Context, in *pb.ListLockWaitersRequest, _ ...grpc.CallOption) (*pb.ListLockWaitersResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.waitReqs = append(f.waitReqs, in)
	got, next := page(f.waiters, in.PaginationToken, in.Limit)
	return &pb.ListLockWaitersResponse{Waiters: got, NextPaginationToken: next}, nil
}

func (f *fake) ListLockLeases(ctx context.Context, in *pb.ListLockLeasesRequest, _ ...grpc.CallOption) (*pb.ListLockLeasesResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.leaseReqs = append(f.leaseReqs, in)
	var sel []*pb.LockLease
	for _, l := range f.leases {
		if in.ProcessId == "" || l.ProcessId == in.ProcessId {
			sel = append(sel, l)
		}
	}
	got, next := page(sel, in.PaginationToken, in.Limit)
	return &pb.ListLockLeasesResponse{Leases: got, NextPaginationToken: next}, nil
}

func (f *fake) WatchLock(ctx context.Context, in *pb.WatchLockRequest, _ ...grpc.CallOption) (grpc.ServerStreamingClient[pb.WatchLockResponse], error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.watchReqs = append(f.watchReqs, in)
	f.token(ctx)
	if len(f.streams) == 0 {
		return nil, status.Error(codes.Unavailable, "no leader")
	}
	s := f.streams[0]
	f.streams = f.streams[1:]
	if s.openErr != nil {
		return nil, s.openErr
	}
	s.ctx = ctx
	return s, nil
}

// fakeStream hands out msgs, then ends with end, or (end nil) waits for
// the call's context. With step set, every Recv after the first waits for
// the test's go-ahead (so no state is coalesced away before it is seen).
type fakeStream struct {
	grpc.ClientStream
	ctx     context.Context
	openErr error
	msgs    []*pb.WatchLockResponse
	end     error
	step    chan struct{}
	started bool
}

func (s *fakeStream) Recv() (*pb.WatchLockResponse, error) {
	if s.step != nil && s.started {
		select {
		case <-s.step:
		case <-s.ctx.Done():
			return nil, status.FromContextError(s.ctx.Err()).Err()
		}
	}
	s.started = true
	if len(s.msgs) > 0 {
		m := s.msgs[0]
		s.msgs = s.msgs[1:]
		return m, nil
	}
	if s.end != nil {
		return nil, s.end
	}
	<-s.ctx.Done()
	return nil, status.FromContextError(s.ctx.Err()).Err()
}

func serve(t *testing.T, f *fake) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(Handler(func(context.Context) (Backend, error) { return f, nil }))
	t.Cleanup(srv.Close)
	return srv
}

func getJSON(t *testing.T, url string, m proto.Message) int {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("Authorization", "Bearer s3cret")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var raw json.RawMessage
	if err := json.NewDecoder(res.Body).Decode(&raw); err != nil {
		t.Fatal(err)
	}
	if res.StatusCode == http.StatusOK {
		if err := protojson.Unmarshal(raw, m); err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
	}
	return res.StatusCode
}

func holder(lease, proc string, excl bool, token uint64) *pb.LockHolder {
	return &pb.LockHolder{LeaseId: lease, ProcessId: proc, Exclusive: excl, FencingToken: token, LockedAt: 1, ExpiresAt: 2}
}

// The locks list reads every page (up to maxListed), carries the prefix
// and the caller's token, and keeps each lock's holders.
func TestLocksReadsPagesWithPrefix(t *testing.T) {
	f := &fake{}
	for i := range 600 {
		f.locks = append(f.locks, &pb.Lock{Name: fmt.Sprintf("orders/eu/%04d", i), State: pb.LockState_LOCK_STATE_EXCLUSIVE_LOCKED,
			Holders: []*pb.LockHolder{holder(fmt.Sprintf("ll_%d", i), "host-1/pid-100", true, uint64(100+i))}})
	}
	f.locks = append(f.locks, &pb.Lock{Name: "orders/us", State: pb.LockState_LOCK_STATE_SHARED_LOCKED,
		Holders: []*pb.LockHolder{holder("ll_a", "p-a", false, 7), holder("ll_b", "p-b", false, 8)}})
	srv := serve(t, f)

	var all pb.ListLocksResponse
	if c := getJSON(t, srv.URL+"/ui/api/namespaces/shop/locks", &all); c != 200 || len(all.Locks) != 601 || all.NextPaginationToken != "" {
		t.Fatalf("status %d, %d locks, next %q; want 601 and no next", c, len(all.Locks), all.NextPaginationToken)
	}
	if us := all.Locks[600]; us.Name != "orders/us" || len(us.Holders) != 2 || us.Holders[1].FencingToken != 8 || us.Holders[1].Exclusive {
		t.Fatalf("last lock %v", us)
	}
	var us pb.ListLocksResponse
	if c := getJSON(t, srv.URL+"/ui/api/namespaces/shop/locks?prefix=orders/us", &us); c != 200 || len(us.Locks) != 1 {
		t.Fatalf("prefix orders/us: status %d, %v", c, us.Locks)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	last := f.lockReqs[len(f.lockReqs)-1]
	if last.NamespaceName != "shop" || last.Prefix != "orders/us" || f.tokens[0] != "Bearer s3cret" {
		t.Fatalf("request %v, token %q", last, f.tokens[0])
	}
}

// A namespace with more locks than the view lists: it stops at maxListed
// and says where the rest starts.
func TestLocksBoundedByMaxListed(t *testing.T) {
	f := &fake{}
	for i := range maxListed + 300 {
		f.locks = append(f.locks, &pb.Lock{Name: fmt.Sprintf("l%05d", i), State: pb.LockState_LOCK_STATE_SHARED_LOCKED})
	}
	srv := serve(t, f)
	var r pb.ListLocksResponse
	if c := getJSON(t, srv.URL+"/ui/api/namespaces/shop/locks", &r); c != 200 || len(r.Locks) != maxListed || r.NextPaginationToken == "" {
		t.Fatalf("status %d, %d locks, next %q; want %d and a next token", c, len(r.Locks), r.NextPaginationToken, maxListed)
	}
}

// A lock's queue: the name (slashes and all) comes from the path, every
// page is read, the fields survive.
func TestLockWaitersByName(t *testing.T) {
	f := &fake{}
	for i := range 300 {
		f.waiters = append(f.waiters, &pb.LockWaiter{LeaseId: fmt.Sprintf("ll_%d", i), ProcessId: "p", Exclusive: i == 0, Upgrade: i == 0,
			Position: int64(i + 1), WaitingSince: 5, Deadline: 9})
	}
	srv := serve(t, f)
	var r pb.ListLockWaitersResponse
	if c := getJSON(t, srv.URL+"/ui/api/namespaces/shop/lock-waiters/orders/eu/42", &r); c != 200 || len(r.Waiters) != 300 {
		t.Fatalf("status %d, %d waiters", c, len(r.Waiters))
	}
	if w := r.Waiters[0]; !w.Exclusive || !w.Upgrade || w.Position != 1 || w.Deadline != 9 {
		t.Fatalf("head %v", w)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if in := f.waitReqs[0]; in.NamespaceName != "shop" || in.LockName != "orders/eu/42" {
		t.Fatalf("request %v", in)
	}
}

func TestLockLeasesByProcess(t *testing.T) {
	f := &fake{leases: []*pb.LockLease{{LeaseId: "ll_1", ProcessId: "host-1"}, {LeaseId: "ll_2", ProcessId: "host-2"}}}
	srv := serve(t, f)
	var r pb.ListLockLeasesResponse
	if c := getJSON(t, srv.URL+"/ui/api/namespaces/shop/lock-leases?process_id=host-2", &r); c != 200 || len(r.Leases) != 1 || r.Leases[0].LeaseId != "ll_2" {
		t.Fatalf("status %d, leases %v", c, r.Leases)
	}
}

// sse is one server-sent event.
type sse struct{ event, data string }

// openEvents GETs an event stream; events arrive on the channel until the
// stream ends (then it is closed). The returned cancel ends the request.
func openEvents(t *testing.T, url string) (*http.Response, <-chan sse, context.CancelFunc) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	ch := make(chan sse, 16)
	go func() {
		defer close(ch)
		defer res.Body.Close()
		sc := bufio.NewScanner(res.Body)
		var e sse
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "event: "):
				e.event = line[7:]
			case strings.HasPrefix(line, "data: "):
				e.data += line[6:]
			case line == "" && e.event != "":
				ch <- e
				e = sse{}
			}
		}
	}()
	return res, ch, cancel
}

func next(t *testing.T, ch <-chan sse) sse {
	t.Helper()
	select {
	case e, ok := <-ch:
		if !ok {
			t.Fatal("the event stream ended")
		}
		return e
	case <-time.After(20 * time.Second):
		t.Fatal("no event within 20 s")
	}
	return sse{}
}

func lockState(t *testing.T, e sse) *pb.WatchLockResponse {
	t.Helper()
	if e.event != "state" {
		t.Fatalf("event %q (%s), want state", e.event, e.data)
	}
	var m pb.WatchLockResponse
	if err := protojson.Unmarshal([]byte(e.data), &m); err != nil {
		t.Fatal(err)
	}
	return &m
}

func notLeader() error {
	st, _ := status.New(codes.Unavailable, "leadership lost").WithDetails(&errdetails.ErrorInfo{Reason: apierr.NotLeader})
	return st.Err()
}

func shortBackoff(t *testing.T) {
	old := resumeBackoff
	resumeBackoff = func(int) time.Duration { return time.Millisecond }
	t.Cleanup(func() { resumeBackoff = old })
}

// The lock watch: holders and queue as "state" events; a stream ended by
// a leader change is reopened, its first state announced as resumed, and
// a state older than one already sent is skipped.
func TestLockWatchResumesAfterLeaderChange(t *testing.T) {
	shortBackoff(t)
	held := &pb.Lock{Name: "orders/eu", State: pb.LockState_LOCK_STATE_EXCLUSIVE_LOCKED, Holders: []*pb.LockHolder{holder("ll_a", "host-1", true, 10)}}
	waiter := &pb.LockWaiter{LeaseId: "ll_b", ProcessId: "host-2", Exclusive: false, Position: 1, WaitingSince: 3, Deadline: 4}
	step := make(chan struct{})
	f := &fake{streams: []*fakeStream{
		{msgs: []*pb.WatchLockResponse{
			{RaftIndex: 10, Initial: true, Lock: held, Changes: 1},
			{RaftIndex: 11, Lock: held, Waiters: []*pb.LockWaiter{waiter}, WaitersCount: 1, Changes: 1},
		}, end: notLeader(), step: step},
		{openErr: status.Error(codes.Unavailable, "connection refused")},
		{msgs: []*pb.WatchLockResponse{
			{RaftIndex: 9, Initial: true, Lock: held}, // a lagging node's older view
			{RaftIndex: 12, Initial: true, Lock: held, Changes: 1},
		}},
	}}
	srv := serve(t, f)
	res, ch, cancel := openEvents(t, srv.URL+"/ui/api/namespaces/shop/lock-watch/orders/eu")
	if res.StatusCode != 200 || res.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("status %d, content type %q", res.StatusCode, res.Header.Get("Content-Type"))
	}
	if m := lockState(t, next(t, ch)); m.RaftIndex != 10 || !m.Initial || m.Lock.Holders[0].FencingToken != 10 {
		t.Fatalf("first state %v", m)
	}
	step <- struct{}{}
	if m := lockState(t, next(t, ch)); m.RaftIndex != 11 || len(m.Waiters) != 1 || m.Waiters[0].LeaseId != "ll_b" || m.WaitersCount != 1 {
		t.Fatalf("second state %v", m)
	}
	step <- struct{}{}
	if e := next(t, ch); e.event != "resumed" {
		t.Fatalf("event %q after the leader change, want resumed", e.event)
	}
	if m := lockState(t, next(t, ch)); m.RaftIndex != 12 {
		t.Fatalf("resumed state at index %d, want 12 (9 is older than 11)", m.RaftIndex)
	}
	cancel()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.watchReqs) != 3 || f.watchReqs[2].LockName != "orders/eu" || f.watchReqs[2].NamespaceName != "shop" {
		t.Fatalf("WatchLock calls %v", f.watchReqs)
	}
}

// A refusal when opening is the HTTP answer (the page asks for a token or
// says what is missing); a refusal later ends the stream with an "end"
// event, and is not reopened.
func TestLockWatchRefusals(t *testing.T) {
	shortBackoff(t)
	for _, tc := range []struct {
		code codes.Code
		http int
	}{{codes.PermissionDenied, 403}, {codes.Unauthenticated, 401}, {codes.NotFound, 404}, {codes.InvalidArgument, 400}} {
		f := &fake{streams: []*fakeStream{{openErr: status.Error(tc.code, "no")}}}
		var m pb.WatchLockResponse
		if c := getJSON(t, serve(t, f).URL+"/ui/api/namespaces/shop/lock-watch/a/b", &m); c != tc.http {
			t.Fatalf("%v: HTTP %d, want %d", tc.code, c, tc.http)
		}
	}

	f := &fake{streams: []*fakeStream{
		{msgs: []*pb.WatchLockResponse{{RaftIndex: 5, Initial: true, Lock: &pb.Lock{Name: "a"}}}, end: status.Error(codes.NotFound, "namespace shop deleted")},
		{msgs: []*pb.WatchLockResponse{{RaftIndex: 6, Initial: true, Lock: &pb.Lock{Name: "a"}}}},
	}}
	_, ch, _ := openEvents(t, serve(t, f).URL+"/ui/api/namespaces/shop/lock-watch/a")
	lockState(t, next(t, ch))
	e := next(t, ch)
	var ae apiError
	if e.event != "end" || json.Unmarshal([]byte(e.data), &ae) != nil || ae.Code != "NotFound" {
		t.Fatalf("event %q %s, want end NotFound", e.event, e.data)
	}
	if e, ok := <-ch; ok {
		t.Fatalf("event %v after the end", e)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.watchReqs) != 1 {
		t.Fatalf("%d WatchLock calls after a NotFound, want 1", len(f.watchReqs))
	}
}

// A reader slower than the changes gets the latest state, the changes it
// missed counted in Changes, and never an older state after a newer one.
func TestOfferLatestKeepsTheNewest(t *testing.T) {
	ctx := context.Background()
	out := make(chan lockUpdate, 1)
	for i := uint64(1); i <= 5; i++ {
		if !offerLatest(ctx, out, lockUpdate{state: &pb.WatchLockResponse{RaftIndex: i, Changes: 1}, resumed: i == 2}) {
			t.Fatal("offer refused")
		}
	}
	u := <-out
	if u.state.RaftIndex != 5 || u.state.Changes != 5 || !u.resumed {
		t.Fatalf("got index %d, %d changes, resumed %v; want 5, 5, true", u.state.RaftIndex, u.state.Changes, u.resumed)
	}
}

// The semaphore watch keeps its events through the shared relay, and now
// says when it resumed.
func TestSemaphoreWatchSaysResumed(t *testing.T) {
	st := func(i uint64) *pb.WatchSemaphoreResponse {
		return &pb.WatchSemaphoreResponse{RaftIndex: i, Semaphore: &pb.Semaphore{Name: "s", Permits: 2}}
	}
	f := &fake{semWatch: []client.WatchUpdate{{State: st(3)}, {State: st(4), Resumed: true}, {Err: status.Error(codes.NotFound, "deleted")}}}
	_, ch, _ := openEvents(t, serve(t, f).URL+"/ui/api/namespaces/shop/semaphores/s/watch")
	want := []string{"state", "resumed", "state", "end"}
	for i, w := range want {
		if e := next(t, ch); e.event != w {
			t.Fatalf("event %d: %q, want %q", i, e.event, w)
		}
	}
}

// fakeWaits is the wait groups and barriers part of fake's answers.
type fakeWaits struct {
	groups   []*pb.WaitGroup
	jobs     []*pb.WaitGroupJob
	barriers []*pb.Barrier
	// arrivals by generation; the current generation is the barrier's.
	arrivals map[int64][]*pb.BarrierParticipant
	reqs     []proto.Message // every request, in order
}

func (f *fake) GetWaitGroup(ctx context.Context, in *pb.GetWaitGroupRequest, _ ...grpc.CallOption) (*pb.GetWaitGroupResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.w.reqs = append(f.w.reqs, in)
	for _, g := range f.w.groups {
		if g.Name == in.WaitGroupName {
			return &pb.GetWaitGroupResponse{WaitGroup: g}, nil
		}
	}
	return nil, status.Errorf(codes.NotFound, "wait group %q not found", in.WaitGroupName)
}

func (f *fake) ListWaitGroups(ctx context.Context, in *pb.ListWaitGroupsRequest, _ ...grpc.CallOption) (*pb.ListWaitGroupsResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.w.reqs = append(f.w.reqs, in)
	f.token(ctx)
	got, next := page(f.w.groups, in.PaginationToken, in.Limit)
	return &pb.ListWaitGroupsResponse{WaitGroups: got, NextPaginationToken: next}, nil
}

func (f *fake) ListWaitGroupCompletedJobs(ctx context.Context, in *pb.ListWaitGroupCompletedJobsRequest, _ ...grpc.CallOption) (*pb.ListWaitGroupCompletedJobsResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.w.reqs = append(f.w.reqs, in)
	got, next := page(f.w.jobs, in.PaginationToken, in.Limit)
	return &pb.ListWaitGroupCompletedJobsResponse{Jobs: got, NextPaginationToken: next}, nil
}

func (f *fake) GetBarrier(ctx context.Context, in *pb.GetBarrierRequest, _ ...grpc.CallOption) (*pb.GetBarrierResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.w.reqs = append(f.w.reqs, in)
	for _, b := range f.w.barriers {
		if b.Name == in.BarrierName {
			return &pb.GetBarrierResponse{Barrier: b}, nil
		}
	}
	return nil, status.Errorf(codes.NotFound, "barrier %q not found", in.BarrierName)
}

func (f *fake) ListBarriers(ctx context.Context, in *pb.ListBarriersRequest, _ ...grpc.CallOption) (*pb.ListBarriersResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.w.reqs = append(f.w.reqs, in)
	got, next := page(f.w.barriers, in.PaginationToken, in.Limit)
	return &pb.ListBarriersResponse{Barriers: got, NextPaginationToken: next}, nil
}

// ListBarrierParticipants answers as the server does: generation 0 is the
// first barrier's current one; only it and the previous one are kept.
func (f *fake) ListBarrierParticipants(ctx context.Context, in *pb.ListBarrierParticipantsRequest, _ ...grpc.CallOption) (*pb.ListBarrierParticipantsResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.w.reqs = append(f.w.reqs, in)
	cur := f.w.barriers[0].Generation
	gen := in.Generation
	if gen == 0 {
		gen = cur
	}
	if gen > cur || gen < cur-1 {
		st, _ := status.New(codes.FailedPrecondition, "generation no longer kept").WithDetails(&errdetails.ErrorInfo{Reason: apierr.GenerationMismatch})
		return nil, st.Err()
	}
	got, next := page(f.w.arrivals[gen], in.PaginationToken, in.Limit)
	return &pb.ListBarrierParticipantsResponse{Participants: got, NextPaginationToken: next, Generation: gen}, nil
}

// The polled lists answer one API page each (limit from the query, 100
// by default, at most 250), with the token to go on from, and carry the
// caller's token.
func TestWaitGroupsOnePagePerRequest(t *testing.T) {
	f := &fake{}
	for i := range 130 {
		f.w.groups = append(f.w.groups, &pb.WaitGroup{Name: fmt.Sprintf("batch-%03d", i), Counter: 10, CompletedJobs: int64(i % 11),
			Status: pb.WaitGroupStatus_WAIT_GROUP_STATUS_ACTIVE, ExpiresAt: 5e18})
	}
	f.w.groups[3].Status, f.w.groups[3].FinishedAt = pb.WaitGroupStatus_WAIT_GROUP_STATUS_EXPIRED, 77
	srv := serve(t, f)

	var r pb.ListWaitGroupsResponse
	if c := getJSON(t, srv.URL+"/ui/api/namespaces/shop/wait-groups", &r); c != 200 || len(r.WaitGroups) != pageDefault || r.NextPaginationToken != "at-100" {
		t.Fatalf("status %d, %d groups, next %q; want %d and at-100", c, len(r.WaitGroups), r.NextPaginationToken, pageDefault)
	}
	if g := r.WaitGroups[3]; g.Status != pb.WaitGroupStatus_WAIT_GROUP_STATUS_EXPIRED || g.FinishedAt != 77 || g.Counter != 10 || g.CompletedJobs != 3 {
		t.Fatalf("group 3: %v", g)
	}
	var r2 pb.ListWaitGroupsResponse
	if c := getJSON(t, srv.URL+"/ui/api/namespaces/shop/wait-groups?limit=20&page_token=at-120", &r2); c != 200 || len(r2.WaitGroups) != 10 ||
		r2.WaitGroups[0].Name != "batch-120" || r2.NextPaginationToken != "" {
		t.Fatalf("second page: status %d, %d groups, next %q", c, len(r2.WaitGroups), r2.NextPaginationToken)
	}
	for _, bad := range []string{"0", "251", "x", "-1"} {
		if c := getJSON(t, srv.URL+"/ui/api/namespaces/shop/wait-groups?limit="+bad, &r); c != 400 {
			t.Fatalf("limit=%s: HTTP %d, want 400", bad, c)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	// One List call per request (never a walk over the pages), none for a
	// bad limit.
	if len(f.w.reqs) != 2 {
		t.Fatalf("%d calls for 2 good requests: %v", len(f.w.reqs), f.w.reqs)
	}
	if in := f.w.reqs[1].(*pb.ListWaitGroupsRequest); in.NamespaceName != "shop" || in.Limit != 20 || in.PaginationToken != "at-120" {
		t.Fatalf("request %v", in)
	}
	if f.tokens[0] != "Bearer s3cret" {
		t.Fatalf("token %q", f.tokens[0])
	}
}

// A wait group by name, its completed jobs a page at a time; a missing
// one is 404.
func TestWaitGroupAndJobs(t *testing.T) {
	f := &fake{}
	f.w.groups = []*pb.WaitGroup{{Name: "nightly", Counter: 300, CompletedJobs: 260, Status: pb.WaitGroupStatus_WAIT_GROUP_STATUS_ACTIVE}}
	for i := range 260 {
		f.w.jobs = append(f.w.jobs, &pb.WaitGroupJob{JobId: fmt.Sprintf("job-%03d", i), CompletedAt: int64(1000 + i), Metadata: map[string]string{"worker": "w1"}})
	}
	srv := serve(t, f)
	var g pb.GetWaitGroupResponse
	if c := getJSON(t, srv.URL+"/ui/api/namespaces/shop/wait-groups/nightly", &g); c != 200 || g.WaitGroup.CompletedJobs != 260 {
		t.Fatalf("status %d, %v", c, g.WaitGroup)
	}
	if c := getJSON(t, srv.URL+"/ui/api/namespaces/shop/wait-groups/weekly", &g); c != 404 {
		t.Fatalf("missing group: HTTP %d, want 404", c)
	}
	var j pb.ListWaitGroupCompletedJobsResponse
	if c := getJSON(t, srv.URL+"/ui/api/namespaces/shop/wait-groups/nightly/jobs?limit=250", &j); c != 200 || len(j.Jobs) != 250 || j.NextPaginationToken != "at-250" {
		t.Fatalf("status %d, %d jobs, next %q", c, len(j.Jobs), j.NextPaginationToken)
	}
	if c := getJSON(t, srv.URL+"/ui/api/namespaces/shop/wait-groups/nightly/jobs?page_token="+j.NextPaginationToken, &j); c != 200 || len(j.Jobs) != 10 ||
		j.Jobs[9].JobId != "job-259" || j.Jobs[9].CompletedAt != 1259 || j.Jobs[9].Metadata["worker"] != "w1" {
		t.Fatalf("status %d, jobs %v", c, j.Jobs)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if in := f.w.reqs[len(f.w.reqs)-1].(*pb.ListWaitGroupCompletedJobsRequest); in.NamespaceName != "shop" || in.WaitGroupName != "nightly" || in.Limit != pageDefault {
		t.Fatalf("request %v", in)
	}
}

// Barriers: one page of the list; a barrier's participants of the current
// generation (generation 0 or absent) and of the previous one, in arrival
// order, the answer naming the generation; a generation no longer kept is
// 409 with the API's message; a bad generation is 400 without a call.
func TestBarriersAndParticipants(t *testing.T) {
	f := &fake{}
	f.w.barriers = []*pb.Barrier{{Name: "phase", ExpectedProcesses: 3, ArrivedProcesses: 2, Generation: 5}, {Name: "shards", ExpectedProcesses: 8, Generation: 1}}
	f.w.arrivals = map[int64][]*pb.BarrierParticipant{
		5: {{ProcessId: "shard-2", Generation: 5, ArrivedAt: 20}, {ProcessId: "shard-0", Generation: 5, ArrivedAt: 21}},
		4: {{ProcessId: "shard-1", Generation: 4, ArrivedAt: 10}, {ProcessId: "shard-0", Generation: 4, ArrivedAt: 11}, {ProcessId: "shard-2", Generation: 4, ArrivedAt: 12}},
	}
	srv := serve(t, f)
	var l pb.ListBarriersResponse
	if c := getJSON(t, srv.URL+"/ui/api/namespaces/shop/barriers?limit=1", &l); c != 200 || len(l.Barriers) != 1 || l.Barriers[0].Generation != 5 ||
		l.Barriers[0].ArrivedProcesses != 2 || l.NextPaginationToken != "at-1" {
		t.Fatalf("status %d, %v, next %q", c, l.Barriers, l.NextPaginationToken)
	}
	var b pb.GetBarrierResponse
	if c := getJSON(t, srv.URL+"/ui/api/namespaces/shop/barriers/shards", &b); c != 200 || b.Barrier.ExpectedProcesses != 8 {
		t.Fatalf("status %d, %v", c, b.Barrier)
	}
	base := srv.URL + "/ui/api/namespaces/shop/barriers/phase/participants"
	var p pb.ListBarrierParticipantsResponse
	for _, q := range []string{"", "?generation=0"} {
		if c := getJSON(t, base+q, &p); c != 200 || p.Generation != 5 || len(p.Participants) != 2 || p.Participants[0].ProcessId != "shard-2" {
			t.Fatalf("%q: status %d, generation %d, %v", q, c, p.Generation, p.Participants)
		}
	}
	if c := getJSON(t, base+"?generation=4&limit=2", &p); c != 200 || p.Generation != 4 || len(p.Participants) != 2 ||
		p.Participants[0].ProcessId != "shard-1" || p.NextPaginationToken != "at-2" {
		t.Fatalf("previous generation: status %d, generation %d, %v, next %q", c, p.Generation, p.Participants, p.NextPaginationToken)
	}
	res, err := http.Get(base + "?generation=3")
	if err != nil {
		t.Fatal(err)
	}
	var ae apiError
	_ = json.NewDecoder(res.Body).Decode(&ae)
	res.Body.Close()
	if res.StatusCode != http.StatusConflict || ae.Code != "FailedPrecondition" || !strings.Contains(ae.Message, "no longer kept") {
		t.Fatalf("generation 3: HTTP %d %v, want 409 FailedPrecondition", res.StatusCode, ae)
	}
	f.mu.Lock()
	calls := len(f.w.reqs)
	f.mu.Unlock()
	for _, bad := range []string{"-1", "x"} {
		if c := getJSON(t, base+"?generation="+bad, &p); c != 400 {
			t.Fatalf("generation=%s: HTTP %d, want 400", bad, c)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.w.reqs) != calls {
		t.Fatalf("a bad generation made %d calls", len(f.w.reqs)-calls)
	}
	if in := f.w.reqs[calls-1].(*pb.ListBarrierParticipantsRequest); in.NamespaceName != "shop" || in.BarrierName != "phase" || in.Generation != 3 {
		t.Fatalf("request %v", in)
	}
}

// The page is embedded with both tabs and their tables.
func TestPageHasWaitGroupsAndBarriers(t *testing.T) {
	srv := serve(t, &fake{})
	for file, want := range map[string][]string{
		"index.html": {`id="tab-wgs"`, `id="waitgroups"`, `id="wg-jobs"`, `id="tab-bars"`, `id="barriers"`, `id="bar-current"`, `id="bar-previous"`},
		"app.js":     {"/wait-groups", "/participants", "visibilityState", "LIVE_MS = 1000"},
	} {
		res, err := http.Get(srv.URL + "/ui/" + file)
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		_, _ = bufio.NewReader(res.Body).WriteTo(&b)
		res.Body.Close()
		for _, w := range want {
			if !strings.Contains(b.String(), w) {
				t.Errorf("%s lacks %s", file, w)
			}
		}
	}
}
