package metrics

import (
	"io"

	"github.com/hashicorp/raft"

	"github.com/grackle-coord/grackle/fsm"
	fsmpb "github.com/grackle-coord/grackle/proto/grackle/fsm/v1"
)

// ObserveFSM wraps the state machine given to Raft: every applied command
// is counted by what it did (grants, releases, lease events), and
// snapshot writes are sized and their failures counted. The wrapper
// changes nothing the FSM does or returns.
//
// Events are counted as this node applies them, so every node of a
// healthy cluster reports the same totals; entries replayed from the log
// at start are counted again (a restart is a counter reset anyway).
//
// also, when not nil, sees every applied command and its result (the
// audit log uses it); it must not block.
func (m *Metrics) ObserveFSM(f *fsm.FSM, also func(index uint64, cmd *fsmpb.Command, res *fsm.Result)) raft.BatchingFSM {
	return &observedFSM{f: f, m: m, also: also}
}

type observedFSM struct {
	f    *fsm.FSM
	m    *Metrics
	also func(uint64, *fsmpb.Command, *fsm.Result)
}

func (o *observedFSM) Apply(l *raft.Log) interface{} { return o.ApplyBatch([]*raft.Log{l})[0] }

func (o *observedFSM) ApplyBatch(logs []*raft.Log) []interface{} {
	out := o.f.ApplyBatch(logs)
	for i, l := range logs {
		res, ok := out[i].(*fsm.Result)
		if !ok || l.Type != raft.LogCommand {
			continue
		}
		// The FSM has just decoded these bytes successfully; decoding
		// again here keeps the FSM free of metrics code.
		cmd, err := fsm.Decode(l.Data)
		if err != nil {
			continue
		}
		o.m.count(cmd, res)
		if o.also != nil {
			o.also(l.Index, cmd, res)
		}
	}
	return out
}

func (m *Metrics) count(cmd *fsmpb.Command, res *fsm.Result) {
	if b, ok := cmd.GetOp().(*fsmpb.Command_Batch); ok {
		// Commands packed into one entry: one result each, in order.
		for i, data := range b.Batch.GetCommands() {
			if i >= len(res.Batch) || res.Batch[i] == nil {
				break
			}
			if sub, err := fsm.Decode(data); err == nil {
				m.count(sub, res.Batch[i])
			}
		}
		return
	}
	for _, g := range res.Grants {
		if g.Granted {
			m.grants.Inc()
		}
	}
	if res.Err != nil {
		return
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
	case *fsmpb.Command_CreateLease:
		m.leasesCreated.Inc()
	case *fsmpb.Command_RefreshLease:
		m.leasesRefreshed.Inc()
	case *fsmpb.Command_RevokeLease:
		m.leasesRevoked.Add(float64(len(res.RemovedLeases)))
	case *fsmpb.Command_ExpireLeases:
		m.leasesExpired.Add(float64(len(res.RemovedLeases)))
	}
	// A refresh that finds its lease already expired reaps it and fails
	// (NotFound): that is an expiry too.
	if _, ok := cmd.GetOp().(*fsmpb.Command_RefreshLease); ok && res.Err != nil {
		m.leasesExpired.Add(float64(len(res.RemovedLeases)))
	}
}

func (o *observedFSM) Restore(rc io.ReadCloser) error { return o.f.Restore(rc) }

func (o *observedFSM) Snapshot() (raft.FSMSnapshot, error) {
	sn, err := o.f.Snapshot()
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
