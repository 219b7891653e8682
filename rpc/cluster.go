package rpc

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grackle-coord/grackle/apierr"
	"github.com/grackle-coord/grackle/fsm"
	"github.com/grackle-coord/grackle/leader"
	fsmpb "github.com/grackle-coord/grackle/proto/grackle/fsm/v1"
	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
)

// GetClusterStatus answers from this node's own view (no forwarding), so
// an operator can ask any node, even one cut off from the leader.
func (s *Service) GetClusterStatus(ctx context.Context, _ *pb.GetClusterStatusRequest) (*pb.GetClusterStatusResponse, error) {
	id, addr := s.leaderInfo()
	stats := s.raft.Stats()
	term, _ := strconv.ParseUint(stats["term"], 10, 64)
	members, err := s.members()
	if err != nil {
		return nil, err
	}
	return &pb.GetClusterStatusResponse{LeaderId: id, LeaderAddress: addr, Term: term,
		CommitIndex: s.raft.CommitIndex(), AppliedIndex: s.fsm.AppliedIndex(), Members: members}, nil
}

func (s *Service) members() ([]*pb.Member, error) {
	cf := s.raft.GetConfiguration()
	if err := cf.Error(); err != nil {
		return nil, apierr.New(codes.Unavailable, apierr.OutcomeUnknown, s.cfg.NodeID, apierr.Leader{}, fmt.Sprintf("raft configuration: %v", err))
	}
	grpcOf := map[string]string{}
	for id, a := range s.cfg.InitialGRPC {
		grpcOf[id] = a
	}
	for _, m := range s.fsm.Members() {
		grpcOf[m.NodeID] = m.GRPCAddress
	}
	_, leaderID := s.raft.LeaderWithID()
	isLeader := s.raft.State() == raft.Leader
	var out []*pb.Member
	for _, srv := range cf.Configuration().Servers {
		m := &pb.Member{NodeId: string(srv.ID), RaftAddress: string(srv.Address), GrpcAddress: grpcOf[string(srv.ID)],
			Suffrage: "voter", State: "follower", LastContactMs: -1}
		if srv.Suffrage != raft.Voter {
			m.Suffrage = "nonvoter"
		}
		if srv.ID == leaderID {
			m.State = "leader"
			m.LastContactMs = 0
		} else if leaderID == "" {
			m.State = "unknown"
		}
		// A follower knows its own contact time; the leader knows each
		// peer's last answered AppendEntries (leader.Reach's source).
		// Others stay -1.
		if string(srv.ID) == s.cfg.NodeID && !isLeader {
			if lc := s.raft.LastContact(); !lc.IsZero() {
				m.LastContactMs = time.Since(lc).Milliseconds()
			}
		} else if isLeader && string(srv.ID) != s.cfg.NodeID {
			if lc := s.lead.LastContact(srv); !lc.IsZero() {
				m.LastContactMs = time.Since(lc).Milliseconds()
			}
		}
		out = append(out, m)
	}
	return out, nil
}

// AddMember adds a node to the Raft configuration (through the leader) and
// replicates its gRPC address. A voter joins as a nonvoter: the leader
// promotes it once it has caught up (leader/promote.go), so the call
// returns at once with the member listed as "nonvoter". Before anything
// reaches Raft, a voter is refused (FailedPrecondition) when the cluster
// could not keep a reachable quorum should the newcomer never answer.
func (s *Service) AddMember(ctx context.Context, r *pb.AddMemberRequest) (*pb.AddMemberResponse, error) {
	if err := checkAddMember(r); err != nil {
		return nil, err
	}
	if err := s.checkOpenJoin(ctx, r); err != nil {
		return nil, err
	}
	return serve(s, ctx, clusterRPC(r, pb.ClusterServiceClient.AddMember), func(t *leader.Term) (*pb.AddMemberResponse, error) {
		reach, err := s.lead.Reach()
		if err != nil {
			return nil, err
		}
		if srv, exists, err := s.existingMember(reach, r); err != nil {
			return nil, err
		} else if exists {
			// A join retried: make sure the member record is there (a first
			// attempt may have ended between the two steps), and that a
			// nonvoter asked again to vote will be promoted. Never demotes.
			if err := s.setMemberRecord(ctx, t, r, r.Voter && srv.Suffrage != raft.Voter); err != nil {
				return nil, err
			}
			ms, err := s.members()
			return &pb.AddMemberResponse{Members: ms}, err
		}
		if err := s.raftAddressFree(reach, r); err != nil {
			return nil, err
		}
		if err := reach.CheckAddNonvoter(r.NodeId, s.maxNonvoters()); err != nil {
			return nil, err
		}
		if r.Voter {
			if err := reach.CheckAddVoter(r.NodeId); err != nil {
				return nil, err
			}
		}
		// prevIndex: raft refuses the change if the configuration changed
		// since the check above.
		if err := s.raft.AddNonvoter(raft.ServerID(r.NodeId), raft.ServerAddress(r.RaftAddress), reach.Index, 30*time.Second).Error(); err != nil {
			return nil, leader.RaftError(err)
		}
		if err := s.setMemberRecord(ctx, t, r, r.Voter); err != nil {
			return nil, err
		}
		ms, err := s.members()
		return &pb.AddMemberResponse{Members: ms}, err
	})
}

