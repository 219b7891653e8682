package server_test

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/grackle-coord/grackle/server"
	"github.com/grackle-coord/grackle/server/servertest"
)

// scrape reads a node's /metrics: every sample by its series (name and
// labels as exposed).
func scrape(t *testing.T, addr string) map[string]float64 {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatalf("scrape %s: %v", addr, err)
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		if i := strings.LastIndexByte(line, ' '); i > 0 {
			if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
				out[line[:i]] = v
			}
		}
	}
	return out
}

// statusMembers reads the members of a node's /status, by id.
func statusMembers(t *testing.T, addr string) map[string]map[string]any {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/status")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st struct{ Members []map[string]any }
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]any{}
	for _, m := range st.Members {
		out[m["id"].(string)] = m
	}
	return out
}

// /status and /metrics show the members' health from the same view as
// GetClusterStatus: a stopped member is unreachable on every surface of
// every node within a second or two; the leader adds its replication
// view (contact age, lag) and how many more voter failures the quorum
// takes (none left with one of three down), followers do not.
func TestStatusAndMetricsShowMemberHealth(t *testing.T) {
	c := servertest.Start(t, 3, func(cfg *server.Config) {
		cfg.HTTPAddr = "127.0.0.1:0"
		cfg.MemberProbeTimeout = 5 * time.Second // a live member is slow to answer under -race on a loaded machine
	})
	li := c.WaitLeader()
	fi := c.Follower()
	live := 3 - li - fi
	stopped, liveID := c.Cfgs[fi].NodeID, c.Cfgs[live].NodeID
	series := func(name, id string) string { return name + `{member="` + id + `",suffrage="voter"}` }

	leaderHTTP, liveHTTP := c.Nodes[li].HTTPAddr(), c.Nodes[live].HTTPAddr()
	servertest.Eventually(t, "every member reachable on the leader's /metrics", 20*time.Second, func() bool {
		m := scrape(t, leaderHTTP)
		return m[series("grackle_member_reachable", stopped)] == 1 && m[series("grackle_member_reachable", liveID)] == 1 &&
			m["grackle_voter_failures_tolerated"] == 1
	})
	m := scrape(t, leaderHTTP)
	if _, ok := m[series("grackle_member_replication_lag_entries", liveID)]; !ok {
		t.Errorf("the leader reports no replication lag of %s", liveID)
	}
	if v, ok := m[series("grackle_member_last_contact_seconds", liveID)]; !ok || v > 5 {
		t.Errorf("the leader's last contact with %s: %v (reported: %v)", liveID, v, ok)
	}
	if _, ok := m[series("grackle_member_reachable", c.Cfgs[li].NodeID)]; ok {
		t.Error("the leader reports its own reachability")
	}

	c.StopNode(fi)
	start := time.Now()
	servertest.Eventually(t, "the stopped member unreachable on every surface", 3*time.Second, func() bool {
		lm, fm := scrape(t, leaderHTTP), scrape(t, liveHTTP)
		ls, fs := statusMembers(t, leaderHTTP), statusMembers(t, liveHTTP)
		return lm[series("grackle_member_reachable", stopped)] == 0 && fm[series("grackle_member_reachable", stopped)] == 0 &&
			ls[stopped]["reachability"] == "unreachable" && fs[stopped]["reachability"] == "unreachable"
	})
	t.Logf("unreachable on /status and /metrics of both live nodes %v after the stop", time.Since(start).Round(time.Millisecond))

	// The quorum: voters in contact with the leader within twice the
	// heartbeat timeout (2 s here), so it drops a little later.
	servertest.Eventually(t, "no voter failure left to tolerate", 10*time.Second, func() bool {
		v, ok := scrape(t, leaderHTTP)["grackle_voter_failures_tolerated"]
		return ok && v == 0
	})
	fm := scrape(t, liveHTTP)
	for k := range fm {
		if strings.HasPrefix(k, "grackle_voter_failures_tolerated") || strings.HasPrefix(k, "grackle_member_replication_lag_entries") ||
			strings.HasPrefix(k, "grackle_member_last_contact_seconds") {
			t.Errorf("a follower reports the leader's view: %s", k)
		}
	}
	ls := statusMembers(t, leaderHTTP)
	if d := ls[stopped]; d["last_seen_ms"] == nil || d["replication_contact_ms"] == nil || d["replication_lag_entries"] == nil || d["version"] != nil {
		t.Errorf("leader's /status of the stopped member: %v", d)
	}
	if d := ls[liveID]; d["reachability"] != "reachable" || d["raft_state"] != "follower" || d["version"] == nil || d["suffrage"] != "Voter" {
		t.Errorf("leader's /status of the live follower: %v", d)
	}
	if d := ls[c.Cfgs[li].NodeID]; d["reachability"] != "self" || d["raft_state"] != "leader" {
		t.Errorf("leader's /status of itself: %v", d)
	}
}
