package metrics

import (
	"strconv"
	"sync"
	"time"

	gometrics "github.com/hashicorp/go-metrics/compat"
	gmprom "github.com/hashicorp/go-metrics/compat/prometheus"
	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
)

// hashicorp/raft reports through go-metrics' process-wide global sink.
// The sink is created once per process and bridged into every node's
// registry (a collector may sit in several registries). With several
// nodes in one process (tests) the raft_* series of that sink are the
// process's, not one node's; grackle_raft_* gauges from raft.Stats are
// always per node. Raft's timings are in milliseconds, as go-metrics
// measures them, and its samples are summaries.
var (
	sinkOnce sync.Once
	sink     *gmprom.PrometheusSink
	sinkErr  error
)

func raftSink() (*gmprom.PrometheusSink, error) {
	sinkOnce.Do(func() {
		opts := gmprom.PrometheusOpts{
			// Gauges raft sets rarely (lastRestoreDuration) must not vanish.
			Expiration: 0,
			// The sink registers itself here; the nodes' registries collect it.
			Registerer: prometheus.NewRegistry(),
			Name:       "grackle_raft_sink",
		}
		sink, sinkErr = gmprom.NewPrometheusSinkFrom(opts)
		if sinkErr != nil {
			return
		}
		cfg := gometrics.DefaultConfig(Namespace)
		cfg.EnableHostname = false
		cfg.EnableRuntimeMetrics = false // client_golang's Go collector has them
		cfg.BlockedPrefixes = blockedRaftMetrics
		// Peer-id labelled replication timings: bounded by the cluster's
		// size, kept. (raftnode turns raft's legacy per-peer names off.)
		_, sinkErr = gometrics.NewGlobal(cfg, sink)
	})
	return sink, sinkErr
}

// blockedRaftMetrics are raft's per-RPC timings that cost more than they
// tell: each sample goes into a summary's quantile stream under a lock
// (a few microseconds), and these are taken several times for every
// AppendEntries and heartbeat a node sends or receives: under linearizable
// reads, a leadership confirmation is a heartbeat to every follower, so
// they were about a tenth of a follower's CPU and a twentieth of the
// leader's (CPU profiles under `grackle bench reads`). What they measure
// stays visible: grackle_raft_replication_appendEntries_rpc{peer_id} and
// grackle_raft_rpc_appendEntries* time the write path,
// grackle_leader_read_round_reads counts the confirmation rounds.
// Keys carry the service name (Namespace) first, as go-metrics filters them.
var blockedRaftMetrics = []string{
	Namespace + ".raft.net.",                  // transport: getRPCType, rpcDecode, rpcEnqueue, rpcRespond, per RPC received
	Namespace + ".raft.rpc.processHeartbeat",  // follower, per heartbeat
	Namespace + ".raft.replication.heartbeat", // leader, per heartbeat per follower
	Namespace + ".raft.verify_leader",         // leader, per confirmation round (grackle_leader_read_round_reads counts them)
}

