package server_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
	"github.com/grackle-coord/grackle/rpc"
	"github.com/grackle-coord/grackle/server"
	"github.com/grackle-coord/grackle/server/servertest"
)

func suffrageOf(st *pb.GetClusterStatusResponse, id string) string {
	for _, m := range st.Members {
		if m.NodeId == id {
			return m.Suffrage
		}
	}
	return ""
}

// status3 is node i's GetClusterStatus (asked again while it fails: a
// node may be between leaders).
func status3(t *testing.T, c *servertest.Cluster, i int) *pb.GetClusterStatusResponse {
	t.Helper()
	var st *pb.GetClusterStatusResponse
	servertest.Eventually(t, "the cluster status", 30*time.Second, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		var err error
		st, err = c.ClusterClient(i).GetClusterStatus(ctx, &pb.GetClusterStatusRequest{})
		return err == nil
	})
	return st
}

// write commits one entry through node i (retrying only what is certainly
// not applied or transient while a leader settles).
func write(t *testing.T, c *servertest.Cluster, name string) {
	t.Helper()
	servertest.Eventually(t, "a write to commit", 30*time.Second, func() bool {
		li := c.Leader()
		if li < 0 {
			return false
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err := c.Client(li).CreateNamespace(ctx, &pb.CreateNamespaceRequest{Name: name})
		return err == nil || status.Code(err) == codes.AlreadyExists
	})
}

func wantPrecondition(t *testing.T, what string, err error, words ...string) {
	t.Helper()
	if status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("%s: %v, want FailedPrecondition", what, err)
	}
	msg := status.Convert(err).Message()
	for _, w := range words {
		if !strings.Contains(msg, w) {
			t.Fatalf("%s: message %q does not say %q", what, msg, w)
		}
	}
}

// member runs a membership call again while it fails Unavailable or
// DeadlineExceeded (a loaded machine may lose the leader under it; its
// outcome is then unknown) or, with whileRefused, FailedPrecondition (a
// refusal changes nothing). A retried AddMember that had applied is a
// no-op (same addresses); a retried RemoveMember that had applied answers
// NotFound, which then counts as success.
func member(t *testing.T, what string, whileRefused bool, call func() error) error {
	t.Helper()
	var err error
	retried := false
	servertest.Eventually(t, what, 60*time.Second, func() bool {
		err = call()
		switch status.Code(err) {
		case codes.Unavailable, codes.DeadlineExceeded:
			retried = true
			return false
		case codes.FailedPrecondition:
			return !whileRefused
		}
		return true
	})
	if retried && status.Code(err) == codes.NotFound {
		return nil
	}
	return err
}

