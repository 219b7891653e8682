package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
)

// Sample values from the README's tour.
const (
	seedCreated = int64(1695826239671432000) // 2023-09-27T14:50:39.671Z, 4m20s before testNow
	seedExpires = int64(1695826299671432000) // 60s later
)

func seedSemaphore() *pb.Semaphore {
	return &pb.Semaphore{
		Name: "partner_1", Description: "Partner 1 API", Permits: 20, ActiveHolds: 3, ActiveHoldersCount: 1,
		Version: 1, CreatedAt: seedCreated, UpdatedAt: seedCreated, LastActivityAt: seedCreated,
	}
}

func renderString(t *testing.T, format string, v view) (stdout, stderr string) {
	t.Helper()
	var out, errw bytes.Buffer
	if err := render(&out, &errw, format, testNow, v); err != nil {
		t.Fatal(err)
	}
	return out.String(), errw.String()
}

func TestFmtTime(t *testing.T) {
	for _, tc := range []struct {
		ns   int64
		want string
	}{
		{0, "-"},
		{seedCreated, "2023-09-27T14:50:39Z (4m20s ago)"},
		{testNow.Add(45 * time.Second).UnixNano(), "2023-09-27T14:55:45Z (in 45s)"},
		{testNow.Add(-250 * time.Millisecond).UnixNano(), "2023-09-27T14:54:59Z (250ms ago)"},
		{testNow.Add(-3*time.Hour - 4*time.Minute).UnixNano(), "2023-09-27T11:51:00Z (3h04m ago)"},
		{testNow.Add(-50 * time.Hour).UnixNano(), "2023-09-25T12:55:00Z (2d02h ago)"},
	} {
		if got := fmtTime(tc.ns, testNow); got != tc.want {
			t.Errorf("fmtTime(%d) = %q, want %q", tc.ns, got, tc.want)
		}
	}
}

func TestFmtMetadata(t *testing.T) {
	if got := fmtMetadata(map[string]string{"z": "1", "a": "x=y", "m": ""}); got != "a=x=y, m=, z=1" {
		t.Errorf("got %q", got)
	}
	if got := fmtMetadata(nil); got != "" {
		t.Errorf("nil: got %q", got)
	}
}

func TestSemaphoreTable(t *testing.T) {
	s := seedSemaphore()
	s.Metadata = map[string]string{"owner": "team-a", "tier": "gold"}
	out, _ := renderString(t, "table", semaphoreView(&pb.GetSemaphoreResponse{Semaphore: s}, s))
	want := `Name:           partner_1
Description:    Partner 1 API
Permits:        20
Active holds:   3 (17 free)
Holders:        1
Metadata:       owner=team-a, tier=gold
Version:        1
Created:        2023-09-27T14:50:39Z (4m20s ago)
Updated:        2023-09-27T14:50:39Z (4m20s ago)
Last activity:  2023-09-27T14:50:39Z (4m20s ago)
`
	if out != want {
		t.Errorf("got\n%s\nwant\n%s", out, want)
	}
}

func TestListTableWithNextPage(t *testing.T) {
	resp := &pb.ListSemaphoresResponse{
		Semaphores: []*pb.Semaphore{
			seedSemaphore(),
			{Name: "partner_2", Permits: 5, Version: 3, LastActivityAt: testNow.Add(-2 * time.Second).UnixNano(),
				Description: "tab\tand a description far too long for a list column"},
		},
		NextPaginationToken: "tok-2",
	}
	out, errOut := renderString(t, "table", semaphoresView(resp))
	want := `NAME       PERMITS  HOLDS  HOLDERS  VERSION  LAST ACTIVITY                     DESCRIPTION
partner_1  20       3      1        1        2023-09-27T14:50:39Z (4m20s ago)  Partner 1 API
partner_2  5        0      0        3        2023-09-27T14:54:58Z (2s ago)     tab and a description far too long for …

next page: --page-token tok-2
`
	if out != want || errOut != "" {
		t.Errorf("got\n%s\nwant\n%s\nstderr %q", out, want, errOut)
	}

	// -o id: one name a line on stdout, the token on stderr.
	out, errOut = renderString(t, "id", semaphoresView(resp))
	if out != "partner_1\npartner_2\n" || errOut != "next page: --page-token tok-2\n" {
		t.Errorf("id: stdout %q stderr %q", out, errOut)
	}

	// Last page: no token line.
	resp.NextPaginationToken = ""
	out, _ = renderString(t, "table", semaphoresView(resp))
	if strings.Contains(out, "next page") {
		t.Errorf("last page prints a token:\n%s", out)
	}
}

