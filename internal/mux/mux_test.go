package mux_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/grackle-coord/grackle/apierr"
	"github.com/grackle-coord/grackle/internal/mux"
	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
)

// A call on the stream returns what the unary call returns: the response,
// the error with its details, the header and the trailer.
func TestStreamCallMatchesUnary(t *testing.T) {
	cc, _ := fakeServer(t, newFake(), false)
	m := mux.NewConn(cc)
	defer m.Close()
	ctx := context.Background()
	untilStream(t, m, func() error { _, err := list(ctx, m, "warm"); return err })

	for _, arg := range []string{"x", "fail"} {
		var uh, ut, mh, mt metadata.MD
		ur, uerr := list(ctx, cc, arg, grpc.Header(&uh), grpc.Trailer(&ut))
		before := m.StreamCalls()
		mr, merr := list(ctx, m, arg, grpc.Header(&mh), grpc.Trailer(&mt))
		if m.StreamCalls() != before+1 {
			t.Fatalf("%s: the call did not go over the stream", arg)
		}
		if !proto.Equal(ur, mr) {
			t.Errorf("%s: response %v on the stream, %v unary", arg, mr, ur)
		}
		if !proto.Equal(status.Convert(uerr).Proto(), status.Convert(merr).Proto()) {
			t.Errorf("%s: error %v on the stream, %v unary", arg, merr, uerr)
		}
		for _, k := range []string{"grackle-raft-index", "t", "grackle-leader-address"} {
			if strings.Join(uh.Get(k), ",") != strings.Join(mh.Get(k), ",") || strings.Join(ut.Get(k), ",") != strings.Join(mt.Get(k), ",") {
				t.Errorf("%s: %s: header %v trailer %v on the stream, header %v trailer %v unary", arg, k, mh.Get(k), mt.Get(k), uh.Get(k), ut.Get(k))
			}
		}
	}
}

// A request with a string that is not valid UTF-8 fails as the unary call
// does (gRPC's encoder refuses it on the client), and is never sent.
func TestInvalidStringFailsAsUnary(t *testing.T) {
	cc, _ := fakeServer(t, newFake(), false)
	m := mux.NewConn(cc)
	defer m.Close()
	ctx := context.Background()
	untilStream(t, m, func() error { _, err := list(ctx, m, "warm"); return err })

	_, uerr := list(ctx, cc, "bad\xff")
	before := m.StreamCalls()
	_, merr := list(ctx, m, "bad\xff")
	if uerr == nil || status.Code(merr) != status.Code(uerr) {
		t.Fatalf("error %v through the multiplexer, %v unary", merr, uerr)
	}
	if m.StreamCalls() != before {
		t.Fatal("the request went over the stream")
	}
}

// A server without MuxService gets unary calls, and they work.
func TestOldServerGetsUnaryCalls(t *testing.T) {
	cc, _ := fakeServer(t, newFake(), true)
	m := mux.NewConn(cc)
	defer m.Close()
	for i := range 20 {
		r, err := list(context.Background(), m, "x")
		if err != nil || r.Namespaces[0].Name != "x" {
			t.Fatalf("call %d: %v %v", i, r, err)
		}
		time.Sleep(2 * time.Millisecond)
	}
	if n := m.StreamCalls(); n != 0 {
		t.Fatalf("%d calls went over a stream the server does not offer", n)
	}
}

// A call's deadline and its cancellation reach the server: the handler's
// context ends, and the caller gets the unary call's code.
func TestDeadlineAndCancelReachTheServer(t *testing.T) {
	f := newFake()
	cc, _ := fakeServer(t, f, false)
	m := mux.NewConn(cc)
	defer m.Close()
	untilStream(t, m, func() error { _, err := list(context.Background(), m, "warm"); return err })

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	before := m.StreamCalls()
	_, err := list(ctx, m, "block")
	if status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("past its deadline: %v, want DeadlineExceeded", err)
	}
	<-f.entered

	ctx2, cancel2 := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { _, err := list(ctx2, m, "block"); errc <- err }()
	<-f.entered
	cancel2()
	if err := <-errc; status.Code(err) != codes.Canceled {
		t.Fatalf("cancelled: %v, want Canceled", err)
	}
	// Both ended on the server (the handler returned on its context), so
	// the stream's calls in flight drop back to none: a call now answers.
	if _, err := list(context.Background(), m, "after"); err != nil {
		t.Fatal(err)
	}
	if m.StreamCalls() == before {
		t.Fatal("the calls did not go over the stream")
	}
}

