package watch

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/grackle-coord/grackle/apierr"
	"github.com/grackle-coord/grackle/fsm"
	"github.com/grackle-coord/grackle/internal/peerconn"
	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
)

// Defaults of Config.
const (
	DefaultMaxWatchers  = 10_000
	DefaultStallTimeout = 10 * time.Second
	// MaxListed bounds the holders and the waiters of one watch message.
	MaxListed = 1000
)

// QueuedWaiter is one call in a semaphore's queue, as the leader keeps it.
type QueuedWaiter struct {
	// Seq orders the queue: unique and increasing within one leader's term.
	Seq      uint64
	LeaseID  string
	Weight   int64
	Since    int64 // Unix ns, when the call reached the leader
	Deadline int64 // Unix ns, when it gives up
	// A lock waiter's mode, and whether it upgrades a shared hold.
	Exclusive, Upgrade bool
}

// Queues is the leader's read-only view of its waiter queues.
type Queues interface {
	// Waiters copies a semaphore's queue, head first.
	Waiters(ns, sem string) []QueuedWaiter
	// LockWaiters copies the calls waiting on one lock, in queue order.
	LockWaiters(ns, lock string) []QueuedWaiter
}

// Config configures the service.
type Config struct {
	NodeID string
	// MaxWatchers bounds the streams one node serves (default 10,000).
	MaxWatchers int
	// MaxWatchersPerConnection and MaxWatchersPerClient bound the streams
	// of one connection and of one client (its token, or without one its
	// network address) on this node (default 1,000 each), so that one
	// client cannot take them all.
	MaxWatchersPerConnection, MaxWatchersPerClient int
	// StallTimeout cuts off a watcher whose stream has not taken a message
	// for that long (default 10 s): ResourceExhausted.
	StallTimeout time.Duration
	// Queues returns the leader's queues in the current term (nil when
	// this node does not lead, or when the queues cannot be read).
	Queues func() Queues
	// Peers are the node's connections to the other members, used to
	// reach the leader when a follower forwards (shared; its owner closes
	// it). nil: plaintext connections of the service's own, closed by Close.
	Peers *peerconn.Cache
	// Authorize, when set (access control on), decides each call this
	// node serves as the leader, once its term is ready (every committed
	// entry applied, so every token the log holds is known). A follower
	// relays the call without deciding: its state may lag the log.
	Authorize func(context.Context) error
	// Now is the leader clock (leader.Leader.Now, Unix ns): the `now` at
	// which holders' expiry is judged, the time base of the waiters'
	// waiting_since (nil: the wall clock).
	Now func() int64
}

// Service serves WatchSemaphore and ListSemaphoreWaiters. It implements
// only these two methods of pb.GrackleServiceServer: the node's server
// combines it with the rest of the API.
type Service struct {
	cfg  Config
	fsm  *fsm.FSM
	feed *Feed
	lead *Leadership
	log  hclog.Logger

	ownPeers bool // cfg.Peers made by New
	shares   shares
}

// New creates the service.
func New(cfg Config, f *fsm.FSM, feed *Feed, lead *Leadership, log hclog.Logger) *Service {
	if cfg.MaxWatchers <= 0 {
		cfg.MaxWatchers = DefaultMaxWatchers
	}
	if cfg.MaxWatchersPerConnection <= 0 {
		cfg.MaxWatchersPerConnection = DefaultMaxWatchersPerConnection
	}
	if cfg.MaxWatchersPerClient <= 0 {
		cfg.MaxWatchersPerClient = DefaultMaxWatchersPerClient
	}
	if cfg.StallTimeout <= 0 {
		cfg.StallTimeout = DefaultStallTimeout
	}
	if log == nil {
		log = hclog.NewNullLogger()
	}
	if cfg.Now == nil {
		cfg.Now = func() int64 { return time.Now().UnixNano() }
	}
	own := cfg.Peers == nil
	if own {
		cfg.Peers = peerconn.New()
	}
	return &Service{cfg: cfg, fsm: f, feed: feed, lead: lead, log: log, ownPeers: own}
}