func TestAcquireTable(t *testing.T) {
	resp := &pb.AcquireSemaphoreResponse{
		Semaphore: seedSemaphore(),
		Outcome:   pb.AcquireOutcome_ACQUIRE_OUTCOME_ACQUIRED,
		Holder: &pb.SemaphoreHolder{LeaseId: "ls_NfKKeiPbP18NFeU3lLGrRWWgDJRB", ProcessId: "host-123/pid-4567", Weight: 3,
			LockedAt: seedCreated, ExpiresAt: testNow.Add(55 * time.Second).UnixNano(), FencingToken: 42,
			Metadata: map[string]string{"job": "7"}},
	}
	out, _ := renderString(t, "table", acquireView(resp))
	want := `Outcome:          ACQUIRED
Fencing token:    42
Lease ID:         ls_NfKKeiPbP18NFeU3lLGrRWWgDJRB
Process ID:       host-123/pid-4567
Weight:           3
Locked:           2023-09-27T14:50:39Z (4m20s ago)
Expires:          2023-09-27T14:55:55Z (in 55s)
Holder metadata:  job=7
Semaphore:        partner_1
Permits:          20
Active holds:     3 (17 free)
Holders:          1
`
	if out != want {
		t.Errorf("got\n%s\nwant\n%s", out, want)
	}
	if out, _ := renderString(t, "id", acquireView(resp)); out != "42\n" {
		t.Errorf("id: %q", out)
	}
	resp.Outcome, resp.Holder = pb.AcquireOutcome_ACQUIRE_OUTCOME_TIMED_OUT, nil
	if out, _ := renderString(t, "id", acquireView(resp)); out != "" {
		t.Errorf("id when not acquired: %q", out)
	}
}

func TestClusterStatusTable(t *testing.T) {
	ms := func(v int64) *int64 { return &v }
	entries := func(v uint64) *uint64 { return &v }
	resp := &pb.GetClusterStatusResponse{
		LeaderId: "n1", LeaderAddress: "10.0.0.1:7420", Term: 3, CommitIndex: 120, AppliedIndex: 119,
		Members: []*pb.Member{
			{NodeId: "n1", RaftAddress: "10.0.0.1:7421", GrpcAddress: "10.0.0.1:7420", Suffrage: "voter", State: "leader",
				Reachability: "self", AppliedIndex: 119, Version: "v1.2.0"},
			{NodeId: "n2", RaftAddress: "10.0.0.2:7421", GrpcAddress: "10.0.0.2:7420", Suffrage: "voter", State: "follower", LastContactMs: 12,
				Reachability: "reachable", AppliedIndex: 118, Version: "v1.1.0", LastSeenMs: ms(300), ReplicationContactMs: ms(40), ReplicationLagEntries: entries(2)},
			{NodeId: "n3", RaftAddress: "10.0.0.3:7421", GrpcAddress: "10.0.0.3:7420", Suffrage: "voter", State: "unreachable", LastContactMs: 45000,
				Reachability: "unreachable", LastSeenMs: ms(44000), ReplicationContactMs: ms(45000), ReplicationLagEntries: entries(1500)},
			{NodeId: "n4", RaftAddress: "10.0.0.4:7421", GrpcAddress: "10.0.0.4:7420", Suffrage: "nonvoter", State: "unreachable", LastContactMs: -1,
				Reachability: "unreachable"},
		},
	}
	out, _ := renderString(t, "table", clusterStatusView(resp))
	want := `Leader:         n1 (10.0.0.1:7420)
Term:           3
Commit index:   120
Applied index:  119

NODE ID  SUFFRAGE  STATE        RAFT ADDRESS   GRPC ADDRESS   LAST CONTACT  LAG   APPLIED  VERSION
n1       voter     leader       10.0.0.1:7421  10.0.0.1:7420  -             -     119      v1.2.0
n2       voter     follower     10.0.0.2:7421  10.0.0.2:7420  12ms ago      2     118      v1.1.0
n3       voter     unreachable  10.0.0.3:7421  10.0.0.3:7420  45s ago       1500  -        -
n4       nonvoter  unreachable  10.0.0.4:7421  10.0.0.4:7420  -             -     -        -
`
	if out != want {
		t.Errorf("got\n%s\nwant\n%s", out, want)
	}
}

