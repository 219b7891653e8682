package watch_test

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/grackle-coord/grackle/apierr"
	"github.com/grackle-coord/grackle/client"
	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
	"github.com/grackle-coord/grackle/server"
	"github.com/grackle-coord/grackle/server/servertest"
)

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// setup creates namespace "ns", semaphore "s" with permits, and leases.
func setup(t *testing.T, c pb.GrackleServiceClient, permits int64, leases ...string) map[string]string {
	t.Helper()
	ctx := ctxT(t)
	if _, err := c.CreateNamespace(ctx, &pb.CreateNamespaceRequest{Name: "ns"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateSemaphore(ctx, &pb.CreateSemaphoreRequest{NamespaceName: "ns", SemaphoreName: "s", Permits: permits}); err != nil {
		t.Fatal(err)
	}
	ids := map[string]string{}
	for _, p := range leases {
		l, err := c.CreateSemaphoreLease(ctx, &pb.CreateSemaphoreLeaseRequest{NamespaceName: "ns", ProcessId: p, TtlSeconds: 60})
		if err != nil {
			t.Fatal(err)
		}
		ids[p] = l.Lease.LeaseId
	}
	return ids
}

// stream collects a watch's messages in the background.
type stream struct {
	t    *testing.T
	mu   sync.Mutex
	msgs []*pb.WatchSemaphoreResponse
	err  error
	done chan struct{}
	more chan struct{}
	tr   metadata.MD
}

func openWatch(t *testing.T, c pb.GrackleServiceClient, ctx context.Context, ns, sem string) *stream {
	t.Helper()
	return openWatchSlow(t, c, ctx, ns, sem, 0)
}

// openWatchSlow reads with a pause after every message (a slow watcher).
func openWatchSlow(t *testing.T, c pb.GrackleServiceClient, ctx context.Context, ns, sem string, pause time.Duration) *stream {
	t.Helper()
	s := &stream{t: t, done: make(chan struct{}), more: make(chan struct{}, 1)}
	st, err := c.WatchSemaphore(ctx, &pb.WatchSemaphoreRequest{NamespaceName: ns, SemaphoreName: sem}, grpc.Trailer(&s.tr))
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(s.done)
		for {
			m, err := st.Recv()
			s.mu.Lock()
			if err != nil {
				s.err = err
				s.mu.Unlock()
				return
			}
			s.msgs = append(s.msgs, m)
			s.mu.Unlock()
			select {
			case s.more <- struct{}{}:
			default:
			}
			if pause > 0 {
				time.Sleep(pause)
			}
		}
	}()
	return s
}

// waitFor waits for a message that satisfies cond and returns it.
func (s *stream) waitFor(what string, cond func(*pb.WatchSemaphoreResponse) bool) *pb.WatchSemaphoreResponse {
	s.t.Helper()
	return s.waitAfter(nil, what, cond)
}

// waitAfter is waitFor among the messages that came after prev.
func (s *stream) waitAfter(prev *pb.WatchSemaphoreResponse, what string, cond func(*pb.WatchSemaphoreResponse) bool) *pb.WatchSemaphoreResponse {
	s.t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		s.mu.Lock()
		after := prev == nil
		for _, m := range s.msgs {
			if !after {
				after = m == prev
				continue
			}
			if cond(m) {
				s.mu.Unlock()
				return m
			}
		}
		err := s.err
		s.mu.Unlock()
		if err != nil {
			s.t.Fatalf("stream ended (%v) before %s", err, what)
		}
		select {
		case <-s.more:
		case <-deadline:
			s.t.Fatalf("no message with %s within 30s", what)
		}
	}
}

func (s *stream) end(t *testing.T) error {
	t.Helper()
	select {
	case <-s.done:
	case <-time.After(30 * time.Second):
		t.Fatal("stream did not end within 30s")
	}
	return s.err
}

func (s *stream) all() []*pb.WatchSemaphoreResponse {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*pb.WatchSemaphoreResponse(nil), s.msgs...)
}

func holderIDs(m *pb.WatchSemaphoreResponse) string {
	var ids []string
	for _, h := range m.Holders {
		ids = append(ids, h.ProcessId)
	}
	return strings.Join(ids, ",")
}