// Close closes the connections used to forward, when they are the
// service's own.
func (s *Service) Close() {
	if s.ownPeers {
		s.cfg.Peers.Close()
	}
}

// ---- errors ----

// LeaderAddressKey is the trailer that names the leader on Unavailable
// (the same key as the rest of the API).
const LeaderAddressKey = "grackle-leader-address"

// unavailable is the retryable "not here" error of the error contract
// (apierr.NotLeader: nothing was written), naming the leader when known
// (ErrorInfo metadata, message, and trailer) as every call of the API does.
func (s *Service) unavailable(ctx context.Context, why, id, addr string) error {
	msg := fmt.Sprintf("node %s: %s", s.cfg.NodeID, why)
	if addr != "" {
		msg += fmt.Sprintf("; the leader is %s at %s", id, addr)
		_ = grpc.SetTrailer(ctx, metadata.Pairs(LeaderAddressKey, addr))
	} else {
		msg += "; no leader is known right now"
	}
	return apierr.New(codes.Unavailable, apierr.NotLeader, s.cfg.NodeID, apierr.Leader{ID: id, Address: addr}, msg)
}

// elsewhere is unavailable naming the leader this node knows of (never
// itself).
func (s *Service) elsewhere(ctx context.Context, why string) error {
	id, addr := s.lead.Leader()
	if id == s.cfg.NodeID {
		id, addr = "", ""
	}
	return s.unavailable(ctx, why, id, addr)
}

func (s *Service) notLeader(ctx context.Context) error { return s.elsewhere(ctx, "not the leader") }

