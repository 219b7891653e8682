package mux

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/grackle-coord/grackle/apierr"
	"github.com/grackle-coord/grackle/internal/vtcodec"
	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
)

// Retry delays of the stream's opening: after a server without MuxService
// (an older version; it may be upgraded in place), and after any other
// failure to open it or a stream that broke.
const (
	retryUnsupported = 30 * time.Second
	retryBroken      = time.Second
)

// Conn is a grpc.ClientConnInterface over cc that sends unary calls on one
// multiplexed stream when the server offers it. Every call that cannot go
// on the stream goes as an ordinary unary call on cc: while the stream is
// being opened, when the server has no MuxService, when a call option asks
// for something the stream does not carry (anything but grpc.Header and
// grpc.Trailer), when the context carries outgoing metadata and the
// server does not take a call's own metadata on the stream (the stream
// then carries only the connection's, such as its per-RPC credentials,
// sent once when it opened), or past MaxInFlight. A call
// therefore behaves as the unary call would, whichever way it goes. Streaming
// RPCs always go on cc.
type Conn struct {
	cc *grpc.ClientConn

	mu        sync.Mutex
	cur       *clientStream // the open stream, nil while there is none
	opening   bool
	retryAt   time.Time // no new stream before this
	closed    bool
	now       func() time.Time
	viaStream atomic.Uint64 // calls answered on a stream (StreamCalls, for tests)
}

// NewConn wraps cc. Close the Conn before cc.
func NewConn(cc *grpc.ClientConn) *Conn { return &Conn{cc: cc, now: time.Now} }

// ClientConn is the wrapped connection.
func (c *Conn) ClientConn() *grpc.ClientConn { return c.cc }

// StreamCalls is how many calls were answered on a multiplexed stream.
func (c *Conn) StreamCalls() uint64 { return c.viaStream.Load() }

// Close ends the stream (calls in flight on it fail Unavailable, outcome
// unknown, as on a closed connection). It does not close cc.
func (c *Conn) Close() {
	c.mu.Lock()
	c.closed = true
	cur := c.cur
	c.cur = nil
	c.mu.Unlock()
	if cur != nil {
		cur.cancel()
	}
}

// NewStream opens a streaming RPC on cc.
func (c *Conn) NewStream(ctx context.Context, desc *grpc.StreamDesc, method string, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	return c.cc.NewStream(ctx, desc, method, opts...)
}

// Invoke runs a unary call, on the stream when it can.
func (c *Conn) Invoke(ctx context.Context, method string, args, reply any, opts ...grpc.CallOption) error {
	req, rok := args.(proto.Message)
	out, ook := reply.(proto.Message)
	var header, trailer *metadata.MD
	carried := rok && ook
	for _, o := range opts {
		switch o := o.(type) {
		case grpc.HeaderCallOption:
			header = o.HeaderAddr
		case grpc.TrailerCallOption:
			trailer = o.TrailerAddr
		case grpc.StaticMethodCallOption:
			// Generated stubs add it: it only marks the method name as fixed.
		default:
			carried = false // an option only a unary call honours
		}
	}
	if !carried {
		return c.cc.Invoke(ctx, method, args, reply, opts...)
	}
	cs := c.stream()
	if cs == nil {
		return c.cc.Invoke(ctx, method, args, reply, opts...)
	}
	var meta []*pb.MuxMetadata
	if md, ok := metadata.FromOutgoingContext(ctx); ok && md.Len() > 0 {
		// Metadata of this call alone (a caller's token, say) goes with
		// the call to a server that takes it, and only what a unary call
		// could carry as well; else the call goes as a unary call.
		meta = callPairs(md)
		if !cs.metadata || checkCallMetadata(meta) != nil {
			return c.cc.Invoke(ctx, method, args, reply, opts...)
		}
	}
	res, err, ok := cs.call(ctx, method, req, meta)
	if !ok {
		return c.cc.Invoke(ctx, method, args, reply, opts...)
	}
	if err != nil {
		return err
	}
	c.viaStream.Add(1)
	if header != nil {
		*header = fromPairs(res.Header)
	}
	if trailer != nil {
		*trailer = fromPairs(res.Trailer)
	}
	if len(res.Status) > 0 {
		var st spb.Status
		if err := proto.Unmarshal(res.Status, &st); err != nil {
			return status.Errorf(codes.Internal, "multiplexed stream: the server's error does not decode: %v", err)
		}
		if codes.Code(st.Code) == codes.OK {
			return status.Errorf(codes.Internal, "multiplexed stream: the server sent an error with code OK")
		}
		return status.ErrorProto(&st)
	}
	if err := vtcodec.Unmarshal(res.Response, out); err != nil {
		return status.Errorf(codes.Internal, "multiplexed stream: the response does not decode: %v", err)
	}
	return nil
}

