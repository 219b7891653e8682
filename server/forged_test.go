package server_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/grackle-coord/grackle/fsm"
	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
	"github.com/grackle-coord/grackle/server"
	"github.com/grackle-coord/grackle/server/servertest"
)

// rejectedEntries reads grackle_fsm_rejected_entries_total from a node's
// /metrics (-1 when absent).
func rejectedEntries(t *testing.T, addr string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatalf("scrape %s: %v", addr, err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "grackle_fsm_rejected_entries_total "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatal(err)
			}
			return f
		}
	}
	return -1
}

// One forged Raft entry (bytes that are no command) used to commit and
// then panic the state machine of every node ("fsm: decode command:
// unexpected EOF"), and again on every restart. It is rejected instead:
// the entry replicates over the real transport to every node, each one
// answers it with an error result, counts it in
// grackle_fsm_rejected_entries_total, and keeps serving; a node restarted
// on the same data dir replays it the same way.
func TestForgedEntryRejectedOnEveryNode(t *testing.T) {
	c := servertest.Start(t, 3, func(cfg *server.Config) { cfg.HTTPAddr = "127.0.0.1:0" })
	li := c.WaitLeader()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := c.Client(li).CreateNamespace(ctx, &pb.CreateNamespaceRequest{Name: "before"}); err != nil {
		t.Fatal(err)
	}
	for i := range c.Nodes {
		if v := rejectedEntries(t, c.Nodes[i].HTTPAddr()); v != 0 {
			t.Fatalf("node %d: grackle_fsm_rejected_entries_total %v before any forged entry", i, v)
		}
	}

	// A truncated command, the bytes of issue 30's attack.
	fut := c.Nodes[li].Node.Raft.Apply([]byte{0x0a, 0x05, 'a', 'b'}, 10*time.Second)
	if err := fut.Error(); err != nil {
		t.Fatalf("the entry did not commit: %v", err)
	}
	res, ok := fut.Response().(*fsm.Result)
	if !ok || res.Err == nil || !res.Rejected || !strings.Contains(res.Err.Msg, fmt.Sprint("raft entry ", fut.Index())) {
		t.Fatalf("leader's result %#v", fut.Response())
	}
	for i := range c.Nodes {
		servertest.Eventually(t, fmt.Sprintf("node %d applies past the forged entry and counts it", i), 30*time.Second, func() bool {
			return c.Nodes[i].FSM.AppliedIndex() >= fut.Index() && rejectedEntries(t, c.Nodes[i].HTTPAddr()) == 1
		})
	}
	// Every node still serves reads and writes (a follower forwards).
	for i := range c.Nodes {
		name := fmt.Sprintf("after%d", i)
		if _, err := c.Client(i).CreateNamespace(ctx, &pb.CreateNamespaceRequest{Name: name}); err != nil {
			t.Fatalf("node %d: write after the forged entry: %v", i, err)
		}
		if _, err := c.Client(i).GetNamespace(ctx, &pb.GetNamespaceRequest{NamespaceName: "before"}); err != nil {
			t.Fatalf("node %d: read after the forged entry: %v", i, err)
		}
	}

	// A follower restarted on its data dir (same addresses) replays the
	// entry from its log: rejected again, and it serves.
	fi := (li + 1) % len(c.Nodes)
	cfg := c.Cfgs[fi]
	cfg.RaftAddr, cfg.GRPCAddr, cfg.HTTPAddr = c.Nodes[fi].RaftAddr(), c.Nodes[fi].GRPCAddr(), c.Nodes[fi].HTTPAddr()
	c.StopNode(fi)
	s := c.StartNode(cfg)
	servertest.Eventually(t, "the restarted follower catches up", 30*time.Second, func() bool {
		return s.FSM.AppliedIndex() >= fut.Index() && s.FSM.RejectedEntries() >= 1
	})
	if _, err := c.Client(fi).GetNamespace(ctx, &pb.GetNamespaceRequest{NamespaceName: "after0"}); err != nil {
		t.Fatalf("restarted node: %v", err)
	}
}
