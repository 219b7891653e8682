package metrics

import (
	"syscall"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/grackle-coord/grackle/fsm"
)

// RegisterState adds gauges read from the state machine at scrape time
// (namespaces, semaphores, leases, holders, held permits: the same on
// every node once applied) and the free and total bytes of the file
// system holding dataDir.
func (m *Metrics) RegisterState(f *fsm.FSM, dataDir string) error {
	return m.Registry.Register(&stateCollector{f: f, dir: dataDir,
		ns:         prometheus.NewDesc(Namespace+"_namespaces", "Namespaces in the state machine.", nil, nil),
		sems:       prometheus.NewDesc(Namespace+"_semaphores", "Semaphores in the state machine.", nil, nil),
		leases:     prometheus.NewDesc(Namespace+"_leases", "Leases in the state machine (expired ones until reaped).", nil, nil),
		hold:       prometheus.NewDesc(Namespace+"_holders", "Holds in the state machine.", nil, nil),
		perm:       prometheus.NewDesc(Namespace+"_held_permits", "Permits held, summed over every semaphore.", nil, nil),
		lockLeases: prometheus.NewDesc(Namespace+"_lock_leases", "Lock leases in the state machine (part of grackle_leases).", nil, nil),
		locks:      prometheus.NewDesc(Namespace+"_locks", "Held locks in the state machine.", nil, nil),
		lockHold:   prometheus.NewDesc(Namespace+"_lock_holders", "Lock holds in the state machine.", nil, nil),
		waitGroups: prometheus.NewDesc(Namespace+"_wait_groups", "Wait groups in the state machine, by status (active, finished: completed or expired).", []string{"status"}, nil),
		jobs:       prometheus.NewDesc(Namespace+"_wait_group_completed_jobs", "Completed jobs stored for the wait groups in the state machine.", nil, nil),
		barriers:   prometheus.NewDesc(Namespace+"_barriers", "Barriers in the state machine.", nil, nil),
		free:       prometheus.NewDesc(Namespace+"_data_dir_free_bytes", "Bytes available to Grackle on the data dir's file system.", nil, nil),
		size:       prometheus.NewDesc(Namespace+"_data_dir_size_bytes", "Size of the data dir's file system.", nil, nil),
		stateBytes: prometheus.NewDesc(Namespace+"_state_bytes",
			"Accounted size of the replicated state (records' strings and metadata plus a fixed overhead per record), what --max-state-bytes bounds.", nil, nil),
		quota: prometheus.NewDesc(Namespace+"_state_quota_bytes",
			"The replicated state quota (max_state_bytes); 0: no bound.", nil, nil),
		rejected: prometheus.NewDesc(Namespace+"_fsm_rejected_entries_total",
			"Raft entries the state machine rejected (undecodable, or an op it does not know): each changed nothing; its index is in the ERROR log.", nil, nil),
	})
}

type stateCollector struct {
	f                                        *fsm.FSM
	dir                                      string
	ns, sems, leases, hold, perm, free, size *prometheus.Desc
	lockLeases, locks, lockHold              *prometheus.Desc
	waitGroups, jobs, barriers               *prometheus.Desc
	rejected                                 *prometheus.Desc
	stateBytes, quota                        *prometheus.Desc
}

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.ns, c.sems, c.leases, c.hold, c.perm, c.free, c.size, c.lockLeases, c.locks, c.lockHold,
		c.waitGroups, c.jobs, c.barriers, c.rejected, c.stateBytes, c.quota} {
		ch <- d
	}
}

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	n := c.f.Counts()
	g := func(d *prometheus.Desc, v float64) { ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v) }
	g(c.ns, float64(n.Namespaces))
	g(c.sems, float64(n.Semaphores))
	g(c.leases, float64(n.Leases))
	g(c.hold, float64(n.Holders))
	g(c.perm, float64(c.f.HeldPermits()))
	g(c.lockLeases, float64(n.LockLeases))
	g(c.locks, float64(n.Locks))
	g(c.lockHold, float64(n.LockHolders))
	ch <- prometheus.MustNewConstMetric(c.waitGroups, prometheus.GaugeValue, float64(n.ActiveWaitGroups), "active")
	ch <- prometheus.MustNewConstMetric(c.waitGroups, prometheus.GaugeValue, float64(n.WaitGroups-n.ActiveWaitGroups), "finished")
	g(c.jobs, float64(n.CompletedJobs))
	g(c.barriers, float64(n.Barriers))
	g(c.stateBytes, float64(c.f.StateBytes()))
	quota := c.f.Limits().MaxStateBytes
	if quota < 0 {
		quota = 0
	}
	g(c.quota, float64(quota))
	ch <- prometheus.MustNewConstMetric(c.rejected, prometheus.CounterValue, float64(c.f.RejectedEntries()))
	var st syscall.Statfs_t
	if c.dir != "" && syscall.Statfs(c.dir, &st) == nil {
		g(c.free, float64(st.Bavail)*float64(st.Bsize))
		g(c.size, float64(st.Blocks)*float64(st.Bsize))
	}
}
