package admin_test

import (
	"context"
	"testing"
	"time"

	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
	"github.com/grackle-coord/grackle/server"
	"github.com/grackle-coord/grackle/server/servertest"
	"github.com/grackle-coord/grackle/version"
)

// With probe_members, the answering node asks every member: a stopped one
// shows as unreachable (not "follower"), the others with their version and
// applied index. Without it, nothing is probed.
func TestClusterStatusProbesMembers(t *testing.T) {
	c := servertest.Start(t, 3, func(cfg *server.Config) {
		cfg.HeartbeatTimeout, cfg.ElectionTimeout, cfg.LeaderLeaseTimeout = time.Second, time.Second, 500*time.Millisecond
		// Generous: under the race detector on a loaded machine a first
		// dial plus GetNodeInfo can pass the 750 ms default, and the live
		// follower would be reported unreachable.
		cfg.MemberProbeTimeout = 10 * time.Second
	})
	li := c.WaitLeader()
	fi := c.Follower()
	stopped := c.Cfgs[fi].NodeID
	c.StopNode(fi)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var st *pb.GetClusterStatusResponse
	// The live follower may still be catching up on the log when the
	// leader is found; wait until its probe carries an applied index.
	servertest.Eventually(t, "the live follower probed with an applied index", 20*time.Second, func() bool {
		var err error
		st, err = c.ClusterClient(li).GetClusterStatus(ctx, &pb.GetClusterStatusRequest{ProbeMembers: true})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range st.Members {
			if m.NodeId != stopped && m.NodeId != c.Cfgs[li].NodeID {
				return m.Reachability == "reachable" && m.AppliedIndex > 0
			}
		}
		return false
	})
	if len(st.Members) != 3 {
		t.Fatalf("members: %v", st.Members)
	}
	for _, m := range st.Members {
		switch {
		case m.NodeId == stopped:
			if m.Reachability != "unreachable" || m.State != "unreachable" || m.Version != "" {
				t.Errorf("stopped member: %v", m)
			}
		case m.NodeId == c.Cfgs[li].NodeID:
			if m.Reachability != "self" || m.State != "leader" || m.RaftState != "leader" || m.Version != version.Get().Version || m.AppliedIndex == 0 {
				t.Errorf("leader (self): %v", m)
			}
		default:
			if m.Reachability != "reachable" || m.RaftState != "follower" || m.Version != version.Get().Version || m.AppliedIndex == 0 || m.LastContactMs < 0 {
				t.Errorf("live follower: %v", m)
			}
		}
	}
	st, err := c.ClusterClient(li).GetClusterStatus(ctx, &pb.GetClusterStatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range st.Members {
		if m.NodeId != c.Cfgs[li].NodeID && m.Reachability != "" {
			t.Errorf("not probed, yet %v", m)
		}
	}
	info, err := c.ClusterClient(li).GetNodeInfo(ctx, &pb.GetNodeInfoRequest{})
	if err != nil || info.NodeId != c.Cfgs[li].NodeID || info.RaftState != "leader" || info.Revision == "" || info.GoVersion == "" {
		t.Fatalf("node info: %v %v", info, err)
	}
}
