package check

import (
	"strings"
	"testing"

	"github.com/grackle-coord/grackle/jepsen/history"
	"github.com/grackle-coord/grackle/tlsutil"
)

func TestAccessClean(t *testing.T) {
	b := newHB(map[string]int64{"s": 1})
	b.lease(1, "A", 0, 1, 5)
	b.refresh(1, "A", 10, 11, 5, history.Fail, "NotFound: lease ls_A not found")
	b.refresh(1, "A", 20, 21, 5, history.Info, "Unavailable: connection refused")
	b.add(history.Op{Process: 1, Kind: history.Acquire, Semaphore: "s", Lease: "A", Outcome: history.Fail,
		Code: "FailedPrecondition", Reason: "SEMAPHORE_DELETED", Error: "FailedPrecondition: deleted"}, 30, 31)
	expect(t, Access(b.h), Valid, "")
}

func TestAccessRefusals(t *testing.T) {
	b := newHB(map[string]int64{"s": 1})
	b.add(history.Op{Process: 1, Kind: history.Acquire, Semaphore: "s", Lease: "A", Outcome: history.Info,
		Code: "Unauthenticated", Reason: "TOKEN_UNKNOWN", Error: "Unauthenticated: unknown token"}, 0, 1)
	b.add(history.Op{Process: 2, Kind: history.Release, Semaphore: "s", Lease: "B", Outcome: history.Info,
		Code: "PermissionDenied", Reason: "PERMISSION_DENIED", Error: "PermissionDenied: needs write"}, 2, 3)
	b.add(history.Op{Process: 3, Kind: history.GetSemaphore, Semaphore: "s", Outcome: history.Fail,
		Code: "FailedPrecondition", Reason: tlsutil.ReasonTLSRequired, Error: "FailedPrecondition: the server expects TLS"}, 4, 5)
	b.h.Meta[history.MetaTLSFailures] = "x509: certificate is valid for 10.231.9.11, not 10.231.9.12"
	b.h.Meta[history.MetaHarnessRefusals] = "/grackle.v1.ClusterService/GetClusterStatus Unauthenticated TOKEN_UNKNOWN x2\n/grackle.v1.ClusterService/RemoveMember PermissionDenied PERMISSION_DENIED x1"
	r := Access(b.h)
	for _, k := range []string{"unauthenticated", "permission-denied", "tls-required", "tls-handshake", "harness-refused"} {
		expect(t, r, Invalid, k)
	}
	if len(r.Anomalies) != 6 {
		t.Errorf("want 6 anomalies:\n%s", dump(r))
	}
	if a := expect(t, r, Invalid, "unauthenticated"); len(a.Ops) != 1 || !strings.Contains(a.Description, "TOKEN_UNKNOWN") {
		t.Errorf("the refusal names its op and reason:\n%s", dump(r))
	}
}
