package leader

import (
	"context"
	"errors"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc/codes"

	"github.com/grackle-coord/grackle/apierr"

	"github.com/grackle-coord/grackle/fsm"
	fsmpb "github.com/grackle-coord/grackle/proto/grackle/fsm/v1"
)

// Proposer is the one place where commands enter Raft: it stamps the
// leader's `now`, encodes, hands the command to the packer (which packs
// the commands arriving while entries are in flight into one entry, see
// packer.go) and returns the command's own result.
type Proposer struct {
	packer *packer
	clock  *Clock
}

// NewProposer returns a proposer applying on r, stamping with c. Each term
// has its own; Close it when the term ends.
func NewProposer(r *raft.Raft, c *Clock, applyTimeout time.Duration) *Proposer {
	return &Proposer{packer: newPacker(r, packerConfig{ApplyTimeout: applyTimeout}), clock: c}
}

// Close fails what is still queued (NotLeader: never proposed) and waits
// for the entries in flight.
func (p *Proposer) Close() { p.packer.shutdown() }

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
	if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) {
		return nil, notProposed(context.DeadlineExceeded)
	}
	res, err := p.packer.propose(ctx, data)
	switch {
	case errors.Is(err, errNotQueued):
		// Its caller gave up while it was still queued: never proposed.
		return nil, notProposed(ctx.Err())
	case errors.Is(err, errNoResult):
		return nil, newError(codes.Unavailable, apierr.OutcomeUnknown, "no result from the state machine")
	case err != nil:
		return nil, fromRaft(err)
	}
	return res, nil
}
