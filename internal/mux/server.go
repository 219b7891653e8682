// Package mux carries many unary calls over one long-lived gRPC stream
// (grackle.v1.MuxService/Calls): Server runs each call through the same
// generated handler and interceptors as the unary RPC, and Conn is a
// grpc.ClientConnInterface that sends unary calls over such a stream when
// the server offers it, and as ordinary unary calls otherwise. See
// DESIGN.md for why and for what each end promises.
package mux

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/grackle-coord/grackle/apierr"
	"github.com/grackle-coord/grackle/internal/vtcodec"
	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
)

// MaxInFlight bounds the calls one stream has running on the server: a
// call past it is answered ResourceExhausted at once and not run, so a
// stream costs a node at most this many goroutines. The server keeps
// reading (a cancel must get through however many calls run). Conn counts
// a call in flight until its answer arrives, also once its caller gave up
// on it, and sends a call past the bound as a unary call instead.
const MaxInFlight = 1024

// ServerConfig configures a Server.
type ServerConfig struct {
	// Interceptor runs around every call, as the gRPC server's chained
	// unary interceptors run around a unary call.
	Interceptor grpc.UnaryServerInterceptor
	// Decode decodes a call's request (the gRPC server's codec, so that a
	// request is refused for the same reasons either way); nil: proto.Unmarshal.
	Decode func(m proto.Message, b []byte) error
	// NodeID names this node in the errors it sets.
	NodeID string
	// IdleTimeout ends a stream that has had no call running for this
	// long (0: never), so that the gRPC server's own idle timeout can then
	// close the connection of a client that went quiet: an open stream
	// would keep it open for ever.
	IdleTimeout time.Duration
}

type method struct {
	srv     any
	handler grpc.MethodHandler
}

// Server serves MuxService. Register the services whose unary methods it
// may run before it serves.
type Server struct {
	pb.UnimplementedMuxServiceServer
	cfg     ServerConfig
	methods map[string]method

	drainOnce sync.Once
	drain     chan struct{} // closed by Drain

	jobsMu  sync.RWMutex
	jobs    chan job     // to the idle workers; nil once closed
	extras  atomic.Int64 // extra workers running (for maxExtras, and tests)
	waiting atomic.Int64 // workers waiting for a call (tests)
}

// workers is the number of long-lived goroutines that run calls: a call
// on a new goroutine would start on a small stack and grow it (copy it)
// every time, 11 % of a leader's CPU under the pairs benchmark. A call
// that finds every worker busy starts an extra worker, which stays for
// later calls until it has been idle for extraIdle: with more calls in
// flight than workers (256 readers), starting each on a new goroutine
// cost the same 11 % again.
const workers = 128

// extraIdle is how long an extra worker waits for a call before it ends;
// beyond maxExtras running, an extra worker ends after its call (so a
// burst of calls does not leave its goroutines and their stacks behind
// for extraIdle). Atomic, so that tests may change them while workers of
// earlier tests end.
var extraIdle, maxExtras atomic.Int64

func init() {
	extraIdle.Store(int64(10 * time.Second))
	maxExtras.Store(1024)
}

type job struct {
	st     *serverStream
	ctx    context.Context
	cancel context.CancelFunc
	c      *pb.MuxCall
	m      method
}

// NewServer returns a Server with no methods.
func NewServer(cfg ServerConfig) *Server {
	if cfg.Decode == nil {
		cfg.Decode = func(m proto.Message, b []byte) error { return proto.Unmarshal(b, m) }
	}
	s := &Server{cfg: cfg, methods: map[string]method{}, drain: make(chan struct{}), jobs: make(chan job)}
	for range workers {
		go s.work(s.jobs)
	}
	return s
}

// work runs calls until Close.
func (s *Server) work(jobs <-chan job) {
	for {
		s.waiting.Add(1)
		j, ok := <-jobs
		s.waiting.Add(-1)
		if !ok {
			return
		}
		j.st.run(j.ctx, j.cancel, j.c, j.m)
	}
}

