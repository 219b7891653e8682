package server

import (
	"bytes"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/grackle-coord/grackle/fsm"
	fsmpb "github.com/grackle-coord/grackle/proto/grackle/fsm/v1"
)

// The audit trail covers locks: a DeleteLock that dropped holders (an
// operator's force release), and the locks a lease revoke or an expiry
// freed; a DeleteLock of a lock nobody held writes nothing.
func TestAuditLines(t *testing.T) {
	var buf bytes.Buffer
	a := &auditor{log: hclog.New(&hclog.LoggerOptions{Output: &buf, Level: hclog.Info, JSONFormat: true})}
	del := &fsmpb.Command{Op: &fsmpb.Command_DeleteLock{DeleteLock: &fsmpb.DeleteLock{NamespaceName: "ns", LockName: "orders/eu"}}}
	a.line(7, del, &fsm.Result{Released: true, FreedLocks: []fsm.LockKey{{Namespace: "ns", Lock: "orders/eu"}}})
	a.line(8, del, &fsm.Result{})
	a.line(9, &fsmpb.Command{Op: &fsmpb.Command_RevokeLease{RevokeLease: &fsmpb.RevokeLease{NamespaceName: "ns", LeaseId: "ll_aaaaaaaaaaaaaaaaaaaa"}}},
		&fsm.Result{FreedLocks: []fsm.LockKey{{Namespace: "ns", Lock: "a"}, {Namespace: "ns", Lock: "b"}}})
	a.line(10, &fsmpb.Command{Op: &fsmpb.Command_ExpireLeases{ExpireLeases: &fsmpb.ExpireLeases{}}},
		&fsm.Result{RemovedLeases: []fsm.LeaseKey{{Namespace: "ns", LeaseID: "ll_bbbbbbbbbbbbbbbbbbbb"}}, FreedLocks: []fsm.LockKey{{Namespace: "ns", Lock: "c"}}})
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("want 3 audit lines, got %d:\n%s", len(lines), buf.String())
	}
	for i, want := range []string{`"lock":"orders/eu"`, `"freed_locks":2`, `"freed_locks":1`} {
		if !strings.Contains(lines[i], want) {
			t.Errorf("line %d lacks %s: %s", i, want, lines[i])
		}
	}
	if !strings.Contains(lines[0], `"index":7`) || !strings.Contains(lines[2], "ll_bbbbbbbbbbbbbbbbbbbb") {
		t.Errorf("lines lack the index or the lease: %s", buf.String())
	}
}