// Drain: the call in flight is answered, a call that arrives after is
// answered NOT_SENT (so a client may retry it anywhere), and later calls
// go unary.
func TestDrainAnswersInFlightAndRefusesNew(t *testing.T) {
	f := newFake()
	cc, ms := fakeServer(t, f, false)
	m := mux.NewConn(cc)
	defer m.Close()
	untilStream(t, m, func() error { _, err := list(context.Background(), m, "warm"); return err })

	inflight := make(chan error, 1)
	go func() {
		r, err := list(context.Background(), m, "block")
		if err == nil && r.Namespaces[0].Name != "block" {
			err = errors.New("wrong response")
		}
		inflight <- err
	}()
	<-f.entered
	ms.Drain()
	// The stream is still up (its call runs); a call sent now is refused
	// without running.
	_, err := list(context.Background(), m, "late")
	if err != nil && !apierr.ProvesNotSent(err) {
		t.Fatalf("a call after the drain: %v, want NOT_SENT or (gone unary) success", err)
	}
	close(f.release)
	if err := <-inflight; err != nil {
		t.Fatalf("the call in flight when the drain began: %v, want its answer", err)
	}
	// The stream has ended; calls go unary (the fake server still serves them).
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := list(context.Background(), m, "x")
		if err == nil {
			break
		}
		if !apierr.ProvesNotSent(err) || time.Now().After(deadline) {
			t.Fatalf("after the drain: %v", err)
		}
	}
}

// Hostile calls on a raw stream get errors naming the field, and the
// server goes on serving; a panicking handler is an Internal error.
func TestHostileCallsAreRefused(t *testing.T) {
	cc, _ := fakeServer(t, newFake(), false)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	st, err := pb.NewMuxServiceClient(cc).Calls(ctx)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := proto.Marshal(&pb.ListNamespacesRequest{PaginationToken: "block"})
	panics, _ := proto.Marshal(&pb.ListNamespacesRequest{PaginationToken: "panic"})
	ok, _ := proto.Marshal(&pb.ListNamespacesRequest{PaginationToken: "ok"})
	calls := []struct {
		call *pb.MuxCall
		code codes.Code
		word string // in the message
	}{
		{&pb.MuxCall{Id: 1, Method: "/grackle.v1.GrackleService/WatchSemaphore"}, codes.Unimplemented, "method"},
		{&pb.MuxCall{Id: 2, Method: "/nope/Nope"}, codes.Unimplemented, "method"},
		{&pb.MuxCall{Id: 3, Method: pb.GrackleService_ListNamespaces_FullMethodName, TimeoutMicros: -5}, codes.InvalidArgument, "timeout_micros"},
		{&pb.MuxCall{Id: 4, Method: pb.GrackleService_ListNamespaces_FullMethodName, Request: []byte{0xff, 0xff, 0xff}}, codes.InvalidArgument, "request"},
		{&pb.MuxCall{Id: 5, Method: pb.GrackleService_ListNamespaces_FullMethodName, Request: panics}, codes.Internal, "panicked"},
		{&pb.MuxCall{Id: 6, Method: pb.GrackleService_ListNamespaces_FullMethodName, Request: block, TimeoutMicros: 2_000_000}, codes.DeadlineExceeded, ""},
		{&pb.MuxCall{Id: 6, Method: pb.GrackleService_ListNamespaces_FullMethodName, Request: ok}, codes.InvalidArgument, "id"},
		{&pb.MuxCall{Id: 7, Method: pb.GrackleService_ListNamespaces_FullMethodName, Request: ok}, codes.OK, ""},
	}
	want := map[uint64][]codes.Code{}
	for _, c := range calls {
		if err := st.Send(c.call); err != nil {
			t.Fatal(err)
		}
		want[c.call.Id] = append(want[c.call.Id], c.code)
	}
	for range calls {
		r, err := st.Recv()
		if err != nil {
			t.Fatal(err)
		}
		code := codes.OK
		var msg string
		if len(r.Status) > 0 {
			s := new(spb.Status)
			if err := proto.Unmarshal(r.Status, s); err != nil {
				t.Fatal(err)
			}
			code, msg = codes.Code(s.Code), s.Message
		}
		found := false
		for i, w := range want[r.Id] {
			if w == code {
				want[r.Id] = append(want[r.Id][:i], want[r.Id][i+1:]...)
				found = true
				break
			}
		}
		if !found {
			t.Errorf("call %d: %v %q, want one of %v", r.Id, code, msg, want[r.Id])
		}
		for _, c := range calls {
			if c.call.Id == r.Id && c.code == code && c.word != "" && !strings.Contains(msg, c.word) {
				t.Errorf("call %d: message %q does not name %q", r.Id, msg, c.word)
			}
		}
	}
}