// Close stops the workers; call it once the gRPC server has stopped (no
// stream runs).
func (s *Server) Close() {
	s.Drain()
	s.jobsMu.Lock()
	defer s.jobsMu.Unlock()
	if s.jobs != nil {
		close(s.jobs)
		s.jobs = nil
	}
}

// Register lets calls of sd's unary methods, served by impl, ride the
// stream. Streaming methods never do.
func (s *Server) Register(sd *grpc.ServiceDesc, impl any) {
	for _, m := range sd.Methods {
		s.methods["/"+sd.ServiceName+"/"+m.MethodName] = method{srv: impl, handler: m.Handler}
	}
}

// Drain makes every stream stop taking calls: calls already taken run to
// their end and are answered, calls that arrive after are answered
// Unavailable with reason NOT_SENT, and each stream then ends with that
// status, so that its client retries them elsewhere. Call it before the
// gRPC server's GracefulStop, which would otherwise wait for the streams.
func (s *Server) Drain() { s.drainOnce.Do(func() { close(s.drain) }) }

func (s *Server) notTaken() error {
	return apierr.New(codes.Unavailable, apierr.NotSent, s.cfg.NodeID, apierr.Leader{},
		"this node is shutting down and took no more calls on the multiplexed stream: the call was not run")
}

// Calls serves one stream until its client closes it, it breaks, or Drain.
func (s *Server) Calls(ss pb.MuxService_CallsServer) error {
	select {
	case <-s.drain:
		return s.notTaken()
	default:
	}
	// The empty header tells the client at once that this server runs
	// calls on the stream (a server without MuxService answers Unimplemented).
	// Its grackle-mux-batch says that calls may come batched, its
	// grackle-mux-metadata that a call may carry metadata of its own.
	if err := ss.SendHeader(metadata.Pairs(batchKey, "1", metadataKey, "1")); err != nil {
		return err
	}
	st := &serverStream{s: s, ss: ss, ctx: ss.Context(), calls: map[uint64]context.CancelFunc{}, stopped: make(chan struct{})}
	st.md, _ = metadata.FromIncomingContext(ss.Context())
	st.batching = wantsBatches(ss.Context())
	st.out = newOutbox(st.write, 2*MaxInFlight)
	st.last = time.Now()
	recvDone := make(chan error, 1)
	go func() { recvDone <- st.receive() }()
	var idle <-chan time.Time
	if s.cfg.IdleTimeout > 0 {
		t := time.NewTicker(s.cfg.IdleTimeout / 4)
		defer t.Stop()
		idle = t.C
	}
	var err error
	drained, idled := false, false
	for !drained && !idled && err == nil {
		select {
		case err = <-recvDone: // never nil
		case <-s.drain:
			drained = true
		case <-idle:
			idled = st.idleFor(s.cfg.IdleTimeout)
		}
	}
	st.stop()
	st.running.Wait()
	st.sendMu.Lock()
	st.closed = true
	st.sendMu.Unlock()
	if drained {
		return s.notTaken()
	}
	if idled {
		return apierr.New(codes.Unavailable, apierr.NotSent, s.cfg.NodeID, apierr.Leader{},
			fmt.Sprintf("the multiplexed stream had no call for %v and was closed: the call was not run", s.cfg.IdleTimeout))
	}
	if errors.Is(err, errClientDone) {
		return nil
	}
	return err
}

var errClientDone = errors.New("client closed its side")

type serverStream struct {
	s   *Server
	ss  pb.MuxService_CallsServer
	ctx context.Context
	md  metadata.MD // the stream's request metadata, under each call's own

	mu       sync.Mutex
	calls    map[uint64]context.CancelFunc // in flight, by id
	stopping bool
	stopped  chan struct{} // closed by stop
	last     time.Time     // when a call last started or ended
	running  sync.WaitGroup

	out      *outbox[answer]
	batching bool // the client takes results batched

	sendMu sync.Mutex
	closed bool // the handler returned: no more sends
}

