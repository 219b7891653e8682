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
	// Each sample also includes the time from the leader's stamping to
	// this node's sampling (replication, apply, the sampling period),
	// which only ever adds: so Offset is the smallest of the recent
	// samples (as NTP filters its samples), which on a loaded cluster
	// stays near the true skew where one sample can be off by the commit
	// latency.
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
	window  []time.Duration // the recent samples, oldest first
}

// skewWindow is how many samples Offset is the minimum of (about 1.6 s
// of a busy cluster at the 100 ms sampling period); skewMinSamples is how
// many it takes before a warning, so one delayed sample never warns.
const (
	skewWindow     = 16
	skewMinSamples = 3
)

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
		m.window = m.window[:0]
		return
	}
	if len(m.window) == skewWindow {
		m.window = append(m.window[:0], m.window[1:]...)
	}
	m.window = append(m.window, time.Duration(m.src.Wall()-m.f.LastNow()))
	off := m.window[0]
	for _, o := range m.window[1:] {
		off = min(off, o)
	}
	m.last = Skew{Offset: off, At: time.Now()}
	abs := off
	if abs < 0 {
		abs = -abs
	}
	switch {
	case m.warnAt > 0 && abs > m.warnAt && !m.warned && len(m.window) >= skewMinSamples:
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
