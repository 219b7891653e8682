package mux_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/grackle-coord/grackle/internal/mux"
	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
)

// gate sits on one side of the Calls stream: it counts the stream
// messages sent and the calls or results they carry, and once armed holds
// the next message until opened (and then, with fail, fails it and every
// later one without sending).
type gate struct {
	mu          sync.Mutex
	msgs, items int
	hold        chan struct{} // armed: the next send waits for it
	held        chan struct{} // closed when the held send is being held
	fail        bool
}

// arm holds the next send; it returns a channel closed once that send is
// held, and open, which lets it go.
func (g *gate) arm(fail bool) (held <-chan struct{}, open func()) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.hold, g.held, g.fail = make(chan struct{}), make(chan struct{}), fail
	hold := g.hold
	return g.held, func() { close(hold) }
}

// send counts m (a *pb.MuxCall or *pb.MuxResult) and holds it when armed;
// false: fail it.
func (g *gate) send(m any) bool {
	g.mu.Lock()
	hold, held, fail := g.hold, g.held, g.fail
	g.hold = nil
	g.mu.Unlock()
	if hold != nil {
		close(held)
		<-hold
	}
	if fail {
		return false
	}
	n := 1
	switch m := m.(type) {
	case *pb.MuxCall:
		n = max(n, len(m.Batch))
	case *pb.MuxResult:
		n = max(n, len(m.Batch))
	}
	g.mu.Lock()
	g.msgs++
	g.items += n
	g.mu.Unlock()
	return true
}

func (g *gate) counts() (msgs, items int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.msgs, g.items
}

func (g *gate) reset() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.msgs, g.items = 0, 0
}

type gatedServerStream struct {
	grpc.ServerStream
	g *gate
}

func (s gatedServerStream) SendMsg(m any) error {
	if !s.g.send(m) {
		return status.Error(codes.Unavailable, "gate: not sent")
	}
	return s.ServerStream.SendMsg(m)
}

type gatedClientStream struct {
	grpc.ClientStream
	g *gate
}

func (s gatedClientStream) SendMsg(m any) error {
	if !s.g.send(m) {
		return status.Error(codes.Unavailable, "gate: not sent")
	}
	return s.ClientStream.SendMsg(m)
}

// gatedCase is a fake server with a gate on the messages its streams send
// (sg) and a connection with a gate on its streams' messages (cg), the
// stream up.
func gatedCase(t *testing.T) (f *fakeAPI, ms *mux.Server, m *mux.Conn, sg, cg *gate) {
	t.Helper()
	sg, cg = &gate{}, &gate{}
	f = newFake()
	var cc *grpc.ClientConn
	cc, ms = fakeServerWith(t, f, false, 0,
		grpc.StreamInterceptor(func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			return h(srv, gatedServerStream{ss, sg})
		}),
		grpc.WithStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
			cs, err := streamer(ctx, desc, cc, method, opts...)
			if err != nil {
				return nil, err
			}
			return gatedClientStream{cs, cg}, nil
		}))
	m = mux.NewConn(cc)
	t.Cleanup(m.Close)
	untilStream(t, m, func() error { _, err := list(context.Background(), m, "warm"); return err })
	return f, ms, m, sg, cg
}

