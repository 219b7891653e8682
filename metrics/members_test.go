package metrics_test

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/grackle-coord/grackle/memberhealth"
	"github.com/grackle-coord/grackle/metrics"
)

// The member series as a leader and as a follower report them: each
// other member's reachability from every node, the replication record
// and the quorum's slack from the leader only.
func TestMemberSeries(t *testing.T) {
	at := time.Unix(1000, 0)
	view := memberhealth.View{At: at, Leading: true, Voters: 3, VotersInContact: 2, Members: []memberhealth.Status{
		{Member: memberhealth.Member{ID: "n1", Voter: true}, Reachability: memberhealth.Self},
		{Member: memberhealth.Member{ID: "n2", Voter: true}, Reachability: memberhealth.Reachable,
			Replication: &memberhealth.Replication{LastContact: at.Add(-50 * time.Millisecond), Lag: 3}},
		{Member: memberhealth.Member{ID: "n3", Voter: true}, Reachability: memberhealth.Unreachable,
			Replication: &memberhealth.Replication{LastContact: at.Add(-45 * time.Second), Lag: 1500}},
		{Member: memberhealth.Member{ID: "n4"}, Reachability: memberhealth.Unknown},
	}}
	m := metrics.New()
	if err := m.RegisterMembers(func() memberhealth.View { return view }); err != nil {
		t.Fatal(err)
	}
	want := `
# HELP grackle_member_last_contact_seconds Seconds since the member last answered the leader's AppendEntries (heartbeats or entries); reported by the leader only, for members that answered since it started.
# TYPE grackle_member_last_contact_seconds gauge
grackle_member_last_contact_seconds{member="n2",suffrage="voter"} 0.05
grackle_member_last_contact_seconds{member="n3",suffrage="voter"} 45
# HELP grackle_member_reachable 1 when this node's health probes (about once a second) get an answer from the member, 0 when not; every other member, absent until its first probe ended.
# TYPE grackle_member_reachable gauge
grackle_member_reachable{member="n2",suffrage="voter"} 1
grackle_member_reachable{member="n3",suffrage="voter"} 0
# HELP grackle_member_replication_lag_entries Entries of the leader's log beyond the member's last index as of its last answer (what it lacks, as far as the leader knows); reported by the leader only.
# TYPE grackle_member_replication_lag_entries gauge
grackle_member_replication_lag_entries{member="n2",suffrage="voter"} 3
grackle_member_replication_lag_entries{member="n3",suffrage="voter"} 1500
# HELP grackle_voter_failures_tolerated How many more voters may stop answering before the voters in contact with the leader are no majority (0: one more failure loses the quorum); reported by the leader only.
# TYPE grackle_voter_failures_tolerated gauge
grackle_voter_failures_tolerated 0
`
	names := []string{"grackle_member_reachable", "grackle_member_last_contact_seconds", "grackle_member_replication_lag_entries", "grackle_voter_failures_tolerated"}
	if err := testutil.GatherAndCompare(m.Registry, strings.NewReader(want), names...); err != nil {
		t.Error(err)
	}

	// A follower: its own probes only.
	view = memberhealth.View{At: at, Members: []memberhealth.Status{
		{Member: memberhealth.Member{ID: "n1", Voter: true}, Reachability: memberhealth.Reachable},
		{Member: memberhealth.Member{ID: "n2", Voter: true}, Reachability: memberhealth.Self},
	}}
	want = `
# HELP grackle_member_reachable 1 when this node's health probes (about once a second) get an answer from the member, 0 when not; every other member, absent until its first probe ended.
# TYPE grackle_member_reachable gauge
grackle_member_reachable{member="n1",suffrage="voter"} 1
`
	if err := testutil.GatherAndCompare(m.Registry, strings.NewReader(want), names...); err != nil {
		t.Error(err)
	}
}