func statusOf(err error) error {
	var fe *fsm.Error
	if errors.As(err, &fe) {
		c := codes.Internal
		switch fe.Code {
		case fsm.CodeInvalidArgument:
			c = codes.InvalidArgument
		case fsm.CodeNotFound:
			c = codes.NotFound
		}
		st := status.New(c, fe.Msg)
		if fe.Reason != "" {
			st = apierr.WithMetadata(st, fe.Reason, fe.Meta)
		}
		return apierr.WithField(st, fe.Field, "").Err()
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	return status.FromContextError(err).Err()
}

func validate(ns, sem string) error {
	for _, e := range []error{fsm.ValidateName("namespace_name", ns), fsm.ValidateName("semaphore_name", sem)} {
		if e != nil {
			return statusOf(e)
		}
	}
	return nil
}

// ---- forwarding ----

// leaderConn returns a connection to the leader for forwarding and the
// leader it goes to, or the Unavailable error to answer.
func (s *Service) leaderConn(ctx context.Context) (*grpc.ClientConn, apierr.Leader, error) {
	if peerconn.Forwarded(ctx) {
		return nil, apierr.Leader{}, s.notLeader(ctx) // never forward twice
	}
	id, addr := s.lead.Leader()
	if id == "" || addr == "" || id == s.cfg.NodeID {
		return nil, apierr.Leader{}, s.notLeader(ctx)
	}
	l := apierr.Leader{ID: id, Address: addr}
	c, err := s.cfg.Peers.Get(id, addr)
	if err != nil {
		return nil, l, apierr.New(codes.Unavailable, apierr.NotSent, s.cfg.NodeID, l,
			fmt.Sprintf("node %s: could not reach the leader %s at %s: %v", s.cfg.NodeID, id, addr, err))
	}
	return c, l, nil
}

// relayed is a relay's error as this node answers it (apierr.Relayed),
// with the leader-address trailer when the hop failed.
func (s *Service) relayed(ctx context.Context, err error, l apierr.Leader) error {
	out := apierr.Relayed(err, s.cfg.NodeID, l)
	if out != err {
		_ = grpc.SetTrailer(ctx, metadata.Pairs(LeaderAddressKey, l.Address))
	}
	return out
}

// relayTrailer passes the leader's trailer (its leader address) on.
func relayTrailer(ctx context.Context, tr metadata.MD) {
	if len(tr) > 0 {
		_ = grpc.SetTrailer(ctx, tr)
	}
}

// ---- ListSemaphoreWaiters ----

// ListSemaphoreWaiters pages through a semaphore's queue on the leader.
func (s *Service) ListSemaphoreWaiters(ctx context.Context, r *pb.ListSemaphoreWaitersRequest) (*pb.ListSemaphoreWaitersResponse, error) {
	if err := validate(r.NamespaceName, r.SemaphoreName); err != nil {
		return nil, err
	}
	return listWaiters(s, ctx, r.Limit, r.PaginationToken,
		func(ctx context.Context, cc grpc.ClientConnInterface, o ...grpc.CallOption) (*pb.ListSemaphoreWaitersResponse, error) {
			return pb.NewGrackleServiceClient(cc).ListSemaphoreWaiters(ctx, r, o...)
		},
		func(now int64) error {
			// The semaphore must exist (as every List answers NotFound otherwise).
			_, _, _, err := s.fsm.SemaphoreView(r.NamespaceName, r.SemaphoreName, now, 0)
			return err
		},
		func(q Queues) []QueuedWaiter { return q.Waiters(r.NamespaceName, r.SemaphoreName) },
		func(page []QueuedWaiter, from int, next, prev string) *pb.ListSemaphoreWaitersResponse {
			return &pb.ListSemaphoreWaitersResponse{Waiters: s.describe(r.NamespaceName, r.SemaphoreName, page, from),
				NextPaginationToken: next, PreviousPaginationToken: prev}
		})
}

// listWaiters serves one page of a queue (a semaphore's or a lock's): on a
// follower, relayed to the leader; on the leader, once its term is ready
// and the caller authorized, the queue read by waiters (after exists has
// checked the object) cut to the page the token and limit ask for.
func listWaiters[Resp any](s *Service, ctx context.Context, limit32 int32, token string,
	relay func(context.Context, grpc.ClientConnInterface, ...grpc.CallOption) (Resp, error),
	exists func(now int64) error, waiters func(Queues) []QueuedWaiter,
	build func(page []QueuedWaiter, from int, next, prev string) Resp) (Resp, error) {
	var zero Resp
	limit, err := fsm.ValidateLimit(limit32)
	if err != nil {
		return zero, statusOf(err)
	}
	cur, err := decodeToken(token)
	if err != nil {
		return zero, err
	}
	term := s.lead.Current()
	if term == nil {
		cc, l, err := s.leaderConn(ctx)
		if err != nil {
			return zero, err
		}
		var tr metadata.MD
		out, err := relay(peerconn.Forward(ctx), cc, grpc.Trailer(&tr))
		relayTrailer(ctx, tr)
		return out, s.relayed(ctx, err, l)
	}
	if err := term.Ready(ctx); err != nil {
		return zero, s.notReady(ctx, err)
	}
	if err := s.authorize(ctx); err != nil {
		return zero, err
	}
	if err := exists(s.cfg.Now()); err != nil {
		return zero, statusOf(err)
	}
	q, err := s.queues(ctx)
	if err != nil {
		return zero, err
	}
	all := waiters(q)
	from, to := pageBounds(all, cur, limit)
	var next, prev string
	if to < len(all) {
		next = encodeToken(false, all[to-1].Seq)
	}
	if from > 0 {
		prev = encodeToken(true, all[from].Seq)
	}
	return build(all[from:to], from, next, prev), nil
}

// authorize applies Config.Authorize, if any.
func (s *Service) authorize(ctx context.Context) error {
	if s.cfg.Authorize == nil {
		return nil
	}
	return s.cfg.Authorize(ctx)
}

func (s *Service) notReady(ctx context.Context, err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return status.FromContextError(err).Err()
	}
	return s.notLeader(ctx)
}

