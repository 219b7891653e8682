package leader

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc/codes"

	"github.com/grackle-coord/grackle/apierr"
)

// Every raft failure maps to the reason that says whether the entry can
// have been applied.
func TestRaftErrorReasons(t *testing.T) {
	cases := []struct {
		err    error
		code   codes.Code
		reason string
	}{
		{raft.ErrNotLeader, codes.Unavailable, apierr.NotLeader},
		{raft.ErrLeadershipTransferInProgress, codes.Unavailable, apierr.NotLeader},
		{raft.ErrEnqueueTimeout, codes.Unavailable, apierr.NotSent},
		{raft.ErrLeadershipLost, codes.Unavailable, apierr.OutcomeUnknown},
		{raft.ErrRaftShutdown, codes.Unavailable, apierr.OutcomeUnknown},
		{fmt.Errorf("wrapped: %w", raft.ErrLeadershipLost), codes.Unavailable, apierr.OutcomeUnknown},
		{context.DeadlineExceeded, codes.DeadlineExceeded, apierr.OutcomeUnknown},
		{context.Canceled, codes.Canceled, apierr.OutcomeUnknown},
		{errors.New("something else"), codes.Unavailable, apierr.OutcomeUnknown},
	}
	for _, c := range cases {
		var e *Error
		if !errors.As(RaftError(c.err), &e) || e.Code != c.code || e.Reason != c.reason {
			t.Errorf("%v: got %v, want %v %s", c.err, RaftError(c.err), c.code, c.reason)
		}
	}
	if RaftError(nil) != nil {
		t.Error("nil must stay nil")
	}
	// Nothing proposed because the caller had gone: NOT_SENT, with the
	// caller's code.
	if e := notProposed(context.DeadlineExceeded); e.Code != codes.DeadlineExceeded || e.Reason != apierr.NotSent {
		t.Errorf("deadline before proposing: %v", e)
	}
	if e := notProposed(context.Canceled); e.Code != codes.Canceled || e.Reason != apierr.NotSent {
		t.Errorf("canceled before proposing: %v", e)
	}
}

// A term that is not ready yet answers NOT_SENT to a caller that gives up;
// an ended one NOT_LEADER.
func TestTermReadyReasons(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	term := &Term{ctx: ctx, cancel: cancel, ready: make(chan struct{})}
	gone, stop := context.WithCancel(context.Background())
	stop()
	var e *Error
	if err := term.Ready(gone); !errors.As(err, &e) || e.Reason != apierr.NotSent {
		t.Fatalf("barrier pending: %v", err)
	}
	cancel()
	if err := term.Ready(context.Background()); !errors.As(err, &e) || e.Reason != apierr.NotLeader {
		t.Fatalf("term ended: %v", err)
	}
}