// allowed runs a membership change until it is not refused for want of a
// reachable quorum; any other error fails the test.
func allowed(t *testing.T, what string, call func() error) {
	t.Helper()
	if err := member(t, what, true, call); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// The attack: AddMember of voters that never answer. They join as
// nonvoters and are never promoted, so the cluster keeps its quorum and
// goes on committing; they can be removed again.
func TestUnreachableVotersNeverCostQuorum(t *testing.T) {
	c := servertest.Start(t, 3, nil)
	li := c.WaitLeader()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var ghosts []string
	for i := 0; i < 3; i++ {
		id := fmt.Sprintf("ghost%d", i)
		ghosts = append(ghosts, id)
		req := &pb.AddMemberRequest{NodeId: id, RaftAddress: freeAddr(t), GrpcAddress: freeAddr(t), Voter: true}
		var res *pb.AddMemberResponse
		if err := member(t, "AddMember "+id, false, func() (err error) {
			res, err = c.ClusterClient(li).AddMember(ctx, req)
			return err
		}); err != nil {
			t.Fatalf("AddMember %s: %v", id, err)
		}
		for _, m := range res.Members {
			if m.NodeId == id && m.Suffrage != "nonvoter" {
				t.Fatalf("%s listed as %q right after AddMember, want nonvoter", id, m.Suffrage)
			}
		}
	}
	// A fourth is refused: three nonvoters are the most allowed by default
	// (each costs the leader a replication goroutine, answered or not).
	err := member(t, "AddMember ghost3", false, func() error {
		_, err := c.ClusterClient(c.WaitLeader()).AddMember(ctx, &pb.AddMemberRequest{NodeId: "ghost3", RaftAddress: freeAddr(t), GrpcAddress: freeAddr(t)})
		return err
	})
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "--max-nonvoters allows (3)") {
		t.Fatalf("a fourth nonvoter: %v, want FailedPrecondition naming the bound", err)
	}
	// Many promotion periods (servertest: 200 ms each): never promoted,
	// and the three real voters keep committing.
	end := time.Now().Add(2 * time.Second)
	for n := 0; time.Now().Before(end); n++ {
		write(t, c, fmt.Sprintf("ns%d", n))
		li = c.WaitLeader()
		st := status3(t, c, li)
		for _, g := range ghosts {
			if s := suffrageOf(st, g); s != "nonvoter" {
				t.Fatalf("%s became %q: an unreachable member was promoted", g, s)
			}
		}
		// (A loaded machine may delay one follower's heartbeat: a
		// quorum, not all three, is what must hold.)
		r, err := c.Nodes[li].API.Leader().Reach()
		if err != nil || r.Voters != 3 || r.Reachable < 2 {
			t.Fatalf("leader's reach %+v %v, want a quorum of 3 voters reachable", r, err)
		}
	}
	for _, g := range ghosts {
		if err := member(t, "RemoveMember "+g, false, func() error {
			_, err := c.ClusterClient(c.WaitLeader()).RemoveMember(ctx, &pb.RemoveMemberRequest{NodeId: g})
			return err
		}); err != nil {
			t.Fatalf("removing the nonvoter %s: %v", g, err)
		}
	}
	write(t, c, "after")
	if n := len(status3(t, c, c.WaitLeader()).Members); n != 3 {
		t.Fatalf("%d members after removing the ghosts, want 3", n)
	}
}

// With one voter of three down, a fourth voter and the removal of a live
// voter are refused (each could leave no reachable quorum); removing the
// dead voter is allowed, and then a new voter may be added again.
func TestMembershipKeepsAReachableQuorum(t *testing.T) {
	c := servertest.Start(t, 3, nil)
	li := c.WaitLeader()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dead := (li + 1) % 3
	live := (li + 2) % 3
	deadID, liveID := c.Cfgs[dead].NodeID, c.Cfgs[live].NodeID
	c.StopNode(dead)
	servertest.Eventually(t, "the leader to count the stopped voter unreachable", 30*time.Second, func() bool {
		li = c.WaitLeader()
		r, err := c.Nodes[li].API.Leader().Reach()
		return err == nil && r.Voters == 3 && r.Reachable == 2
	})
	cl := c.ClusterClient(li)
	err := member(t, "AddMember n4", false, func() error {
		_, err := cl.AddMember(ctx, &pb.AddMemberRequest{NodeId: "n4", RaftAddress: freeAddr(t), GrpcAddress: freeAddr(t), Voter: true})
		return err
	})
	// (The live follower may look unreachable too for a moment on a
	// loaded machine: the counts in the message may be lower, never the
	// outcome.)
	wantPrecondition(t, "adding a voter with 2 of 3 reachable", err, "of 3 voters are reachable", "need 3", deadID)
	err = member(t, "RemoveMember "+liveID, false, func() error {
		_, err := cl.RemoveMember(ctx, &pb.RemoveMemberRequest{NodeId: liveID})
		return err
	})
	wantPrecondition(t, "removing a live voter with 2 of 3 reachable", err, "would leave 2 voters", "need 2", deadID)
	if n := len(status3(t, c, li).Members); n != 3 {
		t.Fatalf("a refused change changed the members: %d", n)
	}
	// A nonvoter costs no quorum.
	wRaft, wGRPC := freeAddr(t), freeAddr(t)
	if err := member(t, "AddMember watcher", false, func() error {
		_, err := cl.AddMember(ctx, &pb.AddMemberRequest{NodeId: "watcher", RaftAddress: wRaft, GrpcAddress: wGRPC})
		return err
	}); err != nil {
		t.Fatalf("adding a nonvoter: %v", err)
	}
	// Allowed changes are retried while refused: a refusal changes
	// nothing, and a loaded machine may delay the live follower's answer.
	allowed(t, "removing the unreachable voter", func() error {
		_, err := cl.RemoveMember(ctx, &pb.RemoveMemberRequest{NodeId: deadID})
		return err
	})
	// Two voters, both reachable: a third may come (as a learner).
	n4Raft, n4GRPC := freeAddr(t), freeAddr(t)
	allowed(t, "adding a voter to 2 reachable voters", func() error {
		_, err := cl.AddMember(ctx, &pb.AddMemberRequest{NodeId: "n4", RaftAddress: n4Raft, GrpcAddress: n4GRPC, Voter: true})
		return err
	})
	write(t, c, "still")
}

