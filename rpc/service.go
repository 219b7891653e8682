// Package rpc is Grackle's gRPC API on one node, a thin adapter: every
// handler validates its request, then runs the call on the leader's term
// (package leader) or forwards it to the leader (forward.go), and converts
// the outcome into a response or a status with the error contract of
// package apierr. State changes only through Raft, in package leader.
package rpc

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/grackle-coord/grackle/fsm"
	"github.com/grackle-coord/grackle/internal/peerconn"
	"github.com/grackle-coord/grackle/internal/rounds"
	"github.com/grackle-coord/grackle/leader"
	peerpb "github.com/grackle-coord/grackle/proto/grackle/peer/v1"
	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
)

// Config is what the API layer needs to know about its node.
type Config struct {
	// ACL: access control is on (--acl). Bootstrap is refused without it.
	ACL bool
	// Insecure (--insecure): without access control, AddMember still adds
	// a node beyond loopback (checkOpenJoin refuses it otherwise).
	Insecure    bool
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
	// MaxWaiters bounds the queued waiters per semaphore and per lock,
	// MaxWaitersPerProcess one process's share of such a queue.
	MaxWaiters, MaxWaitersPerProcess int
	// Contacts is the node's record of each peer's last answered
	// AppendEntries (raftnode.Contacts): the membership checks' source of
	// reachability and catch-up. ReachableWithin, PromoteAfter: see
	// leader.Config.
	Contacts        leader.PeerContacts
	ReachableWithin time.Duration
	PromoteAfter    time.Duration
	// MaxNonvoters bounds the nonvoters AddMember may add (0:
	// leader.DefaultMaxNonvoters; negative: no bound).
	MaxNonvoters int
	// MaxQueuedProposals bounds the writes waiting on the leader to be
	// proposed (0: leader.DefaultMaxQueued).
	MaxQueuedProposals int
	// PackHold and PackHoldIdle: how long the leader holds writes for the
	// callers of the entry that just committed (leader.ProposerConfig).
	PackHold, PackHoldIdle time.Duration
	// Clock is the leader clock's source (nil: the system clocks).
	Clock leader.Source
	// Observer receives the leader's waiter and expiry events (nil: none).
	Observer leader.Observer
	// Peers are the node's connections to the other members, used to
	// forward to the leader (shared; its owner closes it). nil: plaintext
	// connections of the service's own, closed by Stop.
	Peers *peerconn.Cache
	// Authorize, when set (access control on), decides each call this
	// node serves as the leader, once the leader has applied every
	// committed entry (so a committed revoke is always seen).
	Authorize func(context.Context) error
}

// Service implements pb.GrackleServiceServer, pb.ClusterServiceServer,
// pb.ACLServiceServer and peerpb.PeerServiceServer.
type Service struct {
	pb.UnimplementedGrackleServiceServer
	pb.UnimplementedClusterServiceServer
	pb.UnimplementedACLServiceServer
	peerpb.UnimplementedPeerServiceServer

	cfg  Config
	raft *raft.Raft
	fsm  *fsm.FSM
	log  hclog.Logger
	lead *leader.Leader
	fwd  forwarding
	// readIndexes shares read-index requests among this follower's
	// concurrent reads (followerread.go).
	readIndexes   *rounds.Group[readIndex]
	followerReads atomic.Uint64 // reads this node served as a follower

	transfers transferGate // one leadership transfer at a time, rate-limited
}

// New creates the service. Call Start to follow leadership changes.
func New(cfg Config, r *raft.Raft, f *fsm.FSM, log hclog.Logger) *Service {
	if cfg.MaxTimeoutSeconds <= 0 {
		cfg.MaxTimeoutSeconds = 300
	}
	if cfg.Limits == (fsm.Limits{}) {
		cfg.Limits = fsm.DefaultLimits()
	}
	if log == nil {
		log = hclog.NewNullLogger()
	}
	s := &Service{cfg: cfg, raft: r, fsm: f, log: log}
	s.lead = leader.New(leader.Config{
		NodeID: cfg.NodeID, GRPCAddress: cfg.GRPCAddress, InitialGRPC: cfg.InitialGRPC, Limits: cfg.Limits,
		LeaseGrace: cfg.LeaseGrace, ApplyTimeout: cfg.ApplyTimeout, ExpireBatch: cfg.ExpireBatch, MaxWaiters: cfg.MaxWaiters, MaxWaitersPerProcess: cfg.MaxWaitersPerProcess,
		MaxQueuedProposals: cfg.MaxQueuedProposals, PackHold: cfg.PackHold, PackHoldIdle: cfg.PackHoldIdle, Clock: cfg.Clock, Observer: cfg.Observer, Log: log.Named("leader"),
		Contacts: cfg.Contacts, ReachableWithin: cfg.ReachableWithin, PromoteAfter: cfg.PromoteAfter,
	}, r, f)
	s.fwd = newForwarder(cfg.NodeID, s.leaderInfo, cfg.Peers)
	s.readIndexes = rounds.New(func(int) (readIndex, error) { return s.askReadIndex() })
	return s
}

// Start follows the node's leadership notifications until Stop.
func (s *Service) Start(leaderNotify <-chan bool) { s.lead.Start(leaderNotify) }

// Stop ends leader work (joining every goroutine of it) and closes
// forwarding connections.
func (s *Service) Stop() {
	s.lead.Stop()
	s.fwd.close()
}

// FollowerReads counts the reads this node served from its own state as
// a follower (followerread.go).
func (s *Service) FollowerReads() uint64 { return s.followerReads.Load() }

// Leader is this node's leader side: its current term (nil unless it
// leads) gives the waiter queues' snapshots and counts, its Skew the
// measured clock skew with the leader.
func (s *Service) Leader() *leader.Leader { return s.lead }

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