// answer is a result waiting in the outbox; counted: it answers a call
// counted in running, which ends once the result is written (so that the
// stream's handler returns only after every result of a call it took).
type answer struct {
	r       *pb.MuxResult
	counted bool
}

// idleFor reports whether no call has run for d; it then stops the
// stream taking calls, so that none starts between the check and the end.
func (st *serverStream) idleFor(d time.Duration) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	if len(st.calls) > 0 || time.Since(st.last) < d {
		return false
	}
	st.stopLocked()
	return true
}

func (st *serverStream) stop() {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.stopLocked()
}

func (st *serverStream) stopLocked() {
	if !st.stopping {
		st.stopping = true
		close(st.stopped)
	}
}

// receive reads calls until the stream ends.
func (st *serverStream) receive() error {
	for {
		c := new(pb.MuxCall)
		if err := st.ss.RecvMsg(c); err != nil {
			if errors.Is(err, io.EOF) {
				return errClientDone
			}
			return err
		}
		if len(c.Batch) == 0 {
			st.take(c)
			continue
		}
		for _, one := range c.Batch {
			one.Batch = nil // batches do not nest
			st.take(one)
		}
	}
}

// take starts call c, or answers it at once.
func (st *serverStream) take(c *pb.MuxCall) {
	if c.Cancel {
		st.mu.Lock()
		cancel := st.calls[c.Id]
		st.mu.Unlock()
		if cancel != nil {
			cancel()
		}
		return
	}
	m, ok := st.s.methods[c.Method]
	if !ok {
		// Not run, so a client may send it as a unary call instead (a
		// service this node serves but does not register here).
		st.refuse(c.Id, true, status.Errorf(codes.Unimplemented,
			"method: %q is not a unary method this server runs on the multiplexed stream", c.Method))
		return
	}
	if c.TimeoutMicros < 0 {
		st.refuse(c.Id, false, status.Errorf(codes.InvalidArgument,
			"timeout_micros: %d is negative; it must be 0 (no deadline) or more", c.TimeoutMicros))
		return
	}
	if err := checkCallMetadata(c.Metadata); err != nil {
		st.refuse(c.Id, false, err)
		return
	}
	st.mu.Lock()
	var refusal error
	notRun := false
	switch _, dup := st.calls[c.Id]; {
	case st.stopping:
		refusal, notRun = st.s.notTaken(), true
	case len(st.calls) >= MaxInFlight:
		refusal = status.Errorf(codes.ResourceExhausted, "calls in flight on this stream: %d is the most; the call was not run", MaxInFlight)
	case dup:
		refusal = status.Errorf(codes.InvalidArgument, "id: %d is already in flight on this stream; ids must be unique among calls in flight", c.Id)
	}
	if refusal != nil {
		st.mu.Unlock()
		st.refuse(c.Id, notRun, refusal)
		return
	}
	var ctx context.Context
	var cancel context.CancelFunc
	if c.TimeoutMicros > 0 {
		ctx, cancel = context.WithTimeout(st.ctx, time.Duration(c.TimeoutMicros)*time.Microsecond)
	} else {
		ctx, cancel = context.WithCancel(st.ctx)
	}
	st.calls[c.Id] = cancel
	st.last = time.Now()
	st.running.Add(1)
	st.mu.Unlock()
	st.s.dispatch(job{st: st, ctx: ctx, cancel: cancel, c: c, m: m})
}

// refuse answers call id with err without running it; notRun tells the
// client it may send the call again (as a unary call, or elsewhere).
func (st *serverStream) refuse(id uint64, notRun bool, err error) {
	st.out.put(answer{r: &pb.MuxResult{Id: id, Status: statusBytes(err), NotRun: notRun}})
}