// stream returns the open stream, or nil (and starts opening one when
// none is being opened and the last failure is old enough).
func (c *Conn) stream() *clientStream {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cur != nil || c.closed || c.opening || c.now().Before(c.retryAt) {
		return c.cur
	}
	c.opening = true
	go c.open()
	return nil
}

func (c *Conn) open() {
	ctx, cancel := context.WithCancel(context.Background())
	// Results may come batched (an older server ignores this).
	sctx := metadata.AppendToOutgoingContext(ctx, batchKey, "1")
	cs, err := c.cc.NewStream(sctx, &pb.MuxService_ServiceDesc.Streams[0], pb.MuxService_Calls_FullMethodName,
		grpc.ForceCodecV2(vtcodec.Codec{})) // the server is trusted: see package vtcodec
	var header metadata.MD
	if err == nil {
		header, err = cs.Header() // the server sends its header at once; an old server ends the stream
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.opening = false
	if err != nil || c.closed {
		cancel()
		delay := retryBroken
		if status.Code(err) == codes.Unimplemented {
			delay = retryUnsupported
		}
		c.retryAt = c.now().Add(delay)
		return
	}
	s := &clientStream{conn: c, cs: cs, cancel: cancel, pending: map[uint64]*pendingCall{}}
	v := header.Get(batchKey)
	s.batching = len(v) > 0 && v[0] == "1"
	s.metadata = carriesMetadata(header)
	s.out = newOutbox(s.write, 0) // at most MaxInFlight calls and their cancels
	c.cur = s
	go s.receive()
}

// lost forgets s as the open stream (it broke).
func (c *Conn) lost(s *clientStream) {
	c.mu.Lock()
	if c.cur == s {
		c.cur = nil
		c.retryAt = c.now().Add(retryBroken)
	}
	c.mu.Unlock()
}

type pendingCall struct {
	done    chan struct{}
	res     *pb.MuxResult
	err     error
	notRun  bool // never written, or the stream ended NOT_SENT without an answer: the call was not run
	written bool // handed to the stream (under clientStream.mu): the server may run it
}

// abandoned stands for a call whose caller gave up (its context ended):
// it stays counted in flight until the server answers it, so that the
// client never has more calls running on the server than MaxInFlight.
var abandoned = &pendingCall{}

type clientStream struct {
	conn   *Conn
	cs     grpc.ClientStream
	cancel context.CancelFunc

	out      *outbox[outCall]
	batching bool // the server takes calls batched
	metadata bool // the server takes calls with metadata of their own

	mu      sync.Mutex
	nextID  uint64
	pending map[uint64]*pendingCall
	ended   error // set once the stream ended; every later call fails with it
	// endedNotRun: the stream ended NOT_SENT, so a call without a result
	// was not run.
	endedNotRun bool
}

// call sends one call and waits for its result. ok false: the call was not
// run on the server (never sent, answered not_run, or left unanswered by a
// stream the server ended NOT_SENT), so the unary call is safe and decides.
func (s *clientStream) call(ctx context.Context, method string, req proto.Message, meta []*pb.MuxMetadata) (*pb.MuxResult, error, bool) {
	if err := ctx.Err(); err != nil {
		return nil, status.FromContextError(err).Err(), true
	}
	// The runtime's encoder, not the generated one: it refuses a string
	// that is not valid UTF-8, as the unary call's codec does, so such a
	// request fails the same way on either path (never sent).
	b, err := proto.Marshal(req)
	if err != nil {
		return nil, nil, false // the unary call reports it in gRPC's words
	}
	m := &pb.MuxCall{Method: method, Request: b, Metadata: meta}
	if dl, ok := ctx.Deadline(); ok {
		left := time.Until(dl).Microseconds()
		if left <= 0 {
			return nil, status.Error(codes.DeadlineExceeded, context.DeadlineExceeded.Error()), true
		}
		m.TimeoutMicros = left
	}
	p := &pendingCall{done: make(chan struct{})}
	s.mu.Lock()
	if s.ended != nil || len(s.pending) >= MaxInFlight {
		s.mu.Unlock()
		return nil, nil, false
	}
	s.nextID++
	m.Id = s.nextID
	s.pending[m.Id] = p
	s.mu.Unlock()

	s.out.put(outCall{m: m, p: p})
	select {
	case <-p.done:
		if p.notRun || (p.res != nil && p.res.NotRun) {
			return nil, nil, false
		}
		return p.res, p.err, true
	case <-ctx.Done():
		s.mu.Lock()
		if _, ok := s.pending[m.Id]; ok {
			s.pending[m.Id] = abandoned
		}
		s.mu.Unlock()
		// Best effort (the server ends the call at its deadline anyway),
		// after the call itself, and without keeping this caller writing.
		go s.out.put(outCall{m: &pb.MuxCall{Id: m.Id, Cancel: true}})
		return nil, status.FromContextError(ctx.Err()).Err(), true
	}
}

// outCall is a call (or a cancel: p nil) waiting in the outbox.
type outCall struct {
	m *pb.MuxCall
	p *pendingCall
}

// write sends a batch of the outbox: as one message when the server takes
// batches, else one message each; then settles each call by whether it
// was written. A call whose caller gave up while it waited here is not
// sent at all (nor its cancel), as a unary call whose context ended
// before it went out is not: it was never run.
func (s *clientStream) write(cs []outCall) {
	cs = s.dropGivenUp(cs)
	if len(cs) == 0 {
		return
	}
	chunks(cs, s.batching, func(c outCall) int { return vtcodec.Size(c.m) }, func(run []outCall) {
		m := run[0].m
		if len(run) > 1 {
			m = &pb.MuxCall{Batch: make([]*pb.MuxCall, len(run))}
			for i, c := range run {
				m.Batch[i] = c.m
			}
		}
		s.settle(run, s.cs.SendMsg(m))
	})
}

// dropGivenUp removes from cs the calls whose callers gave up before they
// were written, and forgets them (they no longer count in flight), and
// the cancels of calls that are not in flight: only a call written and
// not yet answered has one to cancel.
func (s *clientStream) dropGivenUp(cs []outCall) []outCall {
	s.mu.Lock()
	defer s.mu.Unlock()
	kept := cs[:0]
	for _, c := range cs {
		p := s.pending[c.m.Id]
		switch {
		case c.p != nil && p == abandoned:
			delete(s.pending, c.m.Id)
			continue
		case c.p == nil && p != abandoned:
			continue
		}
		kept = append(kept, c)
	}
	clear(cs[len(kept):])
	return kept
}

// settle records the outcome of writing cs. A failed write means the
// stream had ended and the calls were not written: each goes as a unary
// call. A written call waits for its result, unless the stream ended
// while it was being written (end leaves calls not yet written to their
// writer): then its outcome is unknown, as for every call in flight.
func (s *clientStream) settle(cs []outCall, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range cs {
		p := c.p
		if p == nil || s.pending[c.m.Id] != p {
			continue // a cancel; or answered already, or its caller gave up
		}
		switch {
		case err != nil:
			delete(s.pending, c.m.Id)
			p.notRun = true
			close(p.done)
		case s.ended != nil:
			delete(s.pending, c.m.Id)
			p.err, p.notRun = s.ended, s.endedNotRun
			close(p.done)
		default:
			p.written = true
		}
	}
}

// receive hands each result to its call until the stream ends, then fails
// the calls still waiting.
func (s *clientStream) receive() {
	for {
		r := new(pb.MuxResult)
		if err := s.cs.RecvMsg(r); err != nil {
			s.end(err)
			return
		}
		if len(r.Batch) == 0 {
			s.deliver(r)
			continue
		}
		for _, one := range r.Batch {
			s.deliver(one)
		}
	}
}

// deliver hands r to its call.
func (s *clientStream) deliver(r *pb.MuxResult) {
	s.mu.Lock()
	p := s.pending[r.Id]
	delete(s.pending, r.Id)
	s.mu.Unlock()
	if p != nil && p != abandoned {
		p.res = r
		close(p.done)
	}
}

// end fails every call in flight. A stream the server ended with a
// NOT_SENT status (shutting down, or idle) answered every call it ran, so
// the rest were not run and go as unary calls; otherwise a call in
// flight may or may not have run, as with a unary call whose connection
// broke, and its error has no reason.
func (s *clientStream) end(err error) {
	s.conn.lost(s)
	s.cancel()
	notRun := apierr.ProvesNotSent(err)
	if !notRun {
		err = status.Errorf(codes.Unavailable, "the multiplexed stream ended with the call in flight (it may or may not have run): %v", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ended, s.endedNotRun = err, notRun
	for id, p := range s.pending {
		// A call not yet written is left to its writer, which learns
		// whether it was (settle).
		if p != abandoned && p.written {
			delete(s.pending, id)
			p.err, p.notRun = err, notRun
			close(p.done)
		}
	}
}
