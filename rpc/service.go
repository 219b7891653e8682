// Package rpc serves Grackle's gRPC API on one node: validation, forwarding
// of calls to the leader, linearizable reads, and the work only the leader
// runs (waiter queues, lease expiry). It changes state only through Raft.
package rpc

import (
	"context"
	"crypto/rand"
	"math/big"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/grackle-coord/grackle/apierr"
	"github.com/grackle-coord/grackle/fsm"
	fsmpb "github.com/grackle-coord/grackle/proto/grackle/fsm/v1"
	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
)

// Config is what the API layer needs to know about its node.
type Config struct {
	NodeID      string
	GRPCAddress string // the address clients dial for this node (replicated)
	RaftAddress string
	// InitialGRPC maps the ids of the initial members to their gRPC
	// addresses; the first leader replicates them.
	InitialGRPC map[string]string

	Limits            fsm.Limits
	MaxTimeoutSeconds int64
	// LeaseGrace is how much a new leader extends every live lease (at
	// least one election timeout), so an election never expires a client
	// that refreshed on time.
	LeaseGrace time.Duration
	// ApplyTimeout bounds one Raft apply when the caller has no deadline.
	ApplyTimeout time.Duration
	// ExpireBatch bounds the leases one expiry command reaps.
	ExpireBatch int32
	// MaxWaiters bounds the queued waiters per semaphore.
	MaxWaiters int
	// DialOptions are used to dial the leader when forwarding (its
	// transport credentials: peer TLS); default plaintext.
	DialOptions []grpc.DialOption
}

// Service implements pb.GrackleServiceServer and pb.ClusterServiceServer.
type Service struct {
	pb.UnimplementedGrackleServiceServer
	pb.UnimplementedClusterServiceServer

	cfg    Config
	raft   *raft.Raft
	fsm    *fsm.FSM
	log    hclog.Logger
	clock  clock
	leader atomic.Pointer[leaderState]

	connMu sync.Mutex
	conns  map[string]*grpc.ClientConn

	stopOnce sync.Once
	stop     chan struct{}
	wg       sync.WaitGroup
}

// New creates the service. Call Start to follow leadership changes.
func New(cfg Config, r *raft.Raft, f *fsm.FSM, log hclog.Logger) *Service {
	if cfg.MaxTimeoutSeconds <= 0 {
		cfg.MaxTimeoutSeconds = 300
	}
	if cfg.ApplyTimeout <= 0 {
		cfg.ApplyTimeout = 10 * time.Second
	}
	if cfg.ExpireBatch <= 0 {
		cfg.ExpireBatch = 10_000
	}
	if cfg.MaxWaiters <= 0 {
		cfg.MaxWaiters = 10_000
	}
	if cfg.Limits == (fsm.Limits{}) {
		cfg.Limits = fsm.DefaultLimits()
	}
	if log == nil {
		log = hclog.NewNullLogger()
	}
	return &Service{cfg: cfg, raft: r, fsm: f, log: log, conns: map[string]*grpc.ClientConn{}, stop: make(chan struct{})}
}

// Start follows the node's leadership notifications until Stop.
func (s *Service) Start(leaderNotify <-chan bool) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			select {
			case <-s.stop:
				s.stepDown()
				return
			case isLeader := <-leaderNotify:
				if isLeader {
					s.stepUp()
				} else {
					s.stepDown()
				}
			}
		}
	}()
	// Raft may have elected this node before Start was called.
	if s.raft.State() == raft.Leader {
		s.stepUp()
	}
}

// Stop ends leader work and closes forwarding connections.
func (s *Service) Stop() {
	s.stopOnce.Do(func() { close(s.stop) })
	s.wg.Wait()
	s.connMu.Lock()
	for _, c := range s.conns {
		c.Close()
	}
	s.conns = map[string]*grpc.ClientConn{}
	s.connMu.Unlock()
}

// clock stamps the leader's `now`: wall time, but never earlier than any
// time stamped before, nor than the last `now` the FSM applied (so it does
// not go backwards across a leader change either).
type clock struct {
	mu   sync.Mutex
	last int64
}

func (c *clock) now() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := time.Now().UnixNano()
	if t < c.last {
		t = c.last
	}
	c.last = t
	return t
}

func (c *clock) atLeast(t int64) {
	c.mu.Lock()
	if t > c.last {
		c.last = t
	}
	c.mu.Unlock()
}

const base62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// newLeaseID returns "ls_" and 24 random base62 characters (143 bits).
func newLeaseID() string {
	b := make([]byte, 3, 27)
	copy(b, "ls_")
	max := big.NewInt(62)
	for i := 0; i < 24; i++ {
		n, err := rand.Int(rand.Reader, max)
		if err != nil {
			panic("crypto/rand failed: " + err.Error())
		}
		b = append(b, base62[n.Int64()])
	}
	return string(b)
}

// leaderInfo returns the leader's id and gRPC address, when known.
func (s *Service) leaderInfo() (string, string) {
	_, id := s.raft.LeaderWithID()
	if id == "" {
		return "", ""
	}
	if string(id) == s.cfg.NodeID {
		return s.cfg.NodeID, s.cfg.GRPCAddress
	}
	for _, m := range s.fsm.Members() {
		if m.NodeID == string(id) {
			return m.NodeID, m.GRPCAddress
		}
	}
	if a := s.cfg.InitialGRPC[string(id)]; a != "" {
		return string(id), a
	}
	return string(id), ""
}

const forwardedKey = "grackle-forwarded"

// RaftIndexKey is the response header that carries a write's Raft index.
const RaftIndexKey = "grackle-raft-index"

