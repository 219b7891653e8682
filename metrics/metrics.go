// Package metrics exposes a Grackle node's Prometheus metrics: per-RPC
// counts and latency (a gRPC interceptor), the state machine's sizes (a
// collector reading the FSM at scrape time), events counted as commands
// apply (an observing raft.FSM wrapper), Raft's own go-metrics telemetry
// bridged through go-metrics' Prometheus sink plus gauges from
// raft.Stats, the leader's queue and latency histograms, and build info.
//
// Every series is named grackle_*. No label takes a value from user
// input (no namespace, semaphore or lease names): label sets stay bounded
// however many semaphores exist. See DESIGN.md for the list.
package metrics

import (
	"context"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"

	"github.com/grackle-coord/grackle/internal/peerconn"
	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
	"github.com/grackle-coord/grackle/version"
)

// Namespace is the prefix of every Grackle series.
const Namespace = "grackle"

// Metrics is one node's registry and the instruments Grackle updates.
type Metrics struct {
	Registry *prometheus.Registry

	grpc *rpcMetrics

	acquireOutcomes *prometheus.CounterVec
	// outcome counters, resolved once (indexed like acquireOutcomeNames)
	outcomes [len(acquireOutcomeNames)]prometheus.Counter

	grants, releases                                             prometheus.Counter
	lockGrants, lockReleases                                     prometheus.Counter
	jobsCompleted, barrierTrips, waitGroupsFinished              prometheus.Counter
	leasesCreated, leasesRefreshed, leasesRevoked, leasesExpired prometheus.Counter
	snapshotFailures                                             prometheus.Counter
	snapshotBytes                                                prometheus.Gauge
	// startIndex: applied entries up to it are replays (SetStartIndex).
	startIndex atomic.Uint64

	leader leaderMetrics
}

// New creates a node's registry with the Go runtime and process
// collectors, build info, and the RPC and event instruments.
func New() *Metrics {
	reg := prometheus.NewRegistry()
	m := &Metrics{Registry: reg}
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	bi := version.Get()
	buildInfo := prometheus.NewGauge(prometheus.GaugeOpts{Namespace: Namespace, Name: "build_info",
		Help:        "Always 1; the labels say which build this node runs.",
		ConstLabels: prometheus.Labels{"version": bi.Version, "revision": bi.Revision, "go_version": bi.GoVersion}})
	buildInfo.Set(1)
	reg.MustRegister(buildInfo)

	m.grpc = newRPCMetrics(reg, []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300})

	m.acquireOutcomes = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "acquire_outcomes_total",
		Help: "AcquireSemaphore calls answered by this node to its own clients, by outcome (acquired, unavailable, timed_out, error)."},
		[]string{"outcome"})
	for i, o := range acquireOutcomeNames {
		m.outcomes[i] = m.acquireOutcomes.WithLabelValues(o)
	}
	counter := func(name, help string) prometheus.Counter {
		c := prometheus.NewCounter(prometheus.CounterOpts{Namespace: Namespace, Name: name, Help: help})
		reg.MustRegister(c)
		return c
	}
	// Each applied entry once: not again when a restarted node replays
	// the log it had on disk (Applied).
	const applied = " applied by this node's state machine since it started (entries it replays from its own log at a restart are not counted again)."
	m.grants = counter("grants_total", "Holds granted (direct acquires and queued grants),"+applied)
	m.releases = counter("releases_total", "Releases that dropped a hold,"+applied)
	m.lockGrants = counter("lock_grants_total", "Lock holds granted (direct acquires, re-acquires, mode changes and queued grants),"+applied)
	m.lockReleases = counter("lock_releases_total", "ReleaseLock calls that dropped a hold,"+applied)
	m.jobsCompleted = counter("wait_group_jobs_completed_total", "New wait-group jobs completed (retried ones count once),"+applied)
	m.waitGroupsFinished = counter("wait_groups_finished_total", "Wait groups that became COMPLETED or EXPIRED,"+applied)
	m.barrierTrips = counter("barrier_trips_total", "Barrier generations tripped (by a last arrival or an update),"+applied)
	m.leasesCreated = counter("leases_created_total", "Leases created,"+applied)
	m.leasesRefreshed = counter("leases_refreshed_total", "Lease refreshes that extended a live lease,"+applied)
	m.leasesRevoked = counter("leases_revoked_total", "Leases revoked by a client,"+applied)
	m.leasesExpired = counter("leases_expired_total", "Leases reaped because they expired (by the expiry timer or a late refresh),"+applied)
	m.snapshotFailures = counter("fsm_snapshot_failures_total", "State machine snapshots that failed to be written.")
	m.snapshotBytes = prometheus.NewGauge(prometheus.GaugeOpts{Namespace: Namespace, Name: "fsm_snapshot_size_bytes",
		Help: "Size of the last state machine snapshot this node wrote."})
	reg.MustRegister(m.acquireOutcomes, m.snapshotBytes)
	m.leader = newLeaderMetrics(reg)
	return m
}

// Handler serves the registry in the Prometheus exposition format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{Registry: m.Registry})
}

// InitializeRPCs creates the per-method series of every registered
// service at zero, so that rates exist before the first call.
//
// Call it once every service is registered and before the server serves:
// it also resolves each method's series once, so that a call does not look
// them up by label values.
func (m *Metrics) InitializeRPCs(s *grpc.Server) { m.grpc.initialize(s) }

// UnaryInterceptor counts and times every unary RPC by method and code,
// and counts AcquireSemaphore outcomes.
func (m *Metrics) UnaryInterceptor() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		resp, err := m.grpc.unary(ctx, req, info, handler)
		if info.FullMethod == pb.GrackleService_AcquireSemaphore_FullMethodName && !forwarded(ctx) {
			m.outcomes[acquireOutcome(resp, err)].Inc()
		}
		return resp, err
	}
}

// StreamInterceptor counts and times every streaming RPC.
func (m *Metrics) StreamInterceptor() grpc.StreamServerInterceptor { return m.grpc.stream }

// forwarded: a call a follower forwarded to the leader; outcome counters
// skip those so that one client call counts once in the cluster.
func forwarded(ctx context.Context) bool {
	return peerconn.Forwarded(ctx)
}

// acquireOutcomeNames are the outcome label values, in the order
// acquireOutcome returns their index.
var acquireOutcomeNames = [...]string{"acquired", "unavailable", "timed_out", "error"}

func acquireOutcome(resp any, err error) int {
	const acquired, unavailable, timedOut, failed = 0, 1, 2, 3
	if err != nil {
		return failed
	}
	r, _ := resp.(*pb.AcquireSemaphoreResponse)
	switch r.GetOutcome() {
	case pb.AcquireOutcome_ACQUIRE_OUTCOME_ACQUIRED:
		return acquired
	case pb.AcquireOutcome_ACQUIRE_OUTCOME_UNAVAILABLE:
		return unavailable
	case pb.AcquireOutcome_ACQUIRE_OUTCOME_TIMED_OUT:
		return timedOut
	}
	return failed
}

// latencyBuckets are for the leader's queue and hand-off histograms:
// from 100 µs to several minutes.
var latencyBuckets = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300}

func seconds(d time.Duration) float64 { return d.Seconds() }