// manyCalls starts n calls named prefix0..prefix<n-1> on m and returns a
// wait that fails the test unless each got its own answer.
func manyCalls(t *testing.T, m *mux.Conn, prefix string, n int) (wait func()) {
	errs := make(chan error, n)
	for i := range n {
		name := fmt.Sprintf("%s%d", prefix, i)
		go func() {
			r, err := list(context.Background(), m, name)
			if err == nil && (len(r.Namespaces) != 1 || r.Namespaces[0].Name != name) {
				err = fmt.Errorf("call %s answered %v", name, r)
			}
			errs <- err
		}()
	}
	return func() {
		t.Helper()
		for range n {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
	}
}

// Results that wait while the stream sends another message go out
// together in the next one, each to its own call.
func TestResultsThatWaitShareAMessage(t *testing.T) {
	f, ms, m, sg, _ := gatedCase(t)
	served := f.served.Load()
	// Every handler ran and every worker but the held writer is back
	// waiting: the 20 results are queued.
	waitBehindHeldSend(t, m, sg, "results", func() bool {
		return f.served.Load() == served+21 && ms.Waiting() == int64(mux.Workers)-1
	})
}

// Calls that wait while the client sends another message go out together
// in the next one.
func TestCallsThatWaitShareAMessage(t *testing.T) {
	_, _, m, _, cg := gatedCase(t)
	waitBehindHeldSend(t, m, cg, "calls", func() bool { return m.Queued() == 20 })
}

// waitBehindHeldSend holds g's next send (one call's, or its result's),
// makes 20 more calls, waits until queued says their messages wait behind
// it, lets it go, and fails unless every call got its own answer and g
// sent exactly 2 messages carrying the 21: the held one, then the 20.
func waitBehindHeldSend(t *testing.T, m *mux.Conn, g *gate, what string, queued func() bool) {
	t.Helper()
	held, open := g.arm(false)
	first := manyCalls(t, m, "first", 1)
	<-held
	rest := manyCalls(t, m, "rest", 20)
	waitUntil(t, "20 "+what+" queued", queued)
	g.reset()
	open()
	first()
	rest()
	if msgs, items := g.counts(); msgs != 2 || items != 21 {
		t.Fatalf("%d messages carried %d %s, want 2 messages (the held one, then the 20 that waited) and 21", msgs, items, what)
	}
}

// Calls whose message was never written (the send failed) were not run:
// they go as unary calls and are answered.
func TestUnwrittenCallsGoUnary(t *testing.T) {
	_, _, m, _, cg := gatedCase(t)
	before := m.StreamCalls()
	held, open := cg.arm(true)
	first := manyCalls(t, m, "first", 1)
	<-held
	rest := manyCalls(t, m, "rest", 5)
	waitUntil(t, "5 calls queued", func() bool { return m.Queued() == 5 })
	open()
	first()
	rest()
	if n := m.StreamCalls() - before; n != 0 {
		t.Fatalf("%d of the unwritten calls counted as answered on the stream, want every one unary", n)
	}
}

// A client that did not ask for batched results (an older one) gets one
// message per result, also for calls it sent batched; a call inside a
// batch that has a batch of its own is taken as that one call.
func TestClientWithoutBatchesGetsOneResultPerMessage(t *testing.T) {
	cc, _ := fakeServer(t, newFake(), false)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, err := pb.NewMuxServiceClient(cc).Calls(ctx)
	if err != nil {
		t.Fatal(err)
	}
	h, err := st.Header()
	if err != nil || len(h.Get("grackle-mux-batch")) != 1 || h.Get("grackle-mux-batch")[0] != "1" {
		t.Fatalf("header %v (%v): want grackle-mux-batch: 1", h, err)
	}
	const n = 10
	b := &pb.MuxCall{}
	for i := range n {
		req, _ := proto.Marshal(&pb.ListNamespacesRequest{PaginationToken: fmt.Sprint("c", i)})
		c := &pb.MuxCall{Id: uint64(i + 1), Method: pb.GrackleService_ListNamespaces_FullMethodName, Request: req}
		if i == 0 {
			c.Batch = []*pb.MuxCall{{Id: 99, Method: pb.GrackleService_ListNamespaces_FullMethodName, Request: req}}
		}
		b.Batch = append(b.Batch, c)
	}
	if err := st.Send(b); err != nil {
		t.Fatal(err)
	}
	seen := map[uint64]bool{}
	for range n {
		r, err := st.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Batch) > 0 {
			t.Fatalf("a batch of %d results to a client that did not ask for batches", len(r.Batch))
		}
		var resp pb.ListNamespacesResponse
		if err := proto.Unmarshal(r.Response, &resp); err != nil || len(resp.Namespaces) != 1 ||
			resp.Namespaces[0].Name != fmt.Sprint("c", r.Id-1) || seen[r.Id] {
			t.Fatalf("result %d: %v %v (status %x)", r.Id, &resp, err, r.Status)
		}
		seen[r.Id] = true
	}
	if len(seen) != n {
		t.Fatalf("results for %v, want ids 1..%d", seen, n)
	}
}

// A call whose caller gave up while it waited for the stream (its
// deadline passed before it was written) is not sent, nor its cancel: the
// server never runs it, as a unary call whose context ended before it
// went out.
func TestCallGivenUpBeforeWrittenIsNotSent(t *testing.T) {
	f, _, m, _, cg := gatedCase(t)
	served := f.served.Load()
	held, open := cg.arm(false)
	first := manyCalls(t, m, "first", 1)
	<-held
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := list(ctx, m, "late"); status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("the call that waited behind a held send: %v, want DeadlineExceeded", err)
	}
	cg.reset()
	open()
	first()
	// One more call after it, so that the late call and its cancel would
	// have been written before this one's answer came.
	if _, err := list(context.Background(), m, "after"); err != nil {
		t.Fatal(err)
	}
	if msgs, items := cg.counts(); items != 2 {
		t.Fatalf("%d messages carried %d calls or cancels after the hold, want 2 (the held call and the next), not the late call or its cancel", msgs, items)
	}
	if n := f.served.Load() - served; n != 2 {
		t.Fatalf("the server ran %d calls, want 2: the late call must not run", n)
	}
}