// queues returns the current term's queues, or the error to answer: a
// node between terms has none (the new leader's are elsewhere).
func (s *Service) queues(ctx context.Context) (Queues, error) {
	var q Queues
	if s.cfg.Queues != nil {
		q = s.cfg.Queues()
	}
	if q == nil {
		return nil, s.elsewhere(ctx, "leadership changed: this node holds no waiter queue now")
	}
	return q, nil
}

// describe turns queue entries (starting at queue offset from) into API
// waiters: process id and the part of the weight still waited for come
// from the state machine.
func (s *Service) describe(ns, sem string, ws []QueuedWaiter, from int) []*pb.SemaphoreWaiter {
	if len(ws) == 0 {
		return nil
	}
	ids := make([]string, len(ws))
	for i, w := range ws {
		ids[i] = w.LeaseID
	}
	procs, held := s.fsm.LeaseHoldings(ns, sem, ids)
	out := make([]*pb.SemaphoreWaiter, len(ws))
	for i, w := range ws {
		wait := w.Weight - held[i]
		if wait < 0 {
			wait = 0
		}
		out[i] = &pb.SemaphoreWaiter{LeaseId: w.LeaseID, ProcessId: procs[i], Weight: w.Weight, WaitingWeight: wait,
			Position: int64(from + i + 1), WaitingSince: w.Since, Deadline: w.Deadline}
	}
	return out
}

// cursor is a decoded pagination token: a queue sequence number; a forward
// page starts after it, a backward page ends before it.
type cursor struct {
	set      bool
	backward bool
	seq      uint64
}

const tokenKind = "wait"

func encodeToken(backward bool, seq uint64) string {
	dir := "f"
	if backward {
		dir = "b"
	}
	return base64.RawURLEncoding.EncodeToString([]byte(tokenKind + ":" + dir + ":" + strconv.FormatUint(seq, 10)))
}

func decodeToken(tok string) (cursor, error) {
	if tok == "" {
		return cursor{}, nil
	}
	bad := status.Error(codes.InvalidArgument, "pagination_token: malformed or from another list")
	raw, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil {
		return cursor{}, bad
	}
	parts := strings.Split(string(raw), ":")
	if len(parts) != 3 || parts[0] != tokenKind || (parts[1] != "f" && parts[1] != "b") {
		return cursor{}, bad
	}
	seq, err := strconv.ParseUint(parts[2], 10, 64)
	if err != nil {
		return cursor{}, bad
	}
	return cursor{set: true, backward: parts[1] == "b", seq: seq}, nil
}

// pageBounds picks the page [from, to) of a queue for a cursor. Tokens
// are positions (a waiter's sequence number), not snapshots: waiters that
// left move the rest up, as holders' pages do.
//
// A lock's queue is not in sequence order when an upgrade waits at its head
// (it arrived later): a cursor whose waiter is still queued is found by
// its place, so no waiter is listed twice or skipped; only a cursor whose
// waiter left falls back to comparing sequence numbers.
func pageBounds(all []QueuedWaiter, c cursor, limit int) (from, to int) {
	at := -1
	if c.set {
		for i, w := range all {
			if w.Seq == c.seq {
				at = i
				break
			}
		}
	}
	switch {
	case !c.set:
		from = 0
	case at >= 0 && !c.backward:
		from = at + 1
	case at >= 0:
		from = max(at-limit, 0)
		return from, at
	case !c.backward:
		from = len(all)
		for i, w := range all {
			if w.Seq > c.seq {
				from = i
				break
			}
		}
	default:
		end := 0
		for i, w := range all {
			if w.Seq < c.seq {
				end = i + 1
			}
		}
		from = end - limit
		if from < 0 {
			from = 0
		}
		return from, end
	}
	to = from + limit
	if to > len(all) {
		to = len(all)
	}
	return from, to
}
