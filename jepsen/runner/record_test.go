package runner

import (
	"context"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grackle-coord/grackle/apierr"
	"github.com/grackle-coord/grackle/jepsen/history"
)

// A call is a certain failure only when its error's reason proves nothing
// was written; every other Unavailable is indeterminate, whatever its
// message says.
func TestClassify(t *testing.T) {
	unavail := func(reason, msg string) error {
		return apierr.New(codes.Unavailable, reason, "n1", apierr.Leader{}, msg)
	}
	cases := []struct {
		kind string
		err  error
		want string
	}{
		{history.Acquire, nil, history.OK},
		{history.Revoke, unavail(apierr.OutcomeUnknown, "node n1: leadership lost before the write committed (its outcome is unknown); no leader is known right now"), history.Info},
		{history.Acquire, unavail(apierr.OutcomeUnknown, "node n1: leadership lost while waiting; no leader is known right now"), history.Info},
		{history.Release, unavail(apierr.OutcomeUnknown, "node n2: shutting down; the leader is n1 at x"), history.Info},
		{history.Release, unavail(apierr.NotLeader, "node n2: not the leader; no leader is known right now"), history.Fail},
		{history.Release, apierr.Annotate(status.Error(codes.Unavailable, `connection error: desc = "transport: Error while dialing: dial tcp: connect: connection refused"`), apierr.NotSent, "", apierr.Leader{}), history.Fail},
		// Message text proves nothing: no reason, no certainty.
		{history.Release, status.Error(codes.Unavailable, "node n2: not the leader"), history.Info},
		{history.Release, status.Error(codes.Unavailable, "error reading from server: connection reset by peer"), history.Info},
		{history.Acquire, status.Error(codes.DeadlineExceeded, "context deadline exceeded"), history.Info},
		{history.Acquire, context.DeadlineExceeded, history.Info},
		{history.Acquire, status.Error(codes.NotFound, "lease gone"), history.Fail},
		{history.GetSemaphore, status.Error(codes.DeadlineExceeded, "x"), history.Fail},
		// Locks: the same rules. Reads change nothing; a second upgrader
		// and a superseded waiter are refused before anything changes.
		{history.GetLock, status.Error(codes.DeadlineExceeded, "x"), history.Fail},
		{history.ListLocks, unavail(apierr.OutcomeUnknown, "x"), history.Fail},
		{history.LockWaiters, status.Error(codes.Unavailable, "x"), history.Fail},
		{history.LockAcquire, apierr.New(codes.FailedPrecondition, "UPGRADE_CONFLICT", "n1", apierr.Leader{}, "another upgrade waits"), history.Fail},
		{history.LockAcquire, apierr.New(codes.Aborted, "SUPERSEDED", "n1", apierr.Leader{}, "superseded"), history.Fail},
		{history.LockAcquire, unavail(apierr.OutcomeUnknown, "node n1: leadership lost while waiting"), history.Info},
		{history.LockAcquire, status.Error(codes.DeadlineExceeded, "context deadline exceeded"), history.Info},
		{history.LockRelease, unavail(apierr.NotLeader, "not the leader"), history.Fail},
		{history.LockRelease, status.Error(codes.Unavailable, "connection reset"), history.Info},
		{history.LockAcquire, apierr.New(codes.NotFound, apierr.LeaseNotFound, "n1", apierr.Leader{}, "lease expired"), history.Fail},
		{history.LockRevoke, context.DeadlineExceeded, history.Info},
	}
	for _, c := range cases {
		if got := classify(c.kind, c.err); got != c.want {
			t.Errorf("classify(%s, %v) = %s, want %s", c.kind, c.err, got, c.want)
		}
	}
}

// An access-control refusal is recorded with its code and reason (of the
// access control's ErrorInfo domain), for the access checker; as an
// unexpected error of a write it stays indeterminate.
func TestRecordRefusal(t *testing.T) {
	st, err := status.New(codes.Unauthenticated, "the token is unknown or was revoked").
		WithDetails(&errdetails.ErrorInfo{Reason: "TOKEN_UNKNOWN", Domain: apierr.Domain})
	if err != nil {
		t.Fatal(err)
	}
	r := &recorder{}
	r.end(r.begin(history.Op{Kind: history.Acquire}), st.Err())
	r.end(r.begin(history.Op{Kind: history.ListWaiters}), st.Err())
	r.end(r.begin(history.Op{Kind: history.Release}), apierr.New(codes.Unavailable, apierr.NotLeader, "n1", apierr.Leader{}, "not the leader"))
	want := []struct{ outcome, code, reason string }{
		{history.Info, "Unauthenticated", "TOKEN_UNKNOWN"},
		{history.Fail, "Unauthenticated", "TOKEN_UNKNOWN"},
		{history.Fail, "Unavailable", apierr.NotLeader},
	}
	for i, w := range want {
		if o := r.ops[i]; o.Outcome != w.outcome || o.Code != w.code || o.Reason != w.reason {
			t.Errorf("op %d (%s): %s %s %q, want %s %s %q", i, o.Kind, o.Outcome, o.Code, o.Reason, w.outcome, w.code, w.reason)
		}
	}
}
