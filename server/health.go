package server

import (
	"context"

	"github.com/hashicorp/raft"

	"github.com/grackle-coord/grackle/admin"
	"github.com/grackle-coord/grackle/fsm"
	"github.com/grackle-coord/grackle/memberhealth"
	peerpb "github.com/grackle-coord/grackle/proto/grackle/peer/v1"
	"github.com/grackle-coord/grackle/rpc"
)

// healthMembers lists the members the health monitor probes: the latest
// Raft configuration, each with its gRPC address (its replicated record,
// else its --initial-members entry).
func healthMembers(r *raft.Raft, f *fsm.FSM, initialGRPC map[string]string) func() ([]memberhealth.Member, error) {
	return func() ([]memberhealth.Member, error) {
		cf := r.GetConfiguration()
		if err := cf.Error(); err != nil {
			return nil, err
		}
		grpcOf := map[string]string{}
		for id, a := range initialGRPC {
			grpcOf[id] = a
		}
		for _, m := range f.Members() {
			if m.GRPCAddress != "" {
				grpcOf[m.NodeID] = m.GRPCAddress
			}
		}
		servers := cf.Configuration().Servers
		out := make([]memberhealth.Member, 0, len(servers))
		for _, srv := range servers {
			out = append(out, memberhealth.Member{ID: string(srv.ID), RaftAddress: string(srv.Address),
				GRPCAddress: grpcOf[string(srv.ID)], Voter: srv.Suffrage == raft.Voter})
		}
		return out, nil
	}
}

// peerService is the internal service the members call on each other:
// read indexes from the API, health probes answered by admin.
type peerService struct {
	*rpc.Service
	adm *admin.Service
}

func (p peerService) Probe(ctx context.Context, r *peerpb.ProbeRequest) (*peerpb.ProbeResponse, error) {
	return p.adm.Probe(ctx, r)
}

// MemberHealth is this node's view of every member's health (package
// memberhealth): what GetClusterStatus, /status and the metrics show.
func (s *Server) MemberHealth() memberhealth.View { return s.members.View() }