func TestJSONOutput(t *testing.T) {
	lease := &pb.SemaphoreLease{LeaseId: "ls_NfKKeiPbP18NFeU3lLGrRWWgDJRB", ProcessId: "host-123/pid-4567", TtlSeconds: 60,
		CreatedAt: seedCreated, ExpiresAt: seedExpires}
	resp := &pb.CreateSemaphoreLeaseResponse{Lease: lease}
	out, _ := renderString(t, "json", leaseView(resp, lease))
	want := `{
  "lease": {
    "created_at": "1695826239671432000",
    "created_at_rfc3339": "2023-09-27T14:50:39.671432Z",
    "expires_at": "1695826299671432000",
    "expires_at_rfc3339": "2023-09-27T14:51:39.671432Z",
    "lease_id": "ls_NfKKeiPbP18NFeU3lLGrRWWgDJRB",
    "process_id": "host-123/pid-4567",
    "ttl_seconds": 60
  }
}
`
	if out != want {
		t.Errorf("got\n%s\nwant\n%s", out, want)
	}

	// Acquire: enum as its name, unset fields present (scripts get 0, not
	// null), counts as numbers, an unset message as null.
	acq := &pb.AcquireSemaphoreResponse{Semaphore: &pb.Semaphore{Name: "partner_1", Permits: 20}, Outcome: pb.AcquireOutcome_ACQUIRE_OUTCOME_UNAVAILABLE}
	out, _ = renderString(t, "json", acquireView(acq))
	var m map[string]any
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	if m["outcome"] != "ACQUIRE_OUTCOME_UNAVAILABLE" || m["semaphore"].(map[string]any)["active_holds"] != float64(0) ||
		m["semaphore"].(map[string]any)["permits"] != float64(20) || m["holder"] != nil {
		t.Errorf("got %s", out)
	}

	// A delete says whether something existed.
	out, _ = renderString(t, "json", doneView(&pb.DeleteNamespaceResponse{Existed: true}, "deleted"))
	if out != "{\n  \"existed\": true\n}\n" {
		t.Errorf("delete: %q", out)
	}
	out, _ = renderString(t, "table", doneView(&pb.DeleteNamespaceResponse{}, `namespace "x" deleted`))
	if out != "namespace \"x\" deleted\n" {
		t.Errorf("delete table: %q", out)
	}
}

// -o template runs over the same object as -o json.
func TestTemplateOutput(t *testing.T) {
	s := &pb.Semaphore{Name: "partner_1", Permits: 20, ActiveHolds: 3, Metadata: map[string]string{"team": "payments"}, LastActivityAt: seedCreated}
	v := semaphoreView(&pb.GetSemaphoreResponse{Semaphore: s}, s)
	out, _ := renderString(t, "template={{.semaphore.name}} {{.semaphore.permits}} {{.semaphore.metadata.team}} {{.semaphore.last_activity_at_rfc3339}}", v)
	if out != "partner_1 20 payments 2023-09-27T14:50:39.671432Z\n" {
		t.Fatalf("got %q", out)
	}
	// Counts are numbers a template can compare.
	out, _ = renderString(t, `template={{if gt .semaphore.active_holds 2}}busy{{else}}free{{end}} {{len .semaphore.metadata}}`, v)
	if out != "busy 1\n" {
		t.Fatalf("got %q", out)
	}
	// A field that does not exist is an error (exit 2), not "<no value>".
	var buf bytes.Buffer
	err := render(&buf, &buf, "template={{.semaphore.nope}}", testNow, v)
	var ee *exitError
	if !errors.As(err, &ee) || ee.code != exitUsage {
		t.Fatalf("missing key: %v", err)
	}
}
