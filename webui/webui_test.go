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
