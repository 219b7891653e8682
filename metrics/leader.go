package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// leaderMetrics are measured by the leader's work (waiter queues, lease
// expiry); on a follower they stay at zero.
type leaderMetrics struct {
	queued     prometheus.Gauge
	queueWait  prometheus.Histogram
	handOff    prometheus.Histogram
	expiryLate prometheus.Histogram
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
		handOff:    h("leader_handoff_seconds", "From the commit that freed permits to the commit of the next grant on that semaphore."),
		expiryLate: h("leader_expiry_lateness_seconds", "From a lease's expires_at to the commit that reaped it."),
	}
	reg.MustRegister(l.queued)
	return l
}

// Waiters sets the number of queued waiters.
func (m *Metrics) Waiters(n int) { m.leader.queued.Set(float64(n)) }

// QueueWait records one grant's time in the queue.
func (m *Metrics) QueueWait(d time.Duration) { m.leader.queueWait.Observe(seconds(d)) }

// HandOff records the time from a release's commit to the next grant.
func (m *Metrics) HandOff(d time.Duration) { m.leader.handOff.Observe(seconds(d)) }

// ExpiryLateness records how late one lease was reaped.
func (m *Metrics) ExpiryLateness(d time.Duration) { m.leader.expiryLate.Observe(seconds(d)) }
