package client_test

import (
	"testing"
	"time"

	"github.com/grackle-coord/grackle/client"
	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
	"github.com/grackle-coord/grackle/server/servertest"
)

// By default clients spread over their endpoints: each sends its calls to
// a home picked at random among them, so a fleet given every member lands
// on every member; LeaderOnly keeps every call on the leader.
func TestClientsSpreadOverTheEndpoints(t *testing.T) {
	c := servertest.Start(t, 3, nil)
	c.WaitLeader()
	var eps []string
	for _, n := range c.Nodes {
		eps = append(eps, n.GRPCAddr())
	}
	homes := map[string]int{}
	for range 30 {
		cli := newClient(t, eps...)
		homes[cli.Home()]++
	}
	if len(homes) < 2 {
		t.Fatalf("30 clients given 3 endpoints all chose the same home: %v", homes)
	}
	for h := range homes {
		if h == "" {
			t.Fatalf("a client without LeaderOnly has no home: %v", homes)
		}
	}
	only, err := client.New(ctxT(t), client.Config{Endpoints: eps, LeaderOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer only.Close()
	if h := only.Home(); h != "" {
		t.Fatalf("a LeaderOnly client has home %q", h)
	}
}

// A client whose home is a follower writes and reads through it (the
// follower forwards on its stream to the leader); when its home dies its
// calls go to the leader, and a session it holds keeps its lease.
func TestClientHomeOnAFollower(t *testing.T) {
	c := servertest.Start(t, 3, nil)
	c.WaitLeader()
	f := c.Follower()
	cli := newClient(t, c.Nodes[f].GRPCAddr())
	if cli.Home() != c.Nodes[f].GRPCAddr() {
		t.Fatalf("home %q, want the one endpoint %q", cli.Home(), c.Nodes[f].GRPCAddr())
	}
	ctx := ctxT(t)
	setup(t, cli, "spread", "s", 1)
	sess, err := cli.NewSession(ctx, "spread", "w1", 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	sem := sess.Semaphore("s")
	if _, err := sem.Acquire(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if c.Nodes[f].PeerStreamCalls() == 0 {
		t.Fatal("the follower carried none of its client's calls to the leader on its stream")
	}
	st, err := cli.GetSemaphore(ctx, &pb.GetSemaphoreRequest{NamespaceName: "spread", SemaphoreName: "s"})
	if err != nil || st.GetSemaphore().GetActiveHolds() != 1 {
		t.Fatalf("read through the follower: %v, %v", st, err)
	}

	// The home dies: calls go to the leader the client learned.
	c.StopNode(f)
	if err := sem.Release(ctx); err != nil {
		t.Fatalf("release after the home died: %v", err)
	}
	if _, err := sem.Acquire(ctx, 1); err != nil {
		t.Fatalf("acquire after the home died: %v", err)
	}
	if err := sess.Close(ctx); err != nil {
		t.Fatalf("close after the home died: %v", err)
	}
}
