package rpc

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/grackle-coord/grackle/apierr"
	"github.com/grackle-coord/grackle/fsm"
	"github.com/grackle-coord/grackle/internal/loopback"
	"github.com/grackle-coord/grackle/leader"
	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
)

// Membership input is checked before anything reaches Raft: node ids are
// names, addresses host:port (a host name or an IP, a port 1..65535).

func checkAddress(field, v string) error {
	host, port, err := net.SplitHostPort(v)
	if err != nil {
		return apierr.InvalidField(field, fmt.Sprintf("must be host:port, got %q", v))
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
		return apierr.InvalidField(field, fmt.Sprintf("port must be 1..65535, got %q", port))
	}
	if net.ParseIP(host) != nil {
		return nil
	}
	if host == "" || len(host) > 253 {
		return apierr.InvalidField(field, fmt.Sprintf("host must be 1..253 bytes, got %d", len(host)))
	}
	for _, label := range strings.Split(host, ".") {
		if label == "" || len(label) > 63 {
			return apierr.InvalidField(field, fmt.Sprintf("host %q is not a host name", host))
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			ok := c == '-' || c == '_' || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
			if !ok {
				return apierr.InvalidField(field, fmt.Sprintf("host %q may contain only letters, digits, '-', '_' and '.'", host))
			}
		}
	}
	return nil
}

func checkAddMember(r *pb.AddMemberRequest) error {
	return firstInvalid(fsm.ValidateName("node_id", r.NodeId), checkAddress("raft_address", r.RaftAddress),
		checkAddress("grpc_address", r.GrpcAddress))
}

// existingMember reports whether node id is already in the configuration
// (its server then): with the same addresses (a join retried: nothing to
// add), or AlreadyExists when they differ (never silently rewrite a
// member's address: followers would then forward clients to whoever
// asked).
func (s *Service) existingMember(reach leader.Reach, r *pb.AddMemberRequest) (raft.Server, bool, error) {
	var srv raft.Server
	found := false
	for _, x := range reach.Servers {
		if string(x.ID) == r.NodeId {
			srv, found = x, true
		}
	}
	if !found {
		return srv, false, nil
	}
	grpcAddr := ""
	for _, m := range s.fsm.Members() {
		if m.NodeID == r.NodeId {
			grpcAddr = m.GRPCAddress
		}
	}
	if string(srv.Address) != r.RaftAddress || (grpcAddr != "" && grpcAddr != r.GrpcAddress) {
		return srv, true, status.Errorf(codes.AlreadyExists, "node_id: %q is already a member with raft_address %q and grpc_address %q; remove it first to change them",
			r.NodeId, srv.Address, grpcAddr)
	}
	return srv, true, nil
}

// raftAddressFree refuses a new member whose Raft address another member
// has: Raft would refuse the configuration anyway (duplicate address),
// but as an error that reads like a transient one, and a retry can never
// succeed. The answer is permanent and names the member holding it.
func (s *Service) raftAddressFree(reach leader.Reach, r *pb.AddMemberRequest) error {
	for _, x := range reach.Servers {
		if string(x.Address) == r.RaftAddress && string(x.ID) != r.NodeId {
			return apierr.NewWithMetadata(codes.AlreadyExists, apierr.RaftAddressInUse,
				fmt.Sprintf("raft_address: %q is already the Raft address of member %q; remove that member first, or give this node another address", r.RaftAddress, x.ID),
				map[string]string{apierr.KeyMember: string(x.ID), apierr.KeyNode: s.cfg.NodeID})
		}
	}
	return nil
}

// checkOpenJoin refuses, on a node without access control and without
// --insecure, to add a node beyond loopback or to take the request from a
// caller beyond loopback: without --acl anyone who reaches the gRPC port
// could add members (and, once promoted, take the quorum). Checked on the
// node asked and again on the leader it forwards to.
func (s *Service) checkOpenJoin(ctx context.Context, r *pb.AddMemberRequest) error {
	if s.cfg.ACL || s.cfg.Insecure {
		return nil
	}
	var beyond []string
	if p, ok := peer.FromContext(ctx); ok && !loopback.NetAddr(p.Addr) {
		beyond = append(beyond, fmt.Sprintf("the call comes from %s", p.Addr))
	}
	if !loopback.Addr(r.RaftAddress) {
		beyond = append(beyond, fmt.Sprintf("raft_address %q", r.RaftAddress))
	}
	if !loopback.Addr(r.GrpcAddress) {
		beyond = append(beyond, fmt.Sprintf("grpc_address %q", r.GrpcAddress))
	}
	if len(beyond) == 0 {
		return nil
	}
	return apierr.New(codes.FailedPrecondition, apierr.InsecureJoin, s.cfg.NodeID, apierr.Leader{},
		fmt.Sprintf("node %s runs without access control, so it adds members only on loopback (%s is beyond): start every node with --acl (the joining one with --join-token), or with --insecure to accept joins from anyone who reaches the gRPC port",
			s.cfg.NodeID, strings.Join(beyond, ", ")))
}

// MinTransferInterval is the least time between two leadership transfers
// anywhere in the cluster. Each transfer moves the leader, so a limit per
// node alone would let a loop bounce leadership A->B->C->A as fast as
// elections run; a leader therefore also refuses to transfer within
// MinTransferInterval of its own term's start (transferAllowed). With one
// transfer at a time per node (transferGate), a loop of transfer calls
// moves the leader at most once per interval.
const MinTransferInterval = 2 * time.Second

// transferAllowed refuses a transfer by a leader whose term began (as it
// saw it) less than MinTransferInterval ago.
func transferAllowed(began, now time.Time) error {
	next := began.Add(MinTransferInterval)
	if wait := next.Sub(now); wait > 0 {
		return status.Errorf(codes.FailedPrecondition,
			"leadership transfers are at most one per %v across the cluster and this leader was elected %v ago: the next is allowed at %s (in %v)",
			MinTransferInterval, now.Sub(began).Round(time.Millisecond), next.UTC().Format(time.RFC3339Nano), wait.Round(time.Millisecond))
	}
	return nil
}

// transferGate lets one leadership transfer run at a time, at most one per
// MinTransferInterval.
type transferGate struct {
	mu   sync.Mutex
	busy bool
	last time.Time
}

func (g *transferGate) begin(now time.Time) (func(), error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.busy {
		return nil, status.Error(codes.FailedPrecondition, "a leadership transfer is already in progress")
	}
	if wait := MinTransferInterval - now.Sub(g.last); !g.last.IsZero() && wait > 0 {
		return nil, status.Errorf(codes.FailedPrecondition, "leadership transfers are at most one per %v: try again in %v",
			MinTransferInterval, wait.Round(time.Millisecond))
	}
	g.busy = true
	return func() {
		g.mu.Lock()
		g.busy, g.last = false, time.Now()
		g.mu.Unlock()
	}, nil
}