// Past MaxInFlight running calls a call is refused without running, and a
// cancel still gets through (the server keeps reading).
func TestInFlightBoundRefusesAndCancelsGetThrough(t *testing.T) {
	f := newFake()
	f.entered = make(chan struct{}, mux.MaxInFlight+1)
	cc, _ := fakeServer(t, f, false)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	st, err := pb.NewMuxServiceClient(cc).Calls(ctx)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := proto.Marshal(&pb.ListNamespacesRequest{PaginationToken: "block"})
	for id := uint64(1); id <= mux.MaxInFlight+1; id++ {
		if err := st.Send(&pb.MuxCall{Id: id, Method: pb.GrackleService_ListNamespaces_FullMethodName, Request: block}); err != nil {
			t.Fatal(err)
		}
	}
	r, err := st.Recv()
	if err != nil {
		t.Fatal(err)
	}
	var s spb.Status
	if err := proto.Unmarshal(r.Status, &s); err != nil {
		t.Fatal(err)
	}
	if r.Id != mux.MaxInFlight+1 || codes.Code(s.Code) != codes.ResourceExhausted || !strings.Contains(s.Message, "in flight") {
		t.Fatalf("call %d: %v %q, want call %d refused ResourceExhausted", r.Id, codes.Code(s.Code), s.Message, mux.MaxInFlight+1)
	}
	if err := st.Send(&pb.MuxCall{Id: 7, Cancel: true}); err != nil {
		t.Fatal(err)
	}
	r, err = st.Recv()
	if err != nil {
		t.Fatal(err)
	}
	s.Reset()
	_ = proto.Unmarshal(r.Status, &s)
	if r.Id != 7 || codes.Code(s.Code) != codes.Canceled {
		t.Fatalf("after the cancel of call 7: call %d %v, want call 7 Canceled", r.Id, codes.Code(s.Code))
	}
	close(f.release)
	for range mux.MaxInFlight - 1 {
		if _, err := st.Recv(); err != nil {
			t.Fatal(err)
		}
	}
}

