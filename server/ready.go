package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/grackle-coord/grackle/acl"
	"github.com/grackle-coord/grackle/apierr"
	"github.com/grackle-coord/grackle/memberhealth"
	"github.com/grackle-coord/grackle/version"
)

// DefaultReadyMaxLag is how many entries a follower's applied index may
// trail the commit index it last heard of and still be ready.
const DefaultReadyMaxLag = 1000

// Ready says whether this node should take traffic: it is a member of
// the Raft configuration, knows a leader, heard from it recently (a
// follower), and has applied within ReadyMaxLag entries of the commit
// index. nil means ready; the error says why not. It backs /readyz and
// the gRPC health status of grackle.v1.GrackleService.
func (s *Server) Ready() error {
	r := s.Node.Raft
	if err := s.Node.DiskFull(); err != nil {
		return err
	}
	cf := r.GetConfiguration()
	if err := cf.Error(); err != nil {
		return fmt.Errorf("raft configuration: %w", err)
	}
	member := false
	for _, srv := range cf.Configuration().Servers {
		member = member || string(srv.ID) == s.cfg.NodeID
	}
	if !member {
		return fmt.Errorf("not a member of the cluster (yet)")
	}
	addr, id := r.LeaderWithID()
	if addr == "" {
		return fmt.Errorf("no leader known")
	}
	if r.State() != raft.Leader {
		// A follower cut off keeps its last leader until its heartbeat
		// timeout fires; do not wait for that.
		if lc := r.LastContact(); lc.IsZero() || time.Since(lc) > s.cfg.HeartbeatTimeout {
			return fmt.Errorf("no contact with leader %s for over %s", id, s.cfg.HeartbeatTimeout)
		}
	}
	commit, applied := r.CommitIndex(), s.FSM.AppliedIndex()
	if raftApplied := r.AppliedIndex(); raftApplied > applied {
		applied = raftApplied // config and noop entries are applied by raft, not the FSM
	}
	if commit > applied && commit-applied > s.readyMaxLag() {
		return fmt.Errorf("applied index %d is %d behind commit index %d (bound %d)", applied, commit-applied, commit, s.readyMaxLag())
	}
	return nil
}

func (s *Server) readyMaxLag() uint64 {
	if s.cfg.ReadyMaxLag > 0 {
		return s.cfg.ReadyMaxLag
	}
	return DefaultReadyMaxLag
}

// opsRoutes adds /readyz and /status.
//
// /status shows what GetClusterStatus does (members, their addresses,
// indexes) and more, so with access control on it takes the same rule:
// any valid token, sent as the web view sends it (Authorization: Bearer
// <secret>), and open before the cluster is bootstrapped.
func (s *Server) opsRoutes(mux *http.ServeMux) {
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if err := s.Ready(); err != nil {
			http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/status", func(w http.ResponseWriter, r *http.Request) {
		if err := s.checkHTTPToken(r, statusMethod); err != nil {
			writeRefusal(w, err)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		b, _ := json.MarshalIndent(s.status(), "", "  ")
		w.Write(append(b, '\n'))
	})
}

// statusMethod is the gRPC call whose access rule /status follows.
const statusMethod = "/grackle.v1.ClusterService/GetClusterStatus"

// checkHTTPToken checks an HTTP request's bearer token (the Authorization
// header) against method's rule when access control is on.
func (s *Server) checkHTTPToken(r *http.Request, method string) error {
	return s.checkHTTPNeed(r, method, acl.NeedFor(method, nil))
}

// checkHTTPNeed checks an HTTP request's bearer token against need when
// access control is on; method names what was asked in a refusal.
func (s *Server) checkHTTPNeed(r *http.Request, method string, need acl.Need) error {
	if !s.cfg.ACL {
		return nil
	}
	ctx := r.Context()
	if a := r.Header.Get("Authorization"); a != "" {
		ctx = metadata.NewIncomingContext(ctx, metadata.Pairs(acl.MetadataKey, a))
	}
	return s.acl.Check(ctx, method, need)
}

