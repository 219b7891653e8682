package metrics

import (
	"github.com/hashicorp/raft"

	"github.com/grackle-coord/grackle/fsm"
	fsmpb "github.com/grackle-coord/grackle/proto/grackle/fsm/v1"
)

// ObserveFSM wraps the state machine given to Raft so that snapshot
// writes are sized and their failures counted. It changes nothing the FSM
// does or returns.
func (m *Metrics) ObserveFSM(f *fsm.FSM) raft.BatchingFSM { return &observedFSM{BatchingFSM: f, m: m} }

type observedFSM struct {
	raft.BatchingFSM
	m *Metrics
}

// Applied counts one applied command by what it did (grants, releases,
// lease events): the FSM's Options.Applied hook, which reports each
// command of a packed entry on its own and hands over the command it
// decoded (no second decoding here).
//
// Events are counted as this node applies them, once: entries at or below
// the start index (SetStartIndex: the log's last index on disk when the
// node started) are replays of what this node had before a restart and
// are not counted again. Every node counts the entries it received since
// it started, so the nodes of a healthy cluster agree on the increase
// over any window (rate, increase), not on the totals.
func (m *Metrics) Applied(index uint64, cmd *fsmpb.Command, res *fsm.Result) {
	if index <= m.startIndex.Load() {
		return
	}
	m.count(cmd, res)
}

// SetStartIndex sets the index up to which applied entries are replays
// (raftnode.Config.Opened); call it before Raft starts applying.
func (m *Metrics) SetStartIndex(last uint64) { m.startIndex.Store(last) }

func (m *Metrics) count(cmd *fsmpb.Command, res *fsm.Result) {
	for _, g := range res.Grants {
		if g.Granted {
			m.grants.Inc()
		}
	}
	for _, g := range res.LockGrants {
		if g.Granted {
			m.lockGrants.Inc()
		}
	}
	if res.Err != nil {
		// A refresh that finds its lease already expired reaps it and
		// fails (NotFound): that is an expiry too.
		if _, ok := cmd.GetOp().(*fsmpb.Command_RefreshLease); ok {
			m.leasesExpired.Add(float64(len(res.RemovedLeases)))
		}
		return
	}
	m.waitGroupsFinished.Add(float64(res.FinishedWaitGroups))
	if res.Tripped {
		m.barrierTrips.Inc()
	}
	switch cmd.GetOp().(type) {
	case *fsmpb.Command_Acquire:
		if res.Acquired {
			m.grants.Inc()
		}
	case *fsmpb.Command_Release:
		if len(res.Freed) > 0 {
			m.releases.Inc()
		}
	case *fsmpb.Command_AcquireLock:
		if res.Acquired {
			m.lockGrants.Inc()
		}
	case *fsmpb.Command_ReleaseLock:
		if res.Released {
			m.lockReleases.Inc()
		}
	case *fsmpb.Command_CompleteJobs:
		m.jobsCompleted.Add(float64(res.NewJobs))
	case *fsmpb.Command_CreateLease:
		m.leasesCreated.Inc()
	case *fsmpb.Command_RefreshLease:
		m.leasesRefreshed.Inc()
	case *fsmpb.Command_RevokeLease:
		m.leasesRevoked.Add(float64(len(res.RemovedLeases)))
	case *fsmpb.Command_ExpireLeases:
		m.leasesExpired.Add(float64(len(res.RemovedLeases)))
	}
}

func (o *observedFSM) Snapshot() (raft.FSMSnapshot, error) {
	sn, err := o.BatchingFSM.Snapshot()
	if err != nil {
		o.m.snapshotFailures.Inc()
		return nil, err
	}
	return &observedSnapshot{sn: sn, m: o.m}, nil
}

type observedSnapshot struct {
	sn raft.FSMSnapshot
	m  *Metrics
}

func (s *observedSnapshot) Persist(sink raft.SnapshotSink) error {
	cs := &countingSink{SnapshotSink: sink}
	err := s.sn.Persist(cs)
	if err != nil {
		s.m.snapshotFailures.Inc()
	} else {
		s.m.snapshotBytes.Set(float64(cs.n))
	}
	return err
}

func (s *observedSnapshot) Release() { s.sn.Release() }

type countingSink struct {
	raft.SnapshotSink
	n int64
}

func (c *countingSink) Write(p []byte) (int, error) {
	n, err := c.SnapshotSink.Write(p)
	c.n += int64(n)
	return n, err
}
