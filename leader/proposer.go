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

// NewProposer returns a proposer applying on r, stamping with c, with at
// most maxQueued client commands waiting (0: DefaultMaxQueued). Each term
// has its own; Close it when the term ends.
func NewProposer(r *raft.Raft, c *Clock, cfg ProposerConfig) *Proposer {
	return &Proposer{packer: newPacker(r, packerConfig{ApplyTimeout: cfg.ApplyTimeout, MaxQueued: cfg.MaxQueued,
		Hold: cfg.Hold, HoldIdle: cfg.HoldIdle, OnEntry: cfg.OnEntry}), clock: c}
}

// ProposerConfig tunes a Proposer; zero values take the defaults.
type ProposerConfig struct {
	// ApplyTimeout bounds the wait for Raft to accept an entry (10 s).
	ApplyTimeout time.Duration
	// MaxQueued bounds the client commands waiting for an entry
	// (DefaultMaxQueued).
	MaxQueued int
	// Hold (DefaultPackHold; negative: off) and HoldIdle
	// (DefaultPackHoldIdle) bound how long the commands queued when an
	// entry resolves wait for that entry's callers to send their next ones
	// (see packerConfig.Hold).
	Hold, HoldIdle time.Duration
	// OnEntry (nil: none) sees every entry proposed (EntryObserver).
	OnEntry func(EntryEvent)
}

// DefaultPackHold and DefaultPackHoldIdle: a few unloaded commits; and
// enough for the woken callers of an entry to send their next commands on
// a loaded 2-core machine, where they come back 0.2-0.4 ms after the entry
// commits and then tens of microseconds apart (0.6 ms merged fewer of them
// in `grackle bench pairs`: 0.037-0.038 entries per pair against 0.033
// with 1 ms), so that the hold ends soon when callers do not come back.
const (
	DefaultPackHold     = 4 * time.Millisecond
	DefaultPackHoldIdle = time.Millisecond
)

type ownKey struct{}

// own marks ctx as the leader's own (grants to waiters, lease expiry, term
// setup): its commands are queued even when the queue is full.
func own(ctx context.Context) context.Context { return context.WithValue(ctx, ownKey{}, true) }

type lazyKey struct{}

// waitsAnyway marks ctx's command lazy (packerConfig.LazyDelay): its caller
// waits for more than the command's own result (an acquire that queues
// behind other waiters), so the command may wait a little for company.
func waitsAnyway(ctx context.Context) context.Context {
	return context.WithValue(ctx, lazyKey{}, true)
}

// Close fails what is still queued (NotLeader: never proposed) and waits
// for the entries in flight.
func (p *Proposer) Close() { p.packer.shutdown() }

// Propose applies cmd and returns its result. The error is an *Error:
// NotSent when nothing was proposed (ctx already ended), NotLeader when
// raft refused the entry, OutcomeUnknown when it may have applied. An FSM
// rejection is in the result's Err, not in the error.
func (p *Proposer) Propose(ctx context.Context, cmd *fsmpb.Command) (*fsm.Result, error) {
	return p.ProposeThen(ctx, cmd, nil)
}

// ProposeThen is Propose with then (nil: none) run exactly once with the
// same result and error before it returns; when the command applied, then
// runs in log order, before any caller of this or a later entry is woken
// (packer.propose). then must not wait for another proposal.
func (p *Proposer) ProposeThen(ctx context.Context, cmd *fsmpb.Command, then func(*fsm.Result, error)) (*fsm.Result, error) {
	fail := func(err error) (*fsm.Result, error) {
		if then != nil {
			then(nil, err)
		}
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		// Never propose for a caller that is gone (or a term that ended).
		return fail(notProposed(err))
	}
	cmd.Now = p.clock.Now()
	data, err := fsm.Encode(cmd)
	if err != nil {
		return fail(err)
	}
	if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) {
		return fail(notProposed(context.DeadlineExceeded))
	}
	var mapped func(*fsm.Result, error)
	if then != nil {
		mapped = func(res *fsm.Result, err error) { then(res, mapProposeError(ctx, err)) }
	}
	// A command that carries grants hands permits to waiters: it may go out
	// beside an entry already in flight (packerConfig.OrdinaryInFlight).
	// The leader's own commands (own(ctx)) are never refused at a full
	// queue.
	_, ours := ctx.Value(ownKey{}).(bool)
	var res *fsm.Result
	if _, lazy := ctx.Value(lazyKey{}).(bool); lazy && len(cmd.GetGrants()) == 0 {
		res, err = p.packer.proposeLazy(ctx, data, !ours, mapped)
	} else {
		res, err = p.packer.propose(ctx, data, len(cmd.GetGrants()) > 0, !ours, mapped)
	}
	if err != nil {
		return nil, mapProposeError(ctx, err)
	}
	return res, nil
}

// mapProposeError maps an error of the packer to an *Error.
func mapProposeError(ctx context.Context, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, errNotQueued):
		// Its caller gave up while it was still queued: never proposed.
		return notProposed(ctx.Err())
	case errors.Is(err, errQueueFull):
		return newError(codes.ResourceExhausted, apierr.Overloaded, "the leader is overloaded: %v; nothing was proposed, retry later", err)
	case errors.Is(err, errNoResult):
		return newError(codes.Unavailable, apierr.OutcomeUnknown, "no result from the state machine")
	}
	return fromRaft(err)
}