// A stream with no call for the idle timeout ends NOT_SENT (so the gRPC
// server's idle timeout can then close the connection), and a client's
// next call still answers.
func TestIdleStreamEnds(t *testing.T) {
	cc, _ := fakeServerWith(t, newFake(), false, 200*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	st, err := pb.NewMuxServiceClient(cc).Calls(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Recv(); !apierr.ProvesNotSent(err) || !strings.Contains(status.Convert(err).Message(), "no call") {
		t.Fatalf("an idle stream ended with %v, want NOT_SENT saying it had no call", err)
	}
	m := mux.NewConn(cc)
	defer m.Close()
	untilStream(t, m, func() error { _, err := list(ctx, m, "warm"); return err })
	// The server ends the stream once it has been idle for 200 ms.
	deadline := time.Now().Add(15 * time.Second)
	for m.HasStream() {
		if time.Now().After(deadline) {
			t.Fatal("the idle stream did not end within 15s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	for i := range 10 {
		if _, err := list(ctx, m, "x"); err != nil {
			t.Fatalf("call %d after the stream went idle: %v", i, err)
		}
	}
}

// A method the server serves but does not run on the stream is answered
// Unimplemented with not_run, and the client sends it as a unary call.
func TestMethodNotOnTheStreamGoesUnary(t *testing.T) {
	f := newFake()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	pb.RegisterGrackleServiceServer(gs, f)
	ms := mux.NewServer(mux.ServerConfig{NodeID: "fake"}) // registers nothing
	pb.RegisterMuxServiceServer(gs, ms)
	go func() { _ = gs.Serve(lis) }()
	defer func() { gs.Stop(); ms.Close() }()
	cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	m := mux.NewConn(cc)
	defer m.Close()
	deadline := time.Now().Add(15 * time.Second)
	for !m.HasStream() {
		if _, err := list(context.Background(), m, "warm"); err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatal("no stream within 15s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	r, err := list(context.Background(), m, "x")
	if err != nil || r.Namespaces[0].Name != "x" {
		t.Fatalf("a call the stream does not run: %v %v, want its unary answer", r, err)
	}
	if m.StreamCalls() != 0 {
		t.Fatalf("%d calls counted as answered on the stream", m.StreamCalls())
	}
}

// More calls in flight than workers: every call is answered; the extra
// workers started for them stay and serve the next calls (not one new
// goroutine, with a stack to grow, per call), end once idle, and end at
// Close.
func TestExtraWorkersServeLaterCalls(t *testing.T) {
	f, ms, m := extraCase(t, time.Hour, 1024)
	n := mux.Workers + 72
	blockedBatch(t, f, m, n, nil)
	first := ms.Extras()
	if first < 72 {
		t.Fatalf("%d extra workers for %d calls in flight and %d workers, want at least 72", first, n, mux.Workers)
	}
	// Every worker back to waiting before the next batch, so that the
	// next calls can only find them busy if they were not reused.
	waitUntil(t, "every worker waiting", func() bool { return ms.Waiting() == int64(mux.Workers)+ms.Extras() })
	blockedBatch(t, f, m, n, nil)
	if again := ms.Extras(); again > first {
		t.Fatalf("extra workers %d -> %d: the second batch started new ones instead of reusing them", first, again)
	}
	if m.StreamCalls() < uint64(2*n) {
		t.Fatalf("%d calls on the stream, want the %d of the batches", m.StreamCalls(), 2*n)
	}
	ms.Drain()
	ms.Close()
	waitUntil(t, "no extra worker after Close", func() bool { return ms.Extras() == 0 })
}

// Extra workers end once idle for a while.
func TestExtraWorkersEndWhenIdle(t *testing.T) {
	f, ms, m := extraCase(t, 20*time.Millisecond, 1024)
	n := mux.Workers + 8
	blockedBatch(t, f, m, n, func() {
		if ms.Extras() < 8 {
			t.Errorf("%d extra workers for %d calls in flight, want at least 8", ms.Extras(), n)
		}
	})
	waitUntil(t, "no extra worker once idle", func() bool { return ms.Extras() == 0 })
}

// Beyond the most extra workers that may stay, an extra worker ends after
// its call.
func TestExtraWorkersBeyondTheMostEnd(t *testing.T) {
	f, ms, m := extraCase(t, time.Hour, 4)
	blockedBatch(t, f, m, mux.Workers+12, nil)
	// The first 4 stay (they wait an hour); the other 8 end.
	waitUntil(t, "4 extra workers staying, waiting", func() bool {
		return ms.Extras() == 4 && ms.Waiting() == int64(mux.Workers)+4
	})
}

// extraCase is a fake server whose extra workers wait idle for idle and of
// which at most most stay (restored after the test), and a connection
// whose stream to it is up.
func extraCase(t *testing.T, idle time.Duration, most int64) (*fakeAPI, *mux.Server, *mux.Conn) {
	t.Helper()
	t.Cleanup(mux.SetExtraIdle(idle, most)) // runs after the server's cleanup
	f := newFake()
	cc, ms := fakeServer(t, f, false)
	m := mux.NewConn(cc)
	t.Cleanup(func() { m.Close() })
	untilStream(t, m, func() error { _, err := list(context.Background(), m, "warm"); return err })
	return f, ms, m
}

// blockedBatch sends n calls that all block in the handler at once, runs
// whileBlocked (if any) then, answers them all, and fails unless each
// succeeded.
func blockedBatch(t *testing.T, f *fakeAPI, m *mux.Conn, n int, whileBlocked func()) {
	t.Helper()
	errs := make(chan error, n)
	for range n {
		go func() { _, err := list(context.Background(), m, "block"); errs <- err }()
	}
	for range n {
		<-f.entered
	}
	if whileBlocked != nil {
		whileBlocked()
	}
	for range n {
		f.release <- struct{}{}
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatalf("a call: %v", err)
		}
	}
}

// waitUntil polls cond until it holds, and fails after 10 s.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within 10 s: %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}
