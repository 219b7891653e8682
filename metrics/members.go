package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/grackle-coord/grackle/memberhealth"
)

// RegisterMembers adds the members' health, read from view at scrape time
// (the node's memberhealth monitor, what GetClusterStatus and /status
// show). Series are labelled by member id and suffrage:
//
//   - grackle_member_reachable, from every node for every other member:
//     whether its probes (about once a second) get an answer. Every node
//     reports its own view, so a member that died, whose own /metrics is
//     gone with it, is still reported by the others, and a query takes
//     the best view: max by (member).
//   - grackle_member_last_contact_seconds and
//     grackle_member_replication_lag_entries, from the leader only (only
//     it replicates): a new leader reports them within a heartbeat of its
//     election, so max by (member) over every node is the current
//     leader's view.
//   - grackle_voter_failures_tolerated, from the leader only: voters in
//     contact (answered its AppendEntries within twice the heartbeat
//     timeout, itself included) minus a majority of the voters.
func (m *Metrics) RegisterMembers(view func() memberhealth.View) error {
	labels := []string{"member", "suffrage"}
	return m.Registry.Register(&membersCollector{view: view,
		reachable: prometheus.NewDesc(Namespace+"_member_reachable",
			"1 when this node's health probes (about once a second) get an answer from the member, 0 when not; every other member, absent until its first probe ended.", labels, nil),
		contact: prometheus.NewDesc(Namespace+"_member_last_contact_seconds",
			"Seconds since the member last answered the leader's AppendEntries (heartbeats or entries); reported by the leader only, for members that answered since it started.", labels, nil),
		lag: prometheus.NewDesc(Namespace+"_member_replication_lag_entries",
			"Entries of the leader's log beyond the member's last index as of its last answer (what it lacks, as far as the leader knows); reported by the leader only.", labels, nil),
		tolerated: prometheus.NewDesc(Namespace+"_voter_failures_tolerated",
			"How many more voters may stop answering before the voters in contact with the leader are no majority (0: one more failure loses the quorum); reported by the leader only.", nil, nil),
	})
}

type membersCollector struct {
	view                               func() memberhealth.View
	reachable, contact, lag, tolerated *prometheus.Desc
}

func (c *membersCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.reachable, c.contact, c.lag, c.tolerated} {
		ch <- d
	}
}

func (c *membersCollector) Collect(ch chan<- prometheus.Metric) {
	v := c.view()
	for _, s := range v.Members {
		suffrage := "nonvoter"
		if s.Voter {
			suffrage = "voter"
		}
		g := func(d *prometheus.Desc, x float64) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, x, s.ID, suffrage)
		}
		switch s.Reachability {
		case memberhealth.Reachable:
			g(c.reachable, 1)
		case memberhealth.Unreachable:
			g(c.reachable, 0)
		}
		if r := s.Replication; r != nil {
			g(c.contact, v.At.Sub(r.LastContact).Seconds())
			g(c.lag, float64(r.Lag))
		}
	}
	if v.Leading {
		ch <- prometheus.MustNewConstMetric(c.tolerated, prometheus.GaugeValue, float64(v.FailuresTolerated()))
	}
}