// route decides where a call runs. It returns (nil, ls, nil) when this
// node is the leader and ready; a client for the leader when the call must
// be forwarded; or an Unavailable error.
func (s *Service) route(ctx context.Context) (*grpc.ClientConn, *leaderState, error) {
	if ls := s.leader.Load(); ls != nil {
		select {
		case <-ls.ready:
			return nil, ls, nil
		case <-ls.ctx.Done():
			return nil, nil, s.unavailable(ctx, apierr.NotLeader, "leadership lost")
		case <-ctx.Done():
			return nil, nil, s.unavailable(ctx, apierr.NotSent, "leader not ready yet (barrier pending)")
		}
	}
	if md, ok := metadata.FromIncomingContext(ctx); ok && len(md.Get(forwardedKey)) > 0 {
		// Never forward twice: the sender thought we lead; let it retry.
		return nil, nil, s.unavailable(ctx, apierr.NotLeader, "not the leader")
	}
	id, addr := s.leaderInfo()
	if id == "" || addr == "" || id == s.cfg.NodeID {
		return nil, nil, s.unavailable(ctx, apierr.NotLeader, "not the leader")
	}
	conn, err := s.conn(addr)
	if err != nil {
		return nil, nil, s.unavailable(ctx, apierr.NotSent, "cannot reach the leader: "+err.Error())
	}
	return conn, nil, nil
}

// forwardCtx marks an outgoing forwarded call.
func forwardCtx(ctx context.Context) context.Context {
	return metadata.AppendToOutgoingContext(ctx, forwardedKey, "1")
}

// conn returns a kept-open connection to a peer's gRPC address.
func (s *Service) conn(addr string) (*grpc.ClientConn, error) {
	s.connMu.Lock()
	defer s.connMu.Unlock()
	if c, ok := s.conns[addr]; ok {
		return c, nil
	}
	opts := append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithUnaryInterceptor(s.relay)}, apierr.DialOptions()...)
	c, err := grpc.NewClient(addr, append(opts, s.cfg.DialOptions...)...)
	if err != nil {
		return nil, err
	}
	s.conns[addr] = c
	return c, nil
}

// relay runs a forwarded call. The leader's response headers and
// trailers (the Raft index; the leader's address on Unavailable) are handed
// back to the original caller: ctx derives from this follower's incoming
// call, so SetHeader and SetTrailer reach it. The leader's errors pass on
// unchanged (with their ErrorInfo); a failure of the forwarding hop itself
// gets a reason here: NotSent when the request never reached the leader's
// connection, OutcomeUnknown when it broke after the request was written.
func (s *Service) relay(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	var hdr, trl metadata.MD
	err := invoker(ctx, method, req, reply, cc, append(opts, grpc.Header(&hdr), grpc.Trailer(&trl))...)
	if len(hdr) > 0 {
		_ = grpc.SetHeader(ctx, hdr)
	}
	if len(trl) > 0 {
		_ = grpc.SetTrailer(ctx, trl)
	}
	if err == nil {
		return nil
	}
	info := apierr.Info(err)
	switch {
	case info != nil && info.GetMetadata()[apierr.KeyNode] != "":
		return err // the leader's own answer
	case info.GetReason() == apierr.NotSent:
		return s.unavailable(ctx, apierr.NotSent, "cannot reach the leader: "+status.Convert(err).Message())
	case status.Code(err) == codes.Unavailable:
		return s.unavailable(ctx, apierr.OutcomeUnknown, "the connection to the leader failed after the request was sent: "+status.Convert(err).Message())
	}
	return err
}

// apply stamps and proposes one command on the leader and returns the
// FSM's result. The leader's queues observe every result.
func (s *Service) apply(ctx context.Context, ls *leaderState, cmd *fsmpb.Command) (*fsm.Result, error) {
	if err := ctx.Err(); err != nil {
		// Never propose for a caller that is gone (or a term that ended).
		return nil, s.notProposed(ctx, err)
	}
	cmd.Now = s.clock.now()
	data, err := fsm.Encode(cmd)
	if err != nil {
		return nil, err
	}
	timeout := s.cfg.ApplyTimeout
	if dl, ok := ctx.Deadline(); ok {
		if d := time.Until(dl); d < timeout {
			timeout = d
		}
	}
	if timeout <= 0 {
		return nil, s.notProposed(ctx, context.DeadlineExceeded)
	}
	f := s.raft.Apply(data, timeout)
	if err := f.Error(); err != nil {
		return nil, s.fromRaft(ctx, err)
	}
	res, _ := f.Response().(*fsm.Result)
	if res == nil {
		return nil, s.unavailable(ctx, apierr.OutcomeUnknown, "no result from the state machine")
	}
	if ls != nil {
		ls.q.observe(res)
		ls.kickExpiry()
	}
	// Like etcd's response header revision: the commit position of the
	// write, for clients that order events (benchmarks, checkers). A
	// forwarding follower relays it (see relay).
	_ = grpc.SetHeader(ctx, metadata.Pairs(RaftIndexKey, strconv.FormatUint(res.Index, 10)))
	return res, nil
}

// linearize makes a read linearizable. Reads run only on a leader that
// has passed its barrier (so everything committed in earlier terms is
// applied), and a write is acknowledged only after the leader's FSM applied
// it; so once VerifyLeader confirms with a quorum that no other leader has
// taken over, this node's FSM holds every write that completed before the
// read began. It returns the leader's `now` for the read.
func (s *Service) linearize(ctx context.Context) (int64, error) {
	if err := s.raft.VerifyLeader().Error(); err != nil {
		return 0, s.fromRaft(ctx, err)
	}
	return s.clock.now(), nil
}
