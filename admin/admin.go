// Package admin serves the operations side of ClusterService on a node:
// GetNodeInfo (this node about itself), GetClusterStatus made truthful (the
// answering node asks every member live, so a member it cannot reach shows
// as unreachable rather than "follower"), and SaveSnapshot (a consistent
// state machine snapshot streamed from the leader). The other
// ClusterService RPCs are the rpc package's, passed through unchanged.
package admin

import (
	"context"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"google.golang.org/grpc/codes"

	"github.com/grackle-coord/grackle/apierr"
	"github.com/grackle-coord/grackle/fsm"
	"github.com/grackle-coord/grackle/internal/peerconn"
	"github.com/grackle-coord/grackle/leader"
	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
	"github.com/grackle-coord/grackle/version"
)

// Config is what the service needs to know about its node.
type Config struct {
	NodeID string
	// InitialGRPC maps initial members' ids to their gRPC addresses (used
	// until the replicated member records know them).
	InitialGRPC map[string]string
	// Peers are the node's connections to the other members (shared; its
	// owner closes it). nil: plaintext connections of the service's own,
	// closed by Close.
	Peers *peerconn.Cache
	// ProbeTimeout bounds each member probe of GetClusterStatus.
	ProbeTimeout time.Duration
	// Skew reports this node's measured clock skew with the leader
	// (leader.Leader.Skew); nil: not reported.
	Skew func() leader.Skew
}

// Service implements pb.ClusterServiceServer around the rpc package's.
type Service struct {
	pb.ClusterServiceServer

	cfg   Config
	raft  *raft.Raft
	fsm   *fsm.FSM
	snaps raft.SnapshotStore
	log   hclog.Logger

	ownPeers bool // cfg.Peers made by New
}

// New wraps inner (the rpc package's ClusterService).
func New(cfg Config, inner pb.ClusterServiceServer, r *raft.Raft, f *fsm.FSM, snaps raft.SnapshotStore, log hclog.Logger) *Service {
	if cfg.ProbeTimeout <= 0 {
		cfg.ProbeTimeout = 750 * time.Millisecond
	}
	own := cfg.Peers == nil
	if own {
		cfg.Peers = peerconn.New()
	}
	if log == nil {
		log = hclog.NewNullLogger()
	}
	return &Service{ClusterServiceServer: inner, cfg: cfg, raft: r, fsm: f, snaps: snaps, log: log, ownPeers: own}
}

// Close closes the connections to other members, when they are the
// service's own.
func (s *Service) Close() {
	if s != nil && s.ownPeers {
		s.cfg.Peers.Close()
	}
}

func (s *Service) grpcAddr(id string) string {
	for _, m := range s.fsm.Members() {
		if m.NodeID == id && m.GRPCAddress != "" {
			return m.GRPCAddress
		}
	}
	return s.cfg.InitialGRPC[id]
}

// GetNodeInfo answers for this node only, from its own view.
func (s *Service) GetNodeInfo(context.Context, *pb.GetNodeInfoRequest) (*pb.GetNodeInfoResponse, error) {
	return s.selfInfo(), nil
}

func (s *Service) selfInfo() *pb.GetNodeInfoResponse {
	v := version.Get()
	st := s.raft.State()
	lc := int64(-1)
	if st == raft.Leader {
		lc = 0
	} else if t := s.raft.LastContact(); !t.IsZero() {
		lc = time.Since(t).Milliseconds()
	}
	_, leaderID := s.raft.LeaderWithID()
	out := &pb.GetNodeInfoResponse{NodeId: s.cfg.NodeID, Version: v.Version, Revision: v.Revision, GoVersion: v.GoVersion,
		RaftState: stateName(st), Term: s.raft.CurrentTerm(), CommitIndex: s.raft.CommitIndex(), AppliedIndex: s.fsm.AppliedIndex(),
		LastContactMs: lc, LeaderId: string(leaderID)}
	if s.cfg.Skew != nil {
		if sk := s.cfg.Skew(); !sk.At.IsZero() {
			ms := sk.Offset.Milliseconds()
			out.LeaderClockSkewMs = &ms
		}
	}
	return out
}

func stateName(st raft.RaftState) string {
	switch st {
	case raft.Leader:
		return "leader"
	case raft.Follower:
		return "follower"
	case raft.Candidate:
		return "candidate"
	}
	return "shutdown"
}

// GetClusterStatus is the rpc package's answer with every member probed
// live from here: reachability, version, applied index, raft state and
// (for a follower that answered) its time since it last heard from the
// leader. A member that does not answer within ProbeTimeout is
// "unreachable" (and its state too, rather than a guess).
func (s *Service) GetClusterStatus(ctx context.Context, r *pb.GetClusterStatusRequest) (*pb.GetClusterStatusResponse, error) {
	out, err := s.ClusterServiceServer.GetClusterStatus(ctx, r)
	if err != nil {
		return nil, err
	}
	if !r.GetProbeMembers() {
		for _, m := range out.Members {
			if m.NodeId == s.cfg.NodeID {
				fill(m, s.selfInfo(), "self")
			}
		}
		return out, nil
	}
	var wg sync.WaitGroup
	for _, m := range out.Members {
		if m.NodeId == s.cfg.NodeID {
			fill(m, s.selfInfo(), "self")
			continue
		}
		addr := m.GrpcAddress
		if addr == "" {
			addr = s.grpcAddr(m.NodeId)
		}
		wg.Add(1)
		go func(m *pb.Member, addr string) {
			defer wg.Done()
			info, err := s.probe(ctx, m.NodeId, addr)
			if err != nil || info.NodeId != m.NodeId {
				m.Reachability = "unreachable"
				m.State = "unreachable"
				m.LastContactMs = -1
				return
			}
			fill(m, info, "reachable")
		}(m, addr)
	}
	wg.Wait()
	return out, nil
}

func fill(m *pb.Member, info *pb.GetNodeInfoResponse, reach string) {
	m.Reachability = reach
	m.Version, m.Revision = info.Version, info.Revision
	m.AppliedIndex = info.AppliedIndex
	m.RaftState = info.RaftState
	if info.RaftState != "leader" {
		m.LastContactMs = info.LastContactMs
	}
}

func (s *Service) probe(ctx context.Context, id, addr string) (*pb.GetNodeInfoResponse, error) {
	if addr == "" {
		return nil, errNoAddress
	}
	c, err := s.cfg.Peers.Get(id, addr)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(peerconn.OnBehalf(ctx), s.cfg.ProbeTimeout)
	defer cancel()
	return pb.NewClusterServiceClient(c).GetNodeInfo(ctx, &pb.GetNodeInfoRequest{})
}

var errNoAddress = apierr.New(codes.Unavailable, apierr.NotSent, "", apierr.Leader{}, "no gRPC address known")
