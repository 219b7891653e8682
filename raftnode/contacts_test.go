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

// A peer confirms a term with the send time of the latest call it
// answered in that term: a late answer to an earlier call does not move
// it back, an answer from a later term (the peer moved on) does not
// confirm, a later term replaces an earlier one, and another server
// under the same id starts afresh. Every record wakes Changed.
func TestContactsConfirmWithTheCallsSendTime(t *testing.T) {
	c := newContacts()
	t0 := time.Now()
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	check := func(what string, sent time.Time, term uint64) {
		t.Helper()
		pc, _ := c.Get("p")
		if !pc.ConfirmedSent.Equal(sent) || pc.ConfirmedTerm != term {
			t.Fatalf("%s: confirmed %v in term %d, want %v in term %d", what, pc.ConfirmedSent.Sub(t0), pc.ConfirmedTerm, sent.Sub(t0), term)
		}
	}
	changed := c.Changed()
	c.record("p", "a:1", 5, at(10), at(5), 3, true)
	select {
	case <-changed:
	default:
		t.Fatal("Changed not closed by a record")
	}
	check("first answer", at(5), 3)
	c.record("p", "a:1", 5, at(30), at(2), 3, true) // a late answer to an earlier call
	check("late answer to an earlier call", at(5), 3)
	c.record("p", "a:1", 5, at(40), at(35), 4, false) // the peer answered in a later term
	check("answer in another term", at(5), 3)
	c.record("p", "a:1", 5, at(50), at(45), 4, true)
	check("later term", at(45), 4)
	c.record("p", "b:1", 5, at(60), at(1), 2, false)
	check("another server under the id", time.Time{}, 0)
}