// writeRefusal answers an access refusal as the web view's API does:
// JSON {code, reason, message}, 401 without a valid token, 403 without
// the right, 503 when this node cannot tell yet (not caught up). A
// missing token is told how an HTTP client sends one (the checker's own
// words name the CLI's flag).
func writeRefusal(w http.ResponseWriter, err error) {
	st := status.Convert(err)
	msg := st.Message()
	if apierr.ReasonOf(err) == acl.ReasonTokenMissing {
		msg = "access control is on: send an ACL token in the header Authorization: Bearer <secret>"
	}
	code := http.StatusForbidden
	switch st.Code() {
	case codes.Unauthenticated:
		code = http.StatusUnauthorized
		w.Header().Set("WWW-Authenticate", `Bearer realm="grackle"`)
	case codes.Unavailable:
		code = http.StatusServiceUnavailable
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false) // "<secret>" as written, for a person reading curl's output
	_ = enc.Encode(map[string]string{"code": st.Code().String(), "reason": apierr.ReasonOf(err), "message": msg})
}

// status is /status: JSON objects whose keys encoding/json writes sorted,
// so the output is stable from one call to the next.
func (s *Server) status() map[string]any {
	stats := s.Node.Raft.Stats()
	delete(stats, "latest_configuration") // a Go-formatted struct dump; see members
	rs := map[string]any{}
	for k, v := range stats {
		if n, err := strconv.ParseUint(v, 10, 64); err == nil {
			rs[k] = n
		} else {
			rs[k] = v
		}
	}
	var members []map[string]any
	if cf := s.Node.Raft.GetConfiguration(); cf.Error() == nil {
		health := s.MemberHealth()
		for _, srv := range cf.Configuration().Servers {
			m := map[string]any{"id": string(srv.ID), "raft_address": string(srv.Address), "suffrage": srv.Suffrage.String()}
			if st, ok := health.Member(string(srv.ID)); ok {
				statusHealth(m, st, health.At)
			}
			members = append(members, m)
		}
	}
	sort.Slice(members, func(i, j int) bool { return members[i]["id"].(string) < members[j]["id"].(string) })
	c := s.FSM.Counts()
	ready, why := true, ""
	if err := s.Ready(); err != nil {
		ready, why = false, err.Error()
	}
	_, leader := s.Node.Raft.LeaderWithID()
	return map[string]any{
		"node_id":           s.cfg.NodeID,
		"version":           version.Get(),
		"leader_id":         string(leader),
		"ready":             ready,
		"not_ready":         why,
		"raft":              rs,
		"members":           members,
		"state":             map[string]int{"namespaces": c.Namespaces, "semaphores": c.Semaphores, "leases": c.Leases, "holders": c.Holders},
		"applied_index":     s.FSM.AppliedIndex(),
		"leader_clock_skew": s.skew(),
	}
}

// skew is this node's wall clock minus the leader's stamped now
// (followers only; see leader.Skew and docs/CLOCKS.md); nil when unknown.
func (s *Server) skew() map[string]int64 {
	sk := s.API.Leader().Skew()
	if sk.At.IsZero() {
		return nil
	}
	return map[string]int64{"offset_ms": sk.Offset.Milliseconds(), "age_ms": time.Since(sk.At).Milliseconds()}
}

// statusHealth adds a member's health (package memberhealth, what
// GetClusterStatus shows) to its /status entry: reachability, its own
// raft state and version when it answers, how long ago it last answered,
// and the leader's view of its replication when this node leads.
func statusHealth(m map[string]any, st memberhealth.Status, at time.Time) {
	m["reachability"] = string(st.Reachability)
	if a := st.Answer; a != nil {
		m["raft_state"], m["version"], m["applied_index"] = a.RaftState, a.Version, a.AppliedIndex
	}
	if !st.LastSeen.IsZero() {
		m["last_seen_ms"] = at.Sub(st.LastSeen).Milliseconds()
	}
	if r := st.Replication; r != nil {
		m["replication_contact_ms"], m["replication_lag_entries"] = at.Sub(r.LastContact).Milliseconds(), r.Lag
	}
}
