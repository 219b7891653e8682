package runner

import (
	"context"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grackle-coord/grackle/jepsen/history"
)

// A call is a certain failure only when its error proves nothing was
// written; every message that leaves the outcome open is indeterminate,
// even when it also says no leader is known.
func TestClassify(t *testing.T) {
	cases := []struct {
		kind string
		err  error
		want string
	}{
		{history.Acquire, nil, history.OK},
		{history.Revoke, status.Error(codes.Unavailable, "node n1: leadership lost before the write committed (its outcome is unknown); no leader is known right now"), history.Info},
		{history.Acquire, status.Error(codes.Unavailable, "node n1: leadership lost while waiting; no leader is known right now"), history.Info},
		{history.Release, status.Error(codes.Unavailable, "node n2: shutting down; the leader is n1 at x"), history.Info},
		{history.Release, status.Error(codes.Unavailable, "node n2: not the leader; no leader is known right now"), history.Fail},
		{history.Release, status.Error(codes.Unavailable, `connection error: desc = "transport: Error while dialing: dial tcp: connect: connection refused"`), history.Fail},
		{history.Release, status.Error(codes.Unavailable, "error reading from server: connection reset by peer"), history.Info},
		{history.Acquire, status.Error(codes.DeadlineExceeded, "context deadline exceeded"), history.Info},
		{history.Acquire, context.DeadlineExceeded, history.Info},
		{history.Acquire, status.Error(codes.NotFound, "lease gone"), history.Fail},
		{history.GetSemaphore, status.Error(codes.DeadlineExceeded, "x"), history.Fail},
	}
	for _, c := range cases {
		if got := classify(c.kind, c.err); got != c.want {
			t.Errorf("classify(%s, %v) = %s, want %s", c.kind, c.err, got, c.want)
		}
	}
}
