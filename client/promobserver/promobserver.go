// Package promobserver exports the Go client's acquire events
// (client.Observer) as Prometheus metrics:
//
//	grackle_client_acquire_started_total{namespace,semaphore}            counter
//	grackle_client_acquire_rejected_total{namespace,semaphore,reason}    counter (reason: unavailable, weight_exceeds_permits)
//	grackle_client_acquire_duration_seconds{namespace,semaphore,result}  histogram (result: acquired, timed_out, rejected, error)
//	grackle_client_acquires_in_flight{namespace,semaphore}               gauge
//
// The histogram's _count is the number of finished acquires by result.
// The labels name every semaphore a process acquires: with very many of
// them, use WithoutSemaphoreLabel.
//
//	obs, err := promobserver.New(prometheus.DefaultRegisterer)
//	cli, err := client.New(ctx, client.Config{Endpoints: eps, Observer: obs})
package promobserver

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/grackle-coord/grackle/client"
)

// Observer is a client.Observer that updates Prometheus metrics.
type Observer struct {
	started  *prometheus.CounterVec
	rejected *prometheus.CounterVec
	duration *prometheus.HistogramVec
	inFlight *prometheus.GaugeVec
	noSem    bool
}

var _ client.Observer = (*Observer)(nil)

// Option adjusts New.
type Option func(*options)

type options struct {
	noSem   bool
	buckets []float64
}

// WithoutSemaphoreLabel drops the semaphore label (namespace only), for
// processes that acquire very many distinct semaphores.
func WithoutSemaphoreLabel() Option { return func(o *options) { o.noSem = true } }

// WithBuckets sets the duration histogram's buckets in seconds (default:
// 1 ms to about 5 min, acquires may wait that long).
func WithBuckets(b []float64) Option { return func(o *options) { o.buckets = b } }

// DefaultBuckets are the duration histogram's default buckets (seconds).
var DefaultBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300}

// New creates the metrics and registers them with reg.
func New(reg prometheus.Registerer, opts ...Option) (*Observer, error) {
	o := options{buckets: DefaultBuckets}
	for _, f := range opts {
		f(&o)
	}
	labels := []string{"namespace", "semaphore"}
	if o.noSem {
		labels = []string{"namespace"}
	}
	with := func(extra string) []string { return append(append([]string(nil), labels...), extra) }
	obs := &Observer{
		noSem: o.noSem,
		started: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "grackle_client_acquire_started_total", Help: "Acquires (Acquire, TryAcquire) begun by this process.",
		}, labels),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "grackle_client_acquire_rejected_total", Help: "Acquires refused without waiting, by reason (unavailable, weight_exceeds_permits).",
		}, with("reason")),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "grackle_client_acquire_duration_seconds", Help: "Duration of finished acquires, by result (acquired, timed_out, rejected, error).",
			Buckets: o.buckets,
		}, with("result")),
		inFlight: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "grackle_client_acquires_in_flight", Help: "Acquires under way (waiting included).",
		}, labels),
	}
	for _, c := range []prometheus.Collector{obs.started, obs.rejected, obs.duration, obs.inFlight} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return obs, nil
}

func (o *Observer) labels(e client.AcquireEvent, extra ...string) []string {
	l := []string{e.Namespace, e.Semaphore}
	if o.noSem {
		l = l[:1]
	}
	return append(l, extra...)
}

// AcquireStart implements client.Observer.
func (o *Observer) AcquireStart(e client.AcquireStartEvent) {
	o.started.WithLabelValues(o.labels(e.AcquireEvent)...).Inc()
	o.inFlight.WithLabelValues(o.labels(e.AcquireEvent)...).Inc()
}

// AcquireRejected implements client.Observer.
func (o *Observer) AcquireRejected(e client.AcquireRejectedEvent) {
	o.rejected.WithLabelValues(o.labels(e.AcquireEvent, string(e.Reason))...).Inc()
}

// AcquireStop implements client.Observer.
func (o *Observer) AcquireStop(e client.AcquireStopEvent) {
	o.inFlight.WithLabelValues(o.labels(e.AcquireEvent)...).Dec()
	o.duration.WithLabelValues(o.labels(e.AcquireEvent, string(e.Result))...).Observe(e.Duration.Seconds())
}
