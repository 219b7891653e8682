package leader

import (
	"time"

	"github.com/hashicorp/raft"
)

// Learners (etcd) / autopilot's stabilization (Consul): a member added to
// vote joins Raft as a nonvoter, and this loop makes it a voter once it
// has caught up and stayed caught up for PromoteAfter. Until then it
// counts for no quorum, so a member that never answers (a wrong address,
// a node that never starts, an attacker's AddMember) can never cost the
// cluster its quorum.
//
// Caught up: its last answered AppendEntries (raftnode.Contacts: the
// heartbeat rate) is within ReachableWithin, and the last log index that
// answer reported is within PromoteMaxLag of this leader's last index.
// hashicorp/raft keeps the real match index to itself; the follower's
// reported last index is the same figure for a node that caught up from
// this leader (it can only run ahead of the match index with entries of
// an old term it has not yet been told to drop, and then raft's own
// replication repairs it: this is a readiness test, not a safety one).

// promoter is one term's promotion state.
type promoter struct {
	since   map[raft.ServerID]time.Time // caught up continuously since
	refused map[raft.ServerID]string    // the last refusal logged
}

func (t *Term) promoteLoop() {
	every := t.l.cfg.PromoteAfter / 4
	if every < 50*time.Millisecond {
		every = 50 * time.Millisecond
	}
	if every > 500*time.Millisecond {
		every = 500 * time.Millisecond
	}
	tk := time.NewTicker(every)
	defer tk.Stop()
	p := &promoter{since: map[raft.ServerID]time.Time{}, refused: map[raft.ServerID]string{}}
	for {
		t.promoteOnce(p, time.Now())
		select {
		case <-t.ctx.Done():
			return
		case <-tk.C:
		}
	}
}

// promoteOnce promotes at most one learner (a promotion changes the
// configuration: the next round reads it afresh).
func (t *Term) promoteOnce(p *promoter, now time.Time) {
	l := t.l
	want := map[string]string{} // node id -> raft address, of members added to vote
	for _, m := range l.fsm.Members() {
		if m.Voter {
			want[m.NodeID] = m.RaftAddress
		}
	}
	r, err := l.Reach()
	if err != nil {
		return
	}
	last := l.raft.LastIndex()
	learners := map[raft.ServerID]bool{}
	var ready *raft.Server
	for i, srv := range r.Servers {
		if srv.Suffrage == raft.Voter || want[string(srv.ID)] != string(srv.Address) {
			continue
		}
		learners[srv.ID] = true
		pc, ok := l.contact(srv)
		if !ok || now.Sub(pc.At) > l.cfg.ReachableWithin || pc.LastLog+l.cfg.PromoteMaxLag < last {
			delete(p.since, srv.ID)
			continue
		}
		first, ok := p.since[srv.ID]
		if !ok {
			p.since[srv.ID] = now
			continue
		}
		if ready == nil && now.Sub(first) >= l.cfg.PromoteAfter {
			ready = &r.Servers[i]
		}
	}
	for id := range p.since {
		if !learners[id] {
			delete(p.since, id)
			delete(p.refused, id)
		}
	}
	if ready == nil {
		return
	}
	if err := r.CheckAddVoter(string(ready.ID)); err != nil {
		if msg := err.Error(); p.refused[ready.ID] != msg {
			p.refused[ready.ID] = msg
			l.log.Warn("not promoting a caught-up nonvoter", "node_id", string(ready.ID), "error", msg)
		}
		return
	}
	// prevIndex: raft refuses the change if the configuration changed
	// since the check.
	if err := l.raft.AddVoter(ready.ID, ready.Address, r.Index, l.cfg.ApplyTimeout).Error(); err != nil {
		if t.ctx.Err() == nil {
			l.log.Warn("promoting a nonvoter failed; will retry", "node_id", string(ready.ID), "error", err)
		}
		return
	}
	delete(p.since, ready.ID)
	delete(p.refused, ready.ID)
	l.log.Info("promoted a caught-up nonvoter to voter", "node_id", string(ready.ID), "caught_up_for", l.cfg.PromoteAfter)
}