// setMemberRecord replicates the member's addresses and whether it is to
// vote, unless the record already says so (voter stays set once set).
func (s *Service) setMemberRecord(ctx context.Context, t *leader.Term, r *pb.AddMemberRequest, voter bool) error {
	for _, m := range s.fsm.Members() {
		if m.NodeID == r.NodeId {
			if m.RaftAddress == r.RaftAddress && m.GRPCAddress == r.GrpcAddress && (m.Voter || !voter) {
				return nil
			}
			voter = voter || m.Voter
		}
	}
	res, err := t.Write(ctx, &fsmpb.Command{Op: &fsmpb.Command_SetMember{SetMember: &fsmpb.SetMember{
		NodeId: r.NodeId, RaftAddress: r.RaftAddress, GrpcAddress: r.GrpcAddress, Voter: voter}}})
	_, err = applied(ctx, res, err, func(*fsm.Result) struct{} { return struct{}{} })
	return err
}

// RemoveMember removes a node from the Raft configuration. Removing a
// voter is refused (FailedPrecondition) when the voters left would not
// have a reachable quorum.
func (s *Service) RemoveMember(ctx context.Context, r *pb.RemoveMemberRequest) (*pb.RemoveMemberResponse, error) {
	if err := firstInvalid(fsm.ValidateName("node_id", r.NodeId)); err != nil {
		return nil, err
	}
	return serve(s, ctx, clusterRPC(r, pb.ClusterServiceClient.RemoveMember), func(t *leader.Term) (*pb.RemoveMemberResponse, error) {
		reach, err := s.lead.Reach()
		if err != nil {
			return nil, err
		}
		found := false
		for _, srv := range reach.Servers {
			found = found || string(srv.ID) == r.NodeId
		}
		if !found {
			return nil, apierr.New(codes.NotFound, apierr.MemberNotFound, s.cfg.NodeID, apierr.Leader{}, fmt.Sprintf("node_id: %q is not a member", r.NodeId))
		}
		if err := reach.CheckRemove(r.NodeId); err != nil {
			return nil, err
		}
		if err := s.raft.RemoveServer(raft.ServerID(r.NodeId), reach.Index, 30*time.Second).Error(); err != nil {
			return nil, leader.RaftError(err)
		}
		if r.NodeId != s.cfg.NodeID {
			if _, err := t.Write(ctx, &fsmpb.Command{Op: &fsmpb.Command_RemoveMember{RemoveMember: &fsmpb.RemoveMember{NodeId: r.NodeId}}}); err != nil {
				return nil, err
			}
		}
		ms, err := s.members()
		return &pb.RemoveMemberResponse{Members: ms}, err
	})
}

// TransferLeadership hands leadership to node_id (empty: any up-to-date
// voter) and reports the new leader.
func (s *Service) TransferLeadership(ctx context.Context, r *pb.TransferLeadershipRequest) (*pb.TransferLeadershipResponse, error) {
	if r.NodeId != "" {
		if err := firstInvalid(fsm.ValidateName("node_id", r.NodeId)); err != nil {
			return nil, err
		}
	}
	return serve(s, ctx, clusterRPC(r, pb.ClusterServiceClient.TransferLeadership), func(t *leader.Term) (*pb.TransferLeadershipResponse, error) {
		var addr raft.ServerAddress
		if r.NodeId != "" {
			if cf := s.raft.GetConfiguration(); cf.Error() == nil {
				for _, srv := range cf.Configuration().Servers {
					if string(srv.ID) == r.NodeId {
						addr = srv.Address
					}
				}
			}
			if addr == "" {
				return nil, apierr.New(codes.NotFound, apierr.MemberNotFound, s.cfg.NodeID, apierr.Leader{}, fmt.Sprintf("node_id: %q is not a member", r.NodeId))
			}
		}
		now := time.Now()
		if err := transferAllowed(t.Began(), now); err != nil {
			return nil, err
		}
		done, err := s.transfers.begin(now)
		if err != nil {
			return nil, err
		}
		defer done()
		var f raft.Future
		if r.NodeId == "" {
			f = s.raft.LeadershipTransfer()
		} else {
			f = s.raft.LeadershipTransferToServer(raft.ServerID(r.NodeId), addr)
		}
		if err := f.Error(); err != nil {
			return nil, status.Errorf(codes.FailedPrecondition, "leadership transfer failed: %v", err)
		}
		// Wait (bounded by the caller's deadline) until a leader is known.
		for {
			if _, id := s.raft.LeaderWithID(); id != "" {
				return &pb.TransferLeadershipResponse{LeaderId: string(id)}, nil
			}
			select {
			case <-ctx.Done():
				return nil, status.Error(codes.DeadlineExceeded, "no leader elected before the deadline")
			case <-time.After(10 * time.Millisecond):
			}
		}
	})
}

func (s *Service) maxNonvoters() int {
	switch n := s.cfg.MaxNonvoters; {
	case n == 0:
		return leader.DefaultMaxNonvoters
	case n < 0:
		return 0
	default:
		return n
	}
}