// raftIndex reads the Raft index a write reports in its header.
func raftIndex(t *testing.T, hdr metadata.MD) uint64 {
	t.Helper()
	v := hdr.Get("grackle-raft-index")
	if len(v) == 0 {
		t.Fatal("write without grackle-raft-index header")
	}
	n, err := strconv.ParseUint(v[0], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func increasing(t *testing.T, msgs []*pb.WatchSemaphoreResponse) {
	t.Helper()
	for i, m := range msgs {
		if (i == 0) != m.Initial {
			t.Fatalf("message %d: initial=%v", i, m.Initial)
		}
		if i > 0 && m.RaftIndex <= msgs[i-1].RaftIndex {
			t.Fatalf("message %d: raft index %d after %d", i, m.RaftIndex, msgs[i-1].RaftIndex)
		}
		if m.Changes < 1 {
			t.Fatalf("message %d: changes %d", i, m.Changes)
		}
	}
}

func TestWatchDeliversEveryChangeInOrder(t *testing.T) {
	c := servertest.Start(t, 1, nil)
	api := c.Client(0)
	ids := setup(t, api, 3, "a", "b")
	ctx := ctxT(t)
	w := openWatch(t, api, ctx, "ns", "s")
	first := w.waitFor("the initial state", func(m *pb.WatchSemaphoreResponse) bool { return m.Initial })
	if first.Semaphore.GetName() != "s" || first.Semaphore.Permits != 3 || len(first.Holders) != 0 {
		t.Fatalf("initial state: %v", first)
	}

	type step struct {
		do      func(opts ...grpc.CallOption) error
		holders string
		holds   int64
	}
	acq := func(p string, w int64) func(...grpc.CallOption) error {
		return func(o ...grpc.CallOption) error {
			_, err := api.AcquireSemaphore(ctx, &pb.AcquireSemaphoreRequest{NamespaceName: "ns", SemaphoreName: "s", LeaseId: ids[p], Weight: w}, o...)
			return err
		}
	}
	rel := func(p string) func(...grpc.CallOption) error {
		return func(o ...grpc.CallOption) error {
			_, err := api.ReleaseSemaphore(ctx, &pb.ReleaseSemaphoreRequest{NamespaceName: "ns", SemaphoreName: "s", LeaseId: ids[p]}, o...)
			return err
		}
	}
	steps := []step{
		{acq("a", 1), "a", 1},
		{acq("b", 2), "a,b", 3},
		{rel("a"), "b", 2},
		{acq("b", 1), "b", 1}, // a re-acquire that lowers the hold
		{func(o ...grpc.CallOption) error {
			_, err := api.UpdateSemaphore(ctx, &pb.UpdateSemaphoreRequest{NamespaceName: "ns", SemaphoreName: "s", Permits: 5, ExpectedVersion: 1}, o...)
			return err
		}, "b", 1},
		{rel("b"), "", 0},
	}
	for i, st := range steps {
		var hdr metadata.MD
		if err := st.do(grpc.Header(&hdr)); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		idx := raftIndex(t, hdr)
		m := w.waitFor(fmt.Sprintf("step %d (index %d)", i, idx), func(m *pb.WatchSemaphoreResponse) bool { return m.RaftIndex >= idx })
		if m.RaftIndex != idx || holderIDs(m) != st.holders || m.Semaphore.ActiveHolds != st.holds {
			t.Fatalf("step %d: message at index %d (want %d) holders %q holds %d, want %q %d", i, m.RaftIndex, idx, holderIDs(m), m.Semaphore.ActiveHolds, st.holders, st.holds)
		}
	}
	msgs := w.all()
	increasing(t, msgs)
	if len(msgs) != len(steps)+1 {
		t.Fatalf("%d messages for %d changes: %v", len(msgs), len(steps), msgs)
	}

	// Deleting the semaphore ends the stream with NotFound.
	if _, err := api.DeleteSemaphore(ctx, &pb.DeleteSemaphoreRequest{NamespaceName: "ns", SemaphoreName: "s"}); err != nil {
		t.Fatal(err)
	}
	if err := w.end(t); status.Code(err) != codes.NotFound {
		t.Fatalf("after delete: %v, want NotFound", err)
	}
}

func TestWatchBadRequests(t *testing.T) {
	c := servertest.Start(t, 1, nil)
	api := c.Client(0)
	setup(t, api, 1)
	ctx := ctxT(t)
	for _, tc := range []struct {
		ns, sem, field string
		code           codes.Code
		reason         string // which thing is missing, for NotFound
	}{
		{"bad name", "s", "namespace_name", codes.InvalidArgument, ""},
		{"ns", "", "semaphore_name", codes.InvalidArgument, ""},
		{"ns", "nope", "nope", codes.NotFound, apierr.SemaphoreNotFound},
		{"nope", "s", "nope", codes.NotFound, apierr.NamespaceNotFound},
	} {
		st, err := api.WatchSemaphore(ctx, &pb.WatchSemaphoreRequest{NamespaceName: tc.ns, SemaphoreName: tc.sem})
		if err == nil {
			_, err = st.Recv()
		}
		if status.Code(err) != tc.code || apierr.ReasonOf(err) != tc.reason || !strings.Contains(status.Convert(err).Message(), tc.field) {
			t.Errorf("watch %q/%q: %v, want %v (reason %q) naming %q", tc.ns, tc.sem, err, tc.code, tc.reason, tc.field)
		}
	}
}

// A burst of writes while a watcher reads slowly: the stream survives,
// coalesces (fewer messages than changes, each counting what it folds
// in), stays in order, and ends on the final state.
func TestWatchSurvivesBurst(t *testing.T) {
	c := servertest.Start(t, 1, nil)
	api := c.Client(0)
	const workers, pairs = 8, 100
	var procs []string
	for i := 0; i < workers; i++ {
		procs = append(procs, fmt.Sprintf("w%d", i))
	}
	ids := setup(t, api, workers, procs...)
	ctx := ctxT(t)

	// The reader is slow on purpose: the leader must not wait for it.
	w := openWatchSlow(t, api, ctx, "ns", "s", 2*time.Millisecond)
	first := w.waitFor("the initial state", func(m *pb.WatchSemaphoreResponse) bool { return m.Initial })
	start := first.RaftIndex

	var wg sync.WaitGroup
	errs := make(chan error, workers)
	errs2 := make(chan error, 1)
	for _, p := range procs {
		wg.Add(1)
		go func(id string) {
			defer wg.Done()
			for i := 0; i < pairs; i++ {
				if _, err := api.AcquireSemaphore(ctx, &pb.AcquireSemaphoreRequest{NamespaceName: "ns", SemaphoreName: "s", LeaseId: id, Weight: 1}); err != nil {
					errs <- err
					return
				}
				if _, err := api.ReleaseSemaphore(ctx, &pb.ReleaseSemaphoreRequest{NamespaceName: "ns", SemaphoreName: "s", LeaseId: id}); err != nil {
					errs <- err
					return
				}
			}
		}(ids[p])
	}
	// After the burst, one more write marks its end.
	var final atomic.Uint64
	go func() {
		wg.Wait()
		close(errs)
		var hdr metadata.MD
		if _, err := api.UpdateSemaphore(ctx, &pb.UpdateSemaphoreRequest{NamespaceName: "ns", SemaphoreName: "s", Permits: workers + 1, ExpectedVersion: 1}, grpc.Header(&hdr)); err != nil {
			errs2 <- err
			return
		}
		v := hdr.Get("grackle-raft-index")
		n, _ := strconv.ParseUint(v[0], 10, 64)
		final.Store(n)
	}()

	servertest.Eventually(t, "the end of the burst", 60*time.Second, func() bool { return final.Load() != 0 || len(errs2) > 0 })
	select {
	case err := <-errs2:
		t.Fatal(err)
	default:
	}
	w.waitFor("the last write", func(m *pb.WatchSemaphoreResponse) bool { return m.RaftIndex >= final.Load() })
	msgs := w.all()
	for err := range errs {
		t.Fatal(err)
	}
	increasing(t, msgs)
	last := msgs[len(msgs)-1]
	if last.RaftIndex != final.Load() || len(last.Holders) != 0 || last.Semaphore.Permits != workers+1 {
		t.Fatalf("last message: %v", last)
	}
	var changes uint64
	for _, m := range msgs[1:] {
		changes += m.Changes
	}
	entries := uint64(2*workers*pairs + 1)
	t.Logf("%d entries in [%d, %d], %d messages, %d changes counted", entries, start, final.Load(), len(msgs), changes)
	if uint64(len(msgs)) > entries+1 {
		t.Fatalf("more messages (%d) than changes (%d)", len(msgs), entries)
	}
}

// A watcher that stops reading is cut off with ResourceExhausted; the
// writes go on at full speed meanwhile.
func TestSlowWatcherIsCutOff(t *testing.T) {
	// One stream at most: a second one opens once the first is cut off,
	// which is how the test sees the cut-off without reading the first.
	c := servertest.Start(t, 1, func(cfg *server.Config) { cfg.WatchStallTimeout = 300 * time.Millisecond; cfg.MaxWatchers = 1 })
	api := c.Client(0)
	ctx := ctxT(t)
	var procs []string
	for i := 0; i < 40; i++ {
		procs = append(procs, fmt.Sprintf("holder-with-a-long-process-id-%03d-%s", i, strings.Repeat("x", 80)))
	}
	ids := setup(t, api, 1000, procs...)
	md := map[string]string{}
	for i := 0; i < 8; i++ {
		md[fmt.Sprintf("note%d", i)] = strings.Repeat("m", 250)
	}
	for _, p := range procs[1:] {
		if _, err := api.AcquireSemaphore(ctx, &pb.AcquireSemaphoreRequest{NamespaceName: "ns", SemaphoreName: "s", LeaseId: ids[p], Weight: 1, Metadata: md}); err != nil {
			t.Fatal(err)
		}
	}
	st, err := api.WatchSemaphore(ctx, &pb.WatchSemaphoreRequest{NamespaceName: "ns", SemaphoreName: "s"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Recv(); err != nil {
		t.Fatal(err)
	}
	// Each message is ~45 KB: a few fill the stream's flow-control window,
	// and then a send blocks. Writes go on, unread, until the node has cut
	// the stream off: until a second stream may open. (A fixed number of
	// writes was not enough on a fast machine: they all went out before
	// the stall timeout, and nothing was cut off.)
	id := ids[procs[0]]
	for i := 0; ; i++ {
		if _, err := api.AcquireSemaphore(ctx, &pb.AcquireSemaphoreRequest{NamespaceName: "ns", SemaphoreName: "s", LeaseId: id, Weight: int64(1 + i%2)}); err != nil {
			t.Fatal(err)
		}
		if i%10 != 9 {
			continue
		}
		sctx, cancel := context.WithCancel(ctx)
		second, err := api.WatchSemaphore(sctx, &pb.WatchSemaphoreRequest{NamespaceName: "ns", SemaphoreName: "s"})
		if err == nil {
			_, err = second.Recv()
		}
		cancel()
		if err == nil {
			break // the first stream is gone
		}
		if status.Code(err) != codes.ResourceExhausted || apierr.ReasonOf(err) == apierr.WatchStalled {
			t.Fatalf("a second watch while the first is open: %v, want the limit of streams", err)
		}
	}
	// Now read: what was buffered, then the cut-off.
	for {
		_, err := st.Recv()
		if err == nil {
			continue
		}
		if status.Code(err) != codes.ResourceExhausted || apierr.ReasonOf(err) != apierr.WatchStalled {
			t.Fatalf("stream ended with %v, want ResourceExhausted with reason WATCH_STALLED (a slow watcher, not the limit of streams)", err)
		}
		break
	}
}

func TestWatchEndsOnLeaderChangeAndResumes(t *testing.T) {
	c := servertest.Start(t, 3, nil)
	li := c.WaitLeader()
	api := c.Client(li)
	ids := setup(t, api, 2, "a")
	ctx := ctxT(t)
	w := openWatch(t, api, ctx, "ns", "s")
	w.waitFor("the initial state", func(m *pb.WatchSemaphoreResponse) bool { return m.Initial })
	// Through a follower too: it relays the leader's stream.
	fi := c.Follower()
	wf := openWatch(t, c.Client(fi), ctx, "ns", "s")
	wf.waitFor("the initial state (follower)", func(m *pb.WatchSemaphoreResponse) bool { return m.Initial })

	cl, err := client.New(ctx, client.Config{Endpoints: []string{c.Nodes[fi].GRPCAddr()}})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	updates := cl.Watch(ctx, "ns", "s")
	if u := <-updates; u.Err != nil || !u.State.Initial || u.Resumed {
		t.Fatalf("first update: %+v", u)
	}

	if _, err := api.AcquireSemaphore(ctx, &pb.AcquireSemaphoreRequest{NamespaceName: "ns", SemaphoreName: "s", LeaseId: ids["a"], Weight: 1}); err != nil {
		t.Fatal(err)
	}
	w.waitFor("holder a", func(m *pb.WatchSemaphoreResponse) bool { return holderIDs(m) == "a" })
	wf.waitFor("holder a (follower)", func(m *pb.WatchSemaphoreResponse) bool { return holderIDs(m) == "a" })
	var before uint64
	for u := range updates {
		if u.Err != nil {
			t.Fatal(u.Err)
		}
		if holderIDs(u.State) == "a" {
			before = u.State.RaftIndex
			break
		}
	}

	if _, err := c.TransferLeadership(ctx, li, ""); err != nil {
		t.Fatal(err)
	}
	for _, s := range []*stream{w, wf} {
		err := s.end(t)
		if status.Code(err) != codes.Unavailable || apierr.ReasonOf(err) != apierr.NotLeader || apierr.LeaderOf(err).ID == c.Cfgs[li].NodeID {
			t.Fatalf("stream ended with %v, want Unavailable NOT_LEADER not naming the old leader (leadership changed)", err)
		}
	}
	if addr := w.tr.Get("grackle-leader-address"); len(addr) == 0 || addr[0] == c.Nodes[li].GRPCAddr() {
		t.Errorf("leader-change trailer %v does not name the new leader", addr)
	}
	// The client's watch resumes on the new leader with the whole state.
	for u := range updates {
		if u.Err != nil {
			t.Fatal(u.Err)
		}
		if u.Resumed {
			// Not necessarily Initial: a slow reader gets the resumed
			// state folded into later changes (the new leader's lease
			// extension among them), still marked Resumed.
			if holderIDs(u.State) != "a" || u.State.RaftIndex < before {
				t.Fatalf("resumed state: %v (index before %d)", u.State, before)
			}
			break
		}
	}
}

var _ = io.EOF
