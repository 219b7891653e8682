package leader

import (
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/grackle-coord/grackle/fsm"
)

// Skew is a follower's view of the leader's clock.
type Skew struct {
	// Offset is this node's wall clock minus the leader's stamped `now`
	// of a command just applied: positive when this node's clock is ahead.
	// It includes the replication delay (milliseconds) and the sampling
	// period, so it overstates a positive skew by up to about 100 ms.
	Offset time.Duration
	// At is when it was measured (zero: never, e.g. on the leader or in an
	// idle cluster).
	At time.Time
}

// SkewMonitor measures, on a follower, how far the leader's clock is from
// this node's: each time the applied index moved, it compares the applied
// `now` with its wall clock. It logs a warning when the skew passes half
// the lease grace, the bound the cluster tolerates (DESIGN.md, The clock).
type SkewMonitor struct {
	f       *fsm.FSM
	src     Source
	warnAt  time.Duration
	leading func() bool
	log     hclog.Logger
	every   time.Duration

	mu      sync.Mutex
	last    Skew
	lastIdx uint64
	warned  bool
}

func newSkewMonitor(f *fsm.FSM, src Source, grace time.Duration, leading func() bool, log hclog.Logger) *SkewMonitor {
	return &SkewMonitor{f: f, src: src, warnAt: grace / 2, leading: leading, log: log, every: 100 * time.Millisecond}
}

func (m *SkewMonitor) run(stop <-chan struct{}) {
	t := time.NewTicker(m.every)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			m.sample()
		}
	}
}

func (m *SkewMonitor) sample() {
	idx := m.f.AppliedIndex()
	m.mu.Lock()
	defer m.mu.Unlock()
	if idx == m.lastIdx {
		return
	}
	m.lastIdx = idx
	if m.leading() {
		// The leader stamps `now` itself: there is nothing to compare.
		m.last = Skew{}
		return
	}
	off := time.Duration(m.src.Wall() - m.f.LastNow())
	m.last = Skew{Offset: off, At: time.Now()}
	abs := off
	if abs < 0 {
		abs = -abs
	}
	switch {
	case m.warnAt > 0 && abs > m.warnAt && !m.warned:
		m.warned = true
		m.log.Warn("clock skew with the leader exceeds half the lease grace: lease expiry may be early or late by as much",
			"skew", off, "lease_grace", 2*m.warnAt)
	case m.warned && abs <= m.warnAt/2:
		m.warned = false
		m.log.Info("clock skew with the leader back within bounds", "skew", off)
	}
}

// Last returns the last measurement.
func (m *SkewMonitor) Last() Skew {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.last
}
