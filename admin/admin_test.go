package admin_test

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
	"github.com/grackle-coord/grackle/server"
	"github.com/grackle-coord/grackle/server/servertest"
	"github.com/grackle-coord/grackle/version"
)

// generous is the probe timeout of these tests: under the race detector
// on a loaded machine a live member's answer can take longer than the
// 750 ms default, and it would be reported unreachable.
const generous = 5 * time.Second

// memberOf returns member id of st (nil when absent).
func memberOf(st *pb.GetClusterStatusResponse, id string) *pb.Member {
	for _, m := range st.GetMembers() {
		if m.NodeId == id {
			return m
		}
	}
	return nil
}

// status is node i's GetClusterStatus (probe_members as asked).
func status(t *testing.T, c *servertest.Cluster, i int, probe bool) *pb.GetClusterStatusResponse {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := c.ClusterClient(i).GetClusterStatus(ctx, &pb.GetClusterStatusRequest{ProbeMembers: probe})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// waitMember polls node i's status (without probe_members: what clients
// and the web view send) until member id satisfies cond, and returns how
// long that took.
func waitMember(t *testing.T, c *servertest.Cluster, i int, id, what string, within time.Duration, cond func(*pb.Member) bool) time.Duration {
	t.Helper()
	start := time.Now()
	var last *pb.Member
	for {
		if last = memberOf(status(t, c, i, false), id); last != nil && cond(last) {
			return time.Since(start)
		}
		if time.Since(start) > within {
			t.Fatalf("%s: not within %v; last %v", what, within, last)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Every GetClusterStatus carries each member's health, probe_members or
// not (the web view sends none): a stopped member shows unreachable
// within a second or two, with how long it has been silent and, from the
// leader, the leader's view of its replication; the live members with
// their version, applied index and raft state. Restarted, it shows
// reachable again within a second or two of answering.
func TestClusterStatusShowsMemberHealth(t *testing.T) {
	c := servertest.Start(t, 3, func(cfg *server.Config) { cfg.MemberProbeTimeout = generous })
	li := c.WaitLeader()
	fi := c.Follower()
	live := 3 - li - fi
	leaderID, stopped, liveID := c.Cfgs[li].NodeID, c.Cfgs[fi].NodeID, c.Cfgs[live].NodeID
	for _, id := range []string{stopped, liveID} {
		waitMember(t, c, li, id, id+" reachable", 20*time.Second, func(m *pb.Member) bool {
			return m.Reachability == "reachable" && m.AppliedIndex > 0 && m.ReplicationContactMs != nil
		})
	}

	cfg := c.Cfgs[fi]
	cfg.RaftAddr, cfg.GRPCAddr = c.Nodes[fi].RaftAddr(), c.Nodes[fi].GRPCAddr()
	c.StopNode(fi)
	took := waitMember(t, c, li, stopped, "the stopped member unreachable", 3*time.Second, func(m *pb.Member) bool {
		return m.Reachability == "unreachable"
	})
	t.Logf("stopped member shown unreachable %v after it stopped", took)

	st := status(t, c, li, false)
	for _, m := range st.Members {
		switch m.NodeId {
		case stopped:
			if m.State != "unreachable" || m.Version != "" || m.RaftState != "" || m.LastSeenMs == nil ||
				m.ReplicationContactMs == nil || m.ReplicationLagEntries == nil {
				t.Errorf("stopped member: %v", m)
			}
		case leaderID:
			if m.Reachability != "self" || m.State != "leader" || m.RaftState != "leader" || m.Version != version.Get().Version ||
				m.AppliedIndex == 0 || m.ReplicationContactMs != nil {
				t.Errorf("leader (self): %v", m)
			}
		case liveID:
			if m.Reachability != "reachable" || m.State != "follower" || m.RaftState != "follower" || m.Version != version.Get().Version ||
				m.AppliedIndex == 0 || m.LastContactMs < 0 || m.LastSeenMs == nil || m.ReplicationContactMs == nil ||
				*m.ReplicationContactMs > 5000 || m.ReplicationLagEntries == nil {
				t.Errorf("live follower: %v", m)
			}
		}
	}
	// The leader's record of the stopped member ages; writes it misses
	// count in its lag.
	before := *memberOf(st, stopped).ReplicationLagEntries
	for i := 0; i < 5; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if _, err := c.Client(li).CreateNamespace(ctx, &pb.CreateNamespaceRequest{Name: fmt.Sprintf("ns%d", i)}); err != nil {
			t.Fatal(err)
		}
		cancel()
	}
	if m := memberOf(status(t, c, li, false), stopped); *m.ReplicationLagEntries < before+5 {
		t.Errorf("lag of the stopped member %d after 5 writes, was %d", *m.ReplicationLagEntries, before)
	}
	// A follower answers with its own view: no replication record.
	for _, m := range status(t, c, live, false).Members {
		if m.ReplicationContactMs != nil || m.ReplicationLagEntries != nil {
			t.Errorf("a follower's answer carries the leader's view: %v", m)
		}
		if m.NodeId == stopped && m.State != "unreachable" {
			t.Errorf("the live follower shows the stopped member as %q", m.State)
		}
	}

	s := c.StartNode(cfg)
	servertest.Eventually(t, "the restarted member answers", 30*time.Second, func() bool {
		return s.Node.Raft.AppliedIndex() > 0
	})
	took = waitMember(t, c, li, stopped, "the restarted member reachable", 3*time.Second, func(m *pb.Member) bool {
		return m.Reachability == "reachable"
	})
	t.Logf("restarted member shown reachable %v after it answered", took)
}

// A member restarted at a new address under the same name (a container
// recreated: Docker gives it another IP) shows reachable within a second
// or two of answering there. gRPC keeps what a name resolved to for 30 s
// at least: the connections the status used to probe through kept
// dialling the old address for up to that long (issue: "unreachable for
// 20-25 s after Docker reported it healthy").
func TestRestartedMemberAtANewAddressIsReachableAtOnce(t *testing.T) {
	dns := startDNS(t)
	const name = "node2.grackle.test"
	dns.set(name, "127.0.0.1")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	c := servertest.Start(t, 3, func(cfg *server.Config) {
		cfg.MemberProbeTimeout = generous
		cfg.Insecure = true // node2 joins under a name, beyond loopback as far as the leader can tell
		if cfg.NodeID == "node2" {
			cfg.GRPCAddr = fmt.Sprintf("127.0.0.1:%d", port)
			cfg.AdvertiseGRPC = fmt.Sprintf("%s:%d", name, port)
		}
	})
	li := c.WaitLeader()
	var ni int
	for i, cf := range c.Cfgs {
		if cf.NodeID == "node2" {
			ni = i
		}
	}
	if li == ni {
		if _, err := c.TransferLeadership(context.Background(), li, "node1"); err != nil {
			t.Fatal(err)
		}
		li = c.WaitLeader()
	}
	// `grackle cluster status` sends probe_members.
	reach := func() string { return memberOf(status(t, c, li, true), "node2").GetReachability() }
	servertest.Eventually(t, "node2 reachable", 20*time.Second, func() bool { return reach() == "reachable" })

	cfg := c.Cfgs[ni]
	cfg.RaftAddr = c.Nodes[ni].RaftAddr()
	c.StopNode(ni)
	servertest.Eventually(t, "node2 unreachable", 20*time.Second, func() bool { return reach() == "unreachable" })
	// Restart it right after the members looked its name up again (a
	// resolver that keeps an answer for 30 s misses the move).
	n, looked := dns.count(name)
	for {
		select {
		case <-looked:
		case <-time.After(60 * time.Second):
			t.Fatal("no lookup of node2's name within 60 s of it stopping")
		}
		var m int
		if m, looked = dns.count(name); m > n {
			break
		}
	}
	dns.set(name, "127.0.0.2")
	cfg.GRPCAddr = fmt.Sprintf("127.0.0.2:%d", port)
	s := c.StartNode(cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := c.ClusterClient(ni).GetNodeInfo(ctx, &pb.GetNodeInfoRequest{}); err != nil {
		t.Fatalf("the restarted node2 at %s: %v", s.GRPCAddr(), err)
	}
	answered := time.Now()
	for reach() != "reachable" {
		if time.Since(answered) > 3*time.Second {
			t.Fatalf("node2 answers at its new address, yet the leader's status says %q %v later", reach(), time.Since(answered))
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("node2 at its new address shown reachable %v after it answered there", time.Since(answered).Round(time.Millisecond))
}