// dispatch hands j to an idle worker, or to a new extra worker.
func (s *Server) dispatch(j job) {
	s.jobsMu.RLock()
	jobs := s.jobs
	if jobs != nil {
		select {
		case jobs <- j:
			s.jobsMu.RUnlock()
			return
		default:
		}
	}
	s.jobsMu.RUnlock()
	go s.extraWork(j, jobs)
}

// extraWork runs j, then takes calls from jobs (nil: none, the server is
// closed) until it has waited extraIdle for one, or Close.
func (s *Server) extraWork(j job, jobs <-chan job) {
	n := s.extras.Add(1)
	defer s.extras.Add(-1)
	j.st.run(j.ctx, j.cancel, j.c, j.m)
	if jobs == nil || n > maxExtras.Load() {
		return
	}
	wait := time.Duration(extraIdle.Load())
	idle := time.NewTimer(wait)
	defer idle.Stop()
	for {
		s.waiting.Add(1)
		select {
		case j, ok := <-jobs:
			s.waiting.Add(-1)
			if !ok {
				return
			}
			j.st.run(j.ctx, j.cancel, j.c, j.m)
			idle.Reset(wait)
		case <-idle.C:
			s.waiting.Add(-1)
			return
		}
	}
}

// run runs one call through the method's handler and the interceptors,
// and answers it.
func (st *serverStream) run(ctx context.Context, cancel context.CancelFunc, c *pb.MuxCall, m method) {
	ts := &transportStream{method: c.Method}
	ctx = grpc.NewContextWithServerTransportStream(ctx, ts)
	if len(c.Metadata) > 0 {
		ctx = withCallMetadata(ctx, st.md, c.Metadata)
	}
	dec := func(v any) error {
		msg, ok := v.(proto.Message)
		if !ok {
			return status.Errorf(codes.Internal, "request of %s is not a protobuf message", c.Method)
		}
		err := st.s.cfg.Decode(msg, c.Request)
		if _, isStatus := status.FromError(err); err != nil && !isStatus {
			err = status.Errorf(codes.InvalidArgument, "request: does not decode as %T: %v", msg, err)
		}
		return err
	}
	resp, err := callHandler(ctx, m, dec, st.s.cfg.Interceptor)
	res := &pb.MuxResult{Id: c.Id, Header: toPairs(ts.header), Trailer: toPairs(ts.trailer)}
	if err == nil {
		if msg, ok := resp.(proto.Message); ok {
			res.Response, err = vtcodec.Marshal(msg)
		} else {
			err = status.Errorf(codes.Internal, "response of %s is not a protobuf message", c.Method)
		}
	}
	if err != nil {
		res.Response = nil
		res.Status = statusBytes(err)
	}
	st.mu.Lock()
	delete(st.calls, c.Id)
	st.last = time.Now()
	st.mu.Unlock()
	cancel()
	st.out.put(answer{r: res, counted: true})
}

// callHandler runs the handler, turning a panic into an Internal error as
// gRPC's own unary path would not (it would take the node down): a
// hostile request must not.
func callHandler(ctx context.Context, m method, dec func(any) error, ic grpc.UnaryServerInterceptor) (resp any, err error) {
	defer func() {
		if r := recover(); r != nil {
			resp, err = nil, status.Errorf(codes.Internal, "the call panicked: %v", r)
		}
	}()
	return m.handler(m.srv, ctx, dec, ic)
}

// write sends a batch of the outbox: as one message when the client takes
// batches, else one message each. A failed send means the stream is gone;
// its client learns that.
func (st *serverStream) write(as []answer) {
	st.sendMu.Lock()
	if !st.closed {
		chunks(as, st.batching, func(a answer) int { return vtcodec.Size(a.r) }, func(run []answer) {
			r := run[0].r
			if len(run) > 1 {
				r = &pb.MuxResult{Batch: make([]*pb.MuxResult, len(run))}
				for i, a := range run {
					r.Batch[i] = a.r
				}
			}
			_ = st.ss.Send(r)
		})
	}
	st.sendMu.Unlock()
	for _, a := range as {
		if a.counted {
			st.running.Done()
		}
	}
}

