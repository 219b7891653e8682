package raftnode

import (
	"net"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// The leader records each peer's answered AppendEntries: a live nonvoter
// is recorded with its log caught up; a peer that never answers has no
// record at all.
func TestContactsRecordAnsweredAppendEntries(t *testing.T) {
	node := func(id string, bootstrap bool) *Node {
		n, err := New(Config{NodeID: id, DataDir: t.TempDir(), BindAddr: "127.0.0.1:0", Bootstrap: bootstrap,
			HeartbeatTimeout: 200 * time.Millisecond, ElectionTimeout: 200 * time.Millisecond, LeaderLeaseTimeout: 100 * time.Millisecond,
			FSM: &raft.MockFSM{}, Logger: hclog.NewNullLogger()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { n.Close() })
		return n
	}
	n1 := node("n1", true)
	waitUntil(t, "n1 to lead", func() bool { return n1.Raft.State() == raft.Leader })
	n2 := node("n2", false)
	// An address nothing listens on.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := l.Addr().String()
	l.Close()
	for _, f := range []raft.IndexFuture{n1.Raft.AddNonvoter("n2", n2.Addr, 0, 10*time.Second), n1.Raft.AddNonvoter("dead", raft.ServerAddress(dead), 0, 10*time.Second)} {
		if err := f.Error(); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 20; i++ {
		if err := n1.Raft.Apply([]byte("x"), 10*time.Second).Error(); err != nil {
			t.Fatal(err)
		}
	}
	last := n1.Raft.LastIndex()
	since := time.Now()
	waitUntil(t, "a fresh record of n2 caught up", func() bool {
		pc, ok := n1.Contacts.Get("n2")
		return ok && pc.At.After(since) && pc.LastLog >= last && pc.Address == n2.Addr
	})
	if pc, ok := n1.Contacts.Get("dead"); ok {
		t.Fatalf("a peer that never answered has a record: %+v", pc)
	}
	if _, ok := n2.Contacts.Get("n1"); ok {
		t.Fatal("a follower recorded contacts (only a leader sends AppendEntries)")
	}
}
