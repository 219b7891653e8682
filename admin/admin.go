// Package admin serves the operations side of ClusterService on a node:
// GetNodeInfo (this node about itself), GetClusterStatus made truthful
// (every member's health from the node's memberhealth monitor, so a member
// it cannot reach shows as unreachable rather than "follower"), the peer
// Probe that monitor asks the other members, and SaveSnapshot (a
// consistent state machine snapshot streamed from the leader). The other
// ClusterService RPCs are the rpc package's, passed through unchanged.
package admin

import (
	"context"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/grackle-coord/grackle/fsm"
	"github.com/grackle-coord/grackle/internal/peerconn"
	"github.com/grackle-coord/grackle/leader"
	"github.com/grackle-coord/grackle/memberhealth"
	peerpb "github.com/grackle-coord/grackle/proto/grackle/peer/v1"
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
	// owner closes it), for relaying SaveSnapshot to the leader. nil:
	// plaintext connections of the service's own, closed by Close.
	Peers *peerconn.Cache
	// Health is the node's view of its members (nil: every member's
	// health is left unknown).
	Health *memberhealth.Monitor
	// FirstRoundWait bounds how long a GetClusterStatus with
	// probe_members waits for the monitor's first round of probes (the
	// probe timeout and a little more; default 1 s).
	FirstRoundWait time.Duration
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
	if cfg.FirstRoundWait <= 0 {
		cfg.FirstRoundWait = time.Second
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

// Probe answers another member's health probe (peer service): this
// node's own view of itself, what its /metrics shows too.
func (s *Service) Probe(context.Context, *peerpb.ProbeRequest) (*peerpb.ProbeResponse, error) {
	return s.SelfProbe(), nil
}

// SelfProbe is this node's answer to a probe.
func (s *Service) SelfProbe() *peerpb.ProbeResponse {
	i := s.selfInfo()
	return &peerpb.ProbeResponse{NodeId: i.NodeId, RaftState: i.RaftState, Term: i.Term, AppliedIndex: i.AppliedIndex,
		LastContactMs: i.LastContactMs, Version: i.Version, Revision: i.Revision}
}

// GetClusterStatus is the rpc package's answer with every member's health
// from the node's monitor (its latest probes, and its Raft record while it
// leads): reachability, version, applied index, raft state, for a
// follower that answers its own time since it last heard from the leader,
// and the leader's view of replication. A member the probes get no
// answer from is "unreachable" (its state too, rather than a guess). The
// call never waits on a member: with probe_members it waits only, on a
// node just started, for the first round of probes to end.
func (s *Service) GetClusterStatus(ctx context.Context, r *pb.GetClusterStatusRequest) (*pb.GetClusterStatusResponse, error) {
	out, err := s.ClusterServiceServer.GetClusterStatus(ctx, r)
	if err != nil {
		return nil, err
	}
	if s.cfg.Health == nil {
		return out, nil
	}
	if r.GetProbeMembers() {
		wait, cancel := context.WithTimeout(ctx, s.cfg.FirstRoundWait)
		select {
		case <-s.cfg.Health.FirstRound():
		case <-wait.Done():
		}
		cancel()
	}
	fillHealth(out.Members, s.cfg.Health.View())
	return out, nil
}

// fillHealth sets the health fields of members from v (members v does not
// know are left as they are).
func fillHealth(members []*pb.Member, v memberhealth.View) {
	for _, m := range members {
		st, ok := v.Member(m.NodeId)
		if !ok {
			continue
		}
		m.Reachability = string(st.Reachability)
		switch st.Reachability {
		case memberhealth.Unreachable:
			m.State = "unreachable"
		case memberhealth.Self, memberhealth.Reachable:
			if a := st.Answer; a != nil {
				m.Version, m.Revision = a.Version, a.Revision
				m.AppliedIndex = a.AppliedIndex
				m.RaftState = a.RaftState
				if a.RaftState != "leader" {
					m.LastContactMs = a.LastContactMs
				}
			}
		}
		if !st.LastSeen.IsZero() {
			ms := v.At.Sub(st.LastSeen).Milliseconds()
			m.LastSeenMs = &ms
		}
		if rep := st.Replication; rep != nil {
			ms, lag := v.At.Sub(rep.LastContact).Milliseconds(), rep.Lag
			m.ReplicationContactMs, m.ReplicationLagEntries = &ms, &lag
		}
	}
}