func statusBytes(err error) []byte {
	b, merr := proto.Marshal(status.Convert(err).Proto())
	if merr != nil {
		b, _ = proto.Marshal(status.New(codes.Internal, fmt.Sprintf("encoding the error: %v", merr)).Proto())
	}
	return b
}

// transportStream stands in for gRPC's per-call transport stream, so that
// grpc.SetHeader, SendHeader and SetTrailer in a handler reach the result.
// Only the call's own goroutine uses it.
type transportStream struct {
	method          string
	header, trailer metadata.MD
}

func (t *transportStream) Method() string { return t.method }
func (t *transportStream) SetHeader(md metadata.MD) error {
	t.header = join(t.header, md)
	return nil
}
func (t *transportStream) SendHeader(md metadata.MD) error { return t.SetHeader(md) }
func (t *transportStream) SetTrailer(md metadata.MD) error {
	t.trailer = join(t.trailer, md)
	return nil
}

// join merges md into to. The first map a call sets is kept as it is:
// a write sets one header (the Raft index), and metadata.Join's copy of
// it was a tenth of the bytes a leader allocated per write. The handlers
// build a fresh map for each header and trailer they set and never touch
// it again, and toPairs only reads it.
func join(to, md metadata.MD) metadata.MD {
	if len(to) == 0 {
		return md
	}
	return metadata.Join(to, md)
}

// toPairs carries md in a result. Binary keys ("-bin") go as bytes; a
// text value that is not valid UTF-8 (which a string field may not hold,
// and gRPC would not send either) is dropped, so that no handler's
// metadata can make a result fail to encode and end the stream with every
// call on it.
func toPairs(md metadata.MD) []*pb.MuxMetadata {
	if len(md) == 0 {
		return nil
	}
	out := make([]*pb.MuxMetadata, 0, len(md))
	for k, v := range md {
		if isBinaryKey(k) {
			out = append(out, binaryPair(k, v))
			continue
		}
		valid := v
		if !allUTF8(v) {
			valid = nil
			for _, s := range v {
				if utf8.ValidString(s) {
					valid = append(valid, s)
				}
			}
		}
		out = append(out, &pb.MuxMetadata{Key: k, Values: valid})
	}
	return out
}

// binaryPair carries a binary key's values as bytes.
func binaryPair(k string, v []string) *pb.MuxMetadata {
	bs := make([][]byte, len(v))
	for i, s := range v {
		bs[i] = []byte(s)
	}
	return &pb.MuxMetadata{Key: k, BinaryValues: bs}
}

func fromPairs(ps []*pb.MuxMetadata) metadata.MD {
	md := make(metadata.MD, len(ps))
	for _, p := range ps {
		md[p.Key] = append(md[p.Key], p.Values...)
		for _, b := range p.BinaryValues {
			md[p.Key] = append(md[p.Key], string(b))
		}
	}
	return md
}

func allUTF8(v []string) bool {
	for _, s := range v {
		if !utf8.ValidString(s) {
			return false
		}
	}
	return true
}

// isBinaryKey reports whether gRPC treats k's values as bytes.
func isBinaryKey(k string) bool { return strings.HasSuffix(k, "-bin") }

// Chain makes one interceptor of ics, the first outermost, as
// grpc.ChainUnaryInterceptor does for the gRPC server.
func Chain(ics ...grpc.UnaryServerInterceptor) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		return chainFrom(ics, 0, info, handler)(ctx, req)
	}
}

func chainFrom(ics []grpc.UnaryServerInterceptor, i int, info *grpc.UnaryServerInfo, final grpc.UnaryHandler) grpc.UnaryHandler {
	if i == len(ics) {
		return final
	}
	return func(ctx context.Context, req any) (any, error) {
		return ics[i](ctx, req, info, chainFrom(ics, i+1, info, final))
	}
}
