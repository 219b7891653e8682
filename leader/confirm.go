package leader

import (
	"fmt"
	"time"

	"github.com/hashicorp/raft"
)

// A linearizable read needs a quorum to have confirmed this node's
// leadership *after the read arrived*. raft.VerifyLeader alone does not
// promise that: it counts a follower's vote when any answer to an
// AppendEntries comes back after the verify began, including the answer
// to a call sent (and handled by the follower) before it began, which an
// asymmetric partition or a slow network can hold up for longer than an
// election takes; it also counts the answers of nonvoters. So after
// VerifyLeader (which makes raft send a heartbeat to every follower at
// once), the round also waits until a quorum of the voters, this node
// included, has answered in this term an AppendEntries sent at or after
// the round began (raftnode.Contacts records each call's send time), the
// heartbeats VerifyLeader triggered arriving within a round trip.

// confirmedSince waits until a quorum of the voters among servers has
// confirmed this node's leadership in term with a call sent at or after
// since, or fails with raft.ErrNotLeader after wait.
func (l *Leader) confirmedSince(since time.Time, term uint64, servers []raft.Server, wait time.Duration) error {
	// Usually the answers that completed VerifyLeader are already
	// recorded: one count, no wake-up channel, no timer.
	got, need := l.confirmations(since, term, servers)
	if got >= need {
		return nil
	}
	if l.cfg.Contacts == nil {
		// No record of answers: only a lone voter confirms itself; never
		// VerifyLeader's count alone.
		return fmt.Errorf("%w: %d of %d voters confirmed this node's leadership, and it keeps no record of its peers' answers",
			raft.ErrNotLeader, got, need)
	}
	timeout := time.NewTimer(wait)
	defer timeout.Stop()
	for {
		changed := l.cfg.Contacts.Changed() // before counting again: an answer recorded after the count wakes the wait
		if got, need = l.confirmations(since, term, servers); got >= need {
			return nil
		}
		select {
		case <-changed:
		case <-timeout.C:
			return fmt.Errorf("%w: %d of %d voters confirmed this node's leadership with a heartbeat sent after the read began, within %v",
				raft.ErrNotLeader, got, need, wait)
		}
	}
}

// confirmations counts the voters that confirmed this node's leadership
// in term with a call sent at or after since (this node always does), and
// the quorum it needs.
func (l *Leader) confirmations(since time.Time, term uint64, servers []raft.Server) (got, need int) {
	voters := 0
	for _, srv := range servers {
		if srv.Suffrage != raft.Voter {
			continue
		}
		voters++
		if string(srv.ID) == l.cfg.NodeID {
			got++
			continue
		}
		pc, ok := l.contact(srv)
		if ok && pc.ConfirmedTerm == term && !pc.ConfirmedSent.Before(since) {
			got++
		}
	}
	return got, quorum(voters)
}