// RegisterRaft bridges raft's go-metrics telemetry into the registry and
// adds per-node gauges read from r at scrape time, plus a count of the
// leader changes this node has seen.
func (m *Metrics) RegisterRaft(r *raft.Raft) error {
	s, err := raftSink()
	if err != nil {
		return err
	}
	if err := m.Registry.Register(s); err != nil {
		return err
	}
	c := &raftCollector{r: r,
		state:   prometheus.NewDesc(Namespace+"_raft_state", "1 for the Raft state this node is in.", []string{"state"}, nil),
		term:    prometheus.NewDesc(Namespace+"_raft_term", "Current Raft term.", nil, nil),
		commit:  prometheus.NewDesc(Namespace+"_raft_commit_index", "Highest log index known committed.", nil, nil),
		applied: prometheus.NewDesc(Namespace+"_raft_applied_index", "Highest log index applied to the state machine.", nil, nil),
		last:    prometheus.NewDesc(Namespace+"_raft_last_log_index", "Last log index stored.", nil, nil),
		snap:    prometheus.NewDesc(Namespace+"_raft_last_snapshot_index", "Log index of the last snapshot.", nil, nil),
		pending: prometheus.NewDesc(Namespace+"_raft_fsm_pending", "Committed batches waiting for the state machine.", nil, nil),
		peers:   prometheus.NewDesc(Namespace+"_raft_voters", "Voters in the latest configuration this node knows.", nil, nil),
		contact: prometheus.NewDesc(Namespace+"_raft_last_contact_seconds", "Seconds since this follower last heard from the leader (0 on the leader, absent before any contact).", nil, nil),
		leader:  prometheus.NewDesc(Namespace+"_raft_leader_known", "1 when this node knows a leader.", nil, nil),
	}
	if err := m.Registry.Register(c); err != nil {
		return err
	}
	changes := prometheus.NewCounter(prometheus.CounterOpts{Namespace: Namespace, Name: "raft_leader_changes_total",
		Help: "Changes of leader this node observed (including to no leader)."})
	if err := m.Registry.Register(changes); err != nil {
		return err
	}
	ch := make(chan raft.Observation, 16)
	r.RegisterObserver(raft.NewObserver(ch, false, func(o *raft.Observation) bool {
		_, ok := o.Data.(raft.LeaderObservation)
		return ok
	}))
	go func() {
		// raft never closes observer channels; this goroutine ends with
		// the process (one per node, blocked on a channel, harmless).
		for range ch {
			changes.Inc()
		}
	}()
	return nil
}

type raftCollector struct {
	r                                                                         *raft.Raft
	state, term, commit, applied, last, snap, pending, peers, contact, leader *prometheus.Desc
}

func (c *raftCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.state, c.term, c.commit, c.applied, c.last, c.snap, c.pending, c.peers, c.contact, c.leader} {
		ch <- d
	}
}

var raftStates = []raft.RaftState{raft.Follower, raft.Candidate, raft.Leader, raft.Shutdown}

func (c *raftCollector) Collect(ch chan<- prometheus.Metric) {
	r := c.r
	st := r.State()
	for _, s := range raftStates {
		v := 0.0
		if s == st {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(c.state, prometheus.GaugeValue, v, stateName(s))
	}
	ch <- prometheus.MustNewConstMetric(c.term, prometheus.GaugeValue, float64(r.CurrentTerm()))
	ch <- prometheus.MustNewConstMetric(c.commit, prometheus.GaugeValue, float64(r.CommitIndex()))
	ch <- prometheus.MustNewConstMetric(c.applied, prometheus.GaugeValue, float64(r.AppliedIndex()))
	ch <- prometheus.MustNewConstMetric(c.last, prometheus.GaugeValue, float64(r.LastIndex()))
	stats := r.Stats()
	if v, err := strconv.ParseUint(stats["last_snapshot_index"], 10, 64); err == nil {
		ch <- prometheus.MustNewConstMetric(c.snap, prometheus.GaugeValue, float64(v))
	}
	if v, err := strconv.ParseUint(stats["fsm_pending"], 10, 64); err == nil {
		ch <- prometheus.MustNewConstMetric(c.pending, prometheus.GaugeValue, float64(v))
	}
	if cf := r.GetConfiguration(); cf.Error() == nil {
		voters := 0
		for _, srv := range cf.Configuration().Servers {
			if srv.Suffrage == raft.Voter {
				voters++
			}
		}
		ch <- prometheus.MustNewConstMetric(c.peers, prometheus.GaugeValue, float64(voters))
	}
	if st == raft.Leader {
		ch <- prometheus.MustNewConstMetric(c.contact, prometheus.GaugeValue, 0)
	} else if lc := r.LastContact(); !lc.IsZero() {
		ch <- prometheus.MustNewConstMetric(c.contact, prometheus.GaugeValue, time.Since(lc).Seconds())
	}
	known := 0.0
	if addr, _ := r.LeaderWithID(); addr != "" {
		known = 1
	}
	ch <- prometheus.MustNewConstMetric(c.leader, prometheus.GaugeValue, known)
}

func stateName(s raft.RaftState) string {
	switch s {
	case raft.Follower:
		return "follower"
	case raft.Candidate:
		return "candidate"
	case raft.Leader:
		return "leader"
	}
	return "shutdown"
}
