package leader

import (
	"context"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc/codes"

	"github.com/grackle-coord/grackle/apierr"

	"github.com/grackle-coord/grackle/fsm"
	fsmpb "github.com/grackle-coord/grackle/proto/grackle/fsm/v1"
)

// Proposer is the one place where commands enter Raft: it stamps the
// leader's `now`, encodes, applies with a deadline and returns the FSM's
// result. Command packing (several commands per Raft entry) belongs here,
// behind Propose, so callers never change.
type Proposer struct {
	raft    *raft.Raft
	clock   *Clock
	timeout time.Duration // bound of one apply when ctx has no deadline
}

// NewProposer returns a proposer applying on r, stamping with c.
func NewProposer(r *raft.Raft, c *Clock, applyTimeout time.Duration) *Proposer {
	if applyTimeout <= 0 {
		applyTimeout = 10 * time.Second
	}
	return &Proposer{raft: r, clock: c, timeout: applyTimeout}
}

// Propose applies cmd and returns its result. The error is an *Error:
// NotSent when nothing was proposed (ctx already ended), NotLeader when
// raft refused the entry, OutcomeUnknown when it may have applied. An FSM
// rejection is in the result's Err, not in the error.
func (p *Proposer) Propose(ctx context.Context, cmd *fsmpb.Command) (*fsm.Result, error) {
	if err := ctx.Err(); err != nil {
		// Never propose for a caller that is gone (or a term that ended).
		return nil, notProposed(err)
	}
	cmd.Now = p.clock.Now()
	data, err := fsm.Encode(cmd)
	if err != nil {
		return nil, err
	}
	timeout := p.timeout
	if dl, ok := ctx.Deadline(); ok {
		if d := time.Until(dl); d < timeout {
			timeout = d
		}
	}
	if timeout <= 0 {
		return nil, notProposed(context.DeadlineExceeded)
	}
	f := p.raft.Apply(data, timeout)
	if err := f.Error(); err != nil {
		return nil, fromRaft(err)
	}
	res, _ := f.Response().(*fsm.Result)
	if res == nil {
		return nil, newError(codes.Unavailable, apierr.OutcomeUnknown, "no result from the state machine")
	}
	return res, nil
}
