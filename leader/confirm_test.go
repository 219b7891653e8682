package leader

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/grackle-coord/grackle/raftnode"
)

// fakeContacts is a PeerContacts the test writes.
type fakeContacts struct {
	mu      sync.Mutex
	m       map[raft.ServerID]raftnode.PeerContact
	changed chan struct{}
}

func (f *fakeContacts) Get(id raft.ServerID) (raftnode.PeerContact, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	pc, ok := f.m[id]
	return pc, ok
}

func (f *fakeContacts) Changed() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.changed == nil {
		f.changed = make(chan struct{})
	}
	return f.changed
}

func (f *fakeContacts) set(id raft.ServerID, pc raftnode.PeerContact) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.m[id] = pc
	if f.changed != nil {
		close(f.changed)
		f.changed = nil
	}
}

// A round is confirmed only by a quorum of voters that answered, in this
// term, a call sent after the round began: answers to earlier calls (held
// up in the network), answers in another term, answers from a nonvoter or
// from another address do not count; the wait ends as soon as enough do,
// and fails NOT_LEADER when they do not come.
func TestLeadershipConfirmedOnlyByCallsSentAfterTheRoundBegan(t *testing.T) {
	fc := &fakeContacts{m: map[raft.ServerID]raftnode.PeerContact{}}
	l := &Leader{cfg: Config{NodeID: "a", Contacts: fc}}
	servers := []raft.Server{
		{ID: "a", Address: "a:1", Suffrage: raft.Voter},
		{ID: "b", Address: "b:1", Suffrage: raft.Voter},
		{ID: "c", Address: "c:1", Suffrage: raft.Voter},
		{ID: "d", Address: "d:1", Suffrage: raft.Voter},
		{ID: "e", Address: "e:1", Suffrage: raft.Voter},
		{ID: "n", Address: "n:1", Suffrage: raft.Nonvoter},
	}
	since := time.Now()
	before, after := since.Add(-time.Millisecond), since.Add(time.Millisecond)
	const term = 7
	fc.set("b", raftnode.PeerContact{Address: "b:1", ConfirmedSent: before, ConfirmedTerm: term}) // answered a call sent before
	fc.set("c", raftnode.PeerContact{Address: "c:1", ConfirmedSent: after, ConfirmedTerm: term - 1})
	fc.set("d", raftnode.PeerContact{Address: "other:1", ConfirmedSent: after, ConfirmedTerm: term})
	fc.set("n", raftnode.PeerContact{Address: "n:1", ConfirmedSent: after, ConfirmedTerm: term})
	if got, need := l.confirmations(since, term, servers); got != 1 || need != 3 {
		t.Fatalf("%d of %d confirmed, want 1 (this node) of 3", got, need)
	}
	err := l.confirmedSince(since, term, servers, 50*time.Millisecond)
	if !errors.Is(err, raft.ErrNotLeader) {
		t.Fatalf("with only stale answers: %v, want raft.ErrNotLeader", err)
	}

	done := make(chan error, 1)
	go func() { done <- l.confirmedSince(since, term, servers, time.Minute) }()
	fc.set("b", raftnode.PeerContact{Address: "b:1", ConfirmedSent: after, ConfirmedTerm: term})
	select {
	case err := <-done:
		t.Fatalf("confirmed with 2 of 5 voters: %v", err)
	case <-time.After(20 * time.Millisecond):
	}
	fc.set("e", raftnode.PeerContact{Address: "e:1", ConfirmedSent: since, ConfirmedTerm: term})
	if err := <-done; err != nil {
		t.Fatalf("with 3 of 5 voters answering calls sent after the round began: %v", err)
	}
}

// A single voter confirms itself at once, with or without a record of
// answers; without one, a leader of several voters is refused at once
// (VerifyLeader's count alone never confirms it).
func TestLeadershipOfALoneVoterIsConfirmedAtOnce(t *testing.T) {
	lone := []raft.Server{{ID: "a", Address: "a:1", Suffrage: raft.Voter}}
	three := append(lone, raft.Server{ID: "b", Address: "b:1", Suffrage: raft.Voter}, raft.Server{ID: "c", Address: "c:1", Suffrage: raft.Voter})
	for _, contacts := range []PeerContacts{&fakeContacts{m: map[raft.ServerID]raftnode.PeerContact{}}, nil} {
		l := &Leader{cfg: Config{NodeID: "a", Contacts: contacts}}
		if err := l.confirmedSince(time.Now(), 1, lone, time.Millisecond); err != nil {
			t.Fatalf("contacts %v: %v", contacts, err)
		}
	}
	l := &Leader{cfg: Config{NodeID: "a"}}
	if err := l.confirmedSince(time.Now(), 1, three, time.Hour); !errors.Is(err, raft.ErrNotLeader) {
		t.Fatalf("three voters, no record of answers: %v, want raft.ErrNotLeader at once", err)
	}
}