// A joining node is a nonvoter until it has caught up, then the leader
// promotes it; the replicated record says it is to vote.
func TestJoinerIsPromotedOnceCaughtUp(t *testing.T) {
	c := servertest.Start(t, 1, func(cfg *server.Config) { cfg.PromoteAfter = 3 * time.Second })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	write(t, c, "before")
	// node2 does not bootstrap (it has a join target) but its own join
	// goes nowhere: the test adds it, to see the answer.
	cfg := servertest.Config(t, "node2")
	cfg.Join = freeAddr(t)
	n2 := c.StartNode(cfg)
	// (A single node: no election can take the call's leader away.)
	res, err := c.ClusterClient(0).AddMember(ctx, &pb.AddMemberRequest{NodeId: "node2", RaftAddress: n2.RaftAddr(), GrpcAddress: n2.GRPCAddr(), Voter: true})
	if err != nil {
		t.Fatal(err)
	}
	if s := suffrageOf(&pb.GetClusterStatusResponse{Members: res.Members}, "node2"); s != "nonvoter" {
		t.Fatalf("node2 is %q right after AddMember, want nonvoter (promoted only once caught up)", s)
	}
	servertest.Eventually(t, "node2 to be promoted", 30*time.Second, func() bool {
		return suffrageOf(status3(t, c, 0), "node2") == "voter"
	})
	for _, m := range c.Nodes[0].FSM.Members() {
		if m.NodeID == "node2" && !m.Voter {
			t.Fatalf("node2's record %+v does not say it is to vote", m)
		}
	}
	// A retried join (the same request) changes nothing.
	if _, err := c.ClusterClient(0).AddMember(ctx, &pb.AddMemberRequest{NodeId: "node2", RaftAddress: n2.RaftAddr(), GrpcAddress: n2.GRPCAddr(), Voter: true}); err != nil {
		t.Fatalf("the join retried: %v", err)
	}
	write(t, c, "after")
}

// A loop of TransferLeadership calls, whichever node leads: each new
// leader refuses a transfer within rpc.MinTransferInterval of its term's
// start, so leadership moves at most once per interval across the cluster.
func TestTransferLeadershipIsBoundedClusterWide(t *testing.T) {
	c := servertest.Start(t, 3, nil)
	li := c.WaitLeader()
	term0 := status3(t, c, li).Term
	start := time.Now()
	moved, refused := 0, 0
	for i := 0; time.Since(start) < 6*time.Second; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := c.ClusterClient(i%3).TransferLeadership(ctx, &pb.TransferLeadershipRequest{})
		cancel()
		switch {
		case err == nil:
			moved++
		case status.Code(err) == codes.FailedPrecondition:
			// The interval's refusals, or raft refusing one (what the
			// messages say is checked in rpc's TestTransferAllowed).
			refused++
		}
		time.Sleep(20 * time.Millisecond) // pacing of the attacker's loop, not a wait for anything
	}
	elapsed := time.Since(start)
	li = c.WaitLeader()
	term1 := status3(t, c, li).Term
	allowed := int(elapsed/rpc.MinTransferInterval) + 1
	t.Logf("%v: %d transfers, %d refused, term %d -> %d", elapsed.Round(time.Millisecond), moved, refused, term0, term1)
	if moved > allowed {
		t.Fatalf("%d transfers in %v, want at most %d (one per %v)", moved, elapsed, allowed, rpc.MinTransferInterval)
	}
	if refused == 0 {
		t.Fatal("no transfer was refused")
	}
	// Each transfer is one election; a loaded machine adds elections of
	// its own (a missed lease, a split vote), hence the margin. Unbounded,
	// the loop moved the term several times a second.
	if d, most := term1-term0, uint64(3*allowed+3); d > most {
		t.Fatalf("the term moved by %d in %v, want at most %d", d, elapsed, most)
	}
}
