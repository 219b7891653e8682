package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/grackle-coord/grackle/leader"
)

// leaderMetrics are measured by the leader's work (waiter queues, lease
// expiry); on a follower they stay at zero.
type leaderMetrics struct {
	queued     prometheus.Gauge
	queueWait  prometheus.Histogram
	handOff    prometheus.Histogram
	expiryLate prometheus.Histogram
	entrySize  prometheus.Histogram
	entryHeld  prometheus.Histogram
	readRound  prometheus.Histogram
}

func newLeaderMetrics(reg *prometheus.Registry) leaderMetrics {
	h := func(name, help string) prometheus.Histogram {
		x := prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: Namespace, Name: name, Help: help, Buckets: latencyBuckets})
		reg.MustRegister(x)
		return x
	}
	l := leaderMetrics{
		queued: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: Namespace, Name: "leader_queued_waiters",
			Help: "AcquireSemaphore calls waiting in the leader's queues (0 on a follower)."}),
		queueWait:  h("leader_queue_wait_seconds", "Time an acquire waited in the leader's queue before its grant committed."),
		handOff:    h("leader_handoff_seconds", "From proposing the command that frees permits (the next grant rides in its Raft entry) to the waiter being granted."),
		expiryLate: h("leader_expiry_lateness_seconds", "From a lease's expires_at to the commit that reaped it."),
		entrySize: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: Namespace, Name: "leader_entry_commands",
			Help:    "Commands in each Raft entry the leader proposed (writes packed into one entry).",
			Buckets: prometheus.ExponentialBuckets(1, 2, 10)}),
		entryHeld: h("leader_entry_hold_seconds", "How long the hold (--pack-hold) kept each held entry back for the callers of the entry before it."),
	}
	l.readRound = prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: Namespace, Name: "leader_read_round_reads",
		Help:    "Reads (and followers' read-index requests) that shared each leadership confirmation of the leader; its count is the confirmation rounds.",
		Buckets: prometheus.ExponentialBuckets(1, 2, 10)})
	reg.MustRegister(l.entrySize)
	reg.MustRegister(l.readRound)
	reg.MustRegister(l.queued)
	return l
}

// LeaderObserver is the leader package's observer that feeds the
// leader_* series. Its methods only touch atomic Prometheus instruments:
// fast and non-blocking, as the leader's hot paths require.
func (m *Metrics) LeaderObserver() leader.Observer { return leaderObserver{m} }

type leaderObserver struct{ m *Metrics }

// WaiterEvent: a waiter the leader decided must wait raises the gauge
// until it is granted (wait time and hand-off observed) or ends without
// a grant (timed out, gone, leadership lost: the term's waiters all end).
func (o leaderObserver) WaiterEvent(ev leader.WaiterEvent) {
	l := &o.m.leader
	switch ev.Kind {
	case leader.WaiterQueued:
		l.queued.Inc()
	case leader.WaiterGranted:
		l.queued.Dec()
		l.queueWait.Observe(seconds(ev.Waited))
		l.handOff.Observe(seconds(ev.HandOff))
	case leader.WaiterEnded:
		l.queued.Dec()
	}
}

// EntryEvent: the size of each entry proposed, and the hold before it
// (entries that were not held are not in the hold's histogram).
func (o leaderObserver) EntryEvent(ev leader.EntryEvent) {
	o.m.leader.entrySize.Observe(float64(ev.Commands))
	if ev.Held > 0 {
		o.m.leader.entryHeld.Observe(seconds(ev.Held))
	}
}

// ReadRoundEvent: the readers of each confirmation round, confirmed or
// not (a failed round is still a round the followers answered or not).
func (o leaderObserver) ReadRoundEvent(ev leader.ReadRoundEvent) {
	o.m.leader.readRound.Observe(float64(ev.Reads))
}

// ExpiryEvent: lateness of each expiry command proposed (failed ones are
// retried and observed then).
func (o leaderObserver) ExpiryEvent(ev leader.ExpiryEvent) {
	if ev.Err == nil {
		o.m.leader.expiryLate.Observe(seconds(ev.Lateness))
	}
}
