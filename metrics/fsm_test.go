package metrics

import (
	"strings"
	"testing"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/grackle-coord/grackle/fsm"
	fsmpb "github.com/grackle-coord/grackle/proto/grackle/fsm/v1"
)

// Commands the leader packs into one Batch entry count as if applied
// one by one.
func TestBatchedCommandsCounted(t *testing.T) {
	m := New()
	o := m.ObserveFSM(fsm.New(fsm.Options{TempDir: t.TempDir(), Applied: m.Applied}))
	enc := func(c *fsmpb.Command) []byte {
		b, err := fsm.Encode(c)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	id := fsm.LeaseIDPrefix + strings.Repeat("a", fsm.MinLeaseIDRandom)
	o.ApplyBatch([]*raft.Log{{Index: 1, Type: raft.LogCommand, Data: enc(&fsmpb.Command{Now: 1, Op: &fsmpb.Command_CreateNamespace{
		CreateNamespace: &fsmpb.CreateNamespace{Name: "n"}}})}})
	batch := &fsmpb.Batch{Commands: [][]byte{
		enc(&fsmpb.Command{Now: 2, Op: &fsmpb.Command_CreateLease{CreateLease: &fsmpb.CreateLease{NamespaceName: "n", LeaseId: id, ProcessId: "p", TtlSeconds: 10}}}),
		enc(&fsmpb.Command{Now: 2, Op: &fsmpb.Command_RefreshLease{RefreshLease: &fsmpb.RefreshLease{NamespaceName: "n", LeaseId: id, TtlSeconds: 10}}}),
		enc(&fsmpb.Command{Now: 2, Op: &fsmpb.Command_RevokeLease{RevokeLease: &fsmpb.RevokeLease{NamespaceName: "n", LeaseId: id}}}),
	}}
	o.ApplyBatch([]*raft.Log{{Index: 2, Type: raft.LogCommand, Data: enc(&fsmpb.Command{Now: 2, Op: &fsmpb.Command_Batch{Batch: batch}})}})
	for name, c := range map[string]float64{"created": testutil.ToFloat64(m.leasesCreated), "refreshed": testutil.ToFloat64(m.leasesRefreshed),
		"revoked": testutil.ToFloat64(m.leasesRevoked)} {
		if c != 1 {
			t.Errorf("leases %s: %v, want 1", name, c)
		}
	}
}

// Entries at or below the start index (the log a restarted node had on
// disk) are replays: counted once, before the restart, not again.
func TestReplayedEntriesNotCounted(t *testing.T) {
	m := New()
	o := m.ObserveFSM(fsm.New(fsm.Options{TempDir: t.TempDir(), Applied: m.Applied}))
	m.SetStartIndex(2)
	enc := func(c *fsmpb.Command) []byte {
		b, err := fsm.Encode(c)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	lease := func(i int) []byte {
		id := fsm.LeaseIDPrefix + strings.Repeat(string(rune('a'+i)), fsm.MinLeaseIDRandom)
		return enc(&fsmpb.Command{Now: 2, Op: &fsmpb.Command_CreateLease{CreateLease: &fsmpb.CreateLease{NamespaceName: "n", LeaseId: id, ProcessId: "p", TtlSeconds: 10}}})
	}
	o.ApplyBatch([]*raft.Log{
		{Index: 1, Type: raft.LogCommand, Data: enc(&fsmpb.Command{Now: 1, Op: &fsmpb.Command_CreateNamespace{CreateNamespace: &fsmpb.CreateNamespace{Name: "n"}}})},
		{Index: 2, Type: raft.LogCommand, Data: lease(0)}, // replayed
		{Index: 3, Type: raft.LogCommand, Data: lease(1)}, // new
	})
	if c := testutil.ToFloat64(m.leasesCreated); c != 1 {
		t.Fatalf("leases created: %v, want 1 (index 2 is a replay, index 3 is new)", c)
	}
}
