package raftnode

import (
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// PeerContact is what this node, while it led, last heard from one peer
// over Raft.
type PeerContact struct {
	// Address is the Raft address the answer came from.
	Address raft.ServerAddress
	// At is when the last AppendEntries (a heartbeat or entries) to the
	// peer was answered. A peer that never answered has no record.
	At time.Time
	// LastLog is the peer's last log index as of that answer: what its
	// answer reported, or the last entry it accepted in that call.
	LastLog uint64
	// ConfirmedSent is when the latest AppendEntries that the peer
	// answered in the term it was sent in (its answer's term the call's:
	// it had not moved to a later term) was sent, and ConfirmedTerm that
	// term. The peer handled that call after ConfirmedSent, still in that
	// term, so no leader of a later term had its vote by then. At proves
	// less: an answer can be held up in the network for any time after
	// the peer handled the call.
	ConfirmedSent time.Time
	ConfirmedTerm uint64
}

// Contacts records, per peer, the leader's last answered AppendEntries.
//
// Why here: hashicorp/raft keeps each follower's last contact and match
// index inside its replication state and exposes neither (Stats has no
// per-peer figures; the heartbeat observations report failures and
// recoveries, not successes, so a peer that was never heard from looks
// the same as one that never failed). Its leader-lease check counts a
// voter as contacted by the same event recorded here: an AppendEntries
// round trip that returned. A heartbeat goes to every peer every tenth of
// the heartbeat timeout or so, so a reachable peer's record is always
// fresh while this node leads.
type Contacts struct {
	mu      sync.Mutex
	m       map[raft.ServerID]PeerContact
	changed chan struct{} // closed at the next record; nil until asked for
}

func newContacts() *Contacts { return &Contacts{m: map[raft.ServerID]PeerContact{}} }

// Get returns the last contact with peer id, if any.
func (c *Contacts) Get(id raft.ServerID) (PeerContact, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	pc, ok := c.m[id]
	return pc, ok
}

// Changed returns a channel closed at the next answer recorded.
func (c *Contacts) Changed() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.changed == nil {
		c.changed = make(chan struct{})
	}
	return c.changed
}

// record notes an answer that came at at to a call sent at sent in term
// (sameTerm: the answer's term was the call's).
func (c *Contacts) record(id raft.ServerID, addr raft.ServerAddress, lastLog uint64, at, sent time.Time, term uint64, sameTerm bool) {
	c.mu.Lock()
	pc := c.m[id]
	if pc.Address != addr {
		pc = PeerContact{} // another server under this id: nothing it said counts
	}
	pc.Address, pc.At, pc.LastLog = addr, at, lastLog
	// Answers to concurrent calls (a heartbeat beside a replication call)
	// may come out of order: keep the latest call.
	if sameTerm && (term > pc.ConfirmedTerm || term == pc.ConfirmedTerm && sent.After(pc.ConfirmedSent)) {
		pc.ConfirmedSent, pc.ConfirmedTerm = sent, term
	}
	c.m[id] = pc
	if c.changed != nil {
		close(c.changed)
		c.changed = nil
	}
	c.mu.Unlock()
}

// RecordableTransport is a transport RecordContacts can wrap: a
// raft.Transport with the optional interfaces raft looks for (pre-vote,
// close), which a wrapper that only embedded raft.Transport would hide.
// raft.NetworkTransport is one; raft.InmemTransport (tests) another.
type RecordableTransport interface {
	raft.Transport
	raft.WithPreVote
	raft.WithClose
}

// RecordContacts returns t with every answered AppendEntries recorded in
// the Contacts it returns beside it: the node's own transport, and the
// in-memory clusters of tests that check what the leader does with them.
func RecordContacts(t RecordableTransport) (raft.Transport, *Contacts) {
	c := newContacts()
	return contactTransport{RecordableTransport: t, contacts: c}, c
}

// contactTransport is a transport with every answered AppendEntries
// recorded. Raft heartbeats use this call (never the pipeline), so every
// peer is recorded at the heartbeat rate.
type contactTransport struct {
	RecordableTransport
	contacts *Contacts
}

func (t contactTransport) AppendEntries(id raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	sent := time.Now()
	err := t.RecordableTransport.AppendEntries(id, target, args, resp)
	if err == nil {
		// The follower reports its last index as it was before this call;
		// entries it accepted move it on.
		last := resp.LastLog
		if resp.Success && len(args.Entries) > 0 {
			last = args.Entries[len(args.Entries)-1].Index
		}
		t.contacts.record(id, target, last, time.Now(), sent, args.Term, resp.Term == args.Term)
	}
	return err
}
