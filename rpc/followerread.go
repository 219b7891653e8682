package rpc

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grackle-coord/grackle/apierr"
	"github.com/grackle-coord/grackle/leader"
	peerpb "github.com/grackle-coord/grackle/proto/grackle/peer/v1"
)

// Follower reads (leader/DESIGN.md, Follower reads): a follower serves a
// linearizable read from its own state machine once it has applied the
// leader's read index, which the leader answers after a leadership round
// that began after the request arrived. Concurrent reads on a follower
// share one read-index request (package rounds), each a request sent
// after the read arrived.

// readIndex is the leader's answer: every write acknowledged before the
// request arrived is at or below index; now is the leader's clock.
type readIndex struct {
	index uint64
	now   int64
}

// readIndexTimeout bounds one read-index request. The reads waiting on it
// give up at their own deadlines; the bound keeps a leader that hangs
// (paused, cut off mid-call) from holding up the requests after it.
const readIndexTimeout = 5 * time.Second

// askReadIndex runs one read-index request on the leader, over the
// forwarding connection. Its errors: the leader's own answer (NOT_LEADER
// from a node that no longer leads), the hop's (*leader.Error: no leader
// known, cannot reach it, the connection broke), Unimplemented from a
// leader too old to answer (the read is then forwarded), or Unavailable
// with NOT_SENT.
func (s *Service) askReadIndex() (readIndex, error) {
	ctx, cancel := context.WithTimeout(context.Background(), readIndexTimeout)
	defer cancel()
	var out readIndex
	err := s.fwd.askLeader(ctx, func(ctx context.Context, cc grpc.ClientConnInterface) error {
		r, err := peerpb.NewPeerServiceClient(cc).ReadIndex(ctx, &peerpb.ReadIndexRequest{})
		if err == nil {
			out = readIndex{index: r.Index, now: r.Now}
		}
		return err
	})
	var le *leader.Error
	switch {
	case err == nil, errors.As(err, &le), status.Code(err) == codes.Unimplemented,
		apierr.Info(err).GetMetadata()[apierr.KeyNode] != "":
		return out, err
	}
	return out, &leader.Error{Code: codes.Unavailable, Reason: apierr.NotSent,
		Msg: "asking the leader for a read index: " + status.Convert(err).Message()}
}

// followerRead serves a read on this follower. served is false when the
// leader does not know the read-index call (an older version, during a
// rolling upgrade): the caller forwards the read instead.
func followerRead[Resp any](s *Service, ctx context.Context, local func(now int64) (Resp, error)) (out Resp, served bool, err error) {
	ri, err := s.readIndexes.Do(ctx)
	if err != nil {
		if status.Code(err) == codes.Unimplemented {
			return out, false, nil
		}
		if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
			return out, true, s.toStatus(ctx, ctxError(ctx, "waiting for the leader's read index"))
		}
		return out, true, s.toStatus(ctx, err)
	}
	wctx := ctx
	if _, has := ctx.Deadline(); !has {
		var cancel context.CancelFunc
		wctx, cancel = context.WithTimeout(ctx, s.applyTimeout())
		defer cancel()
	}
	if err := s.fsm.WaitApplied(wctx, ri.index); err != nil {
		what := fmt.Sprintf("waiting to apply the leader's read index %d (applied %d)", ri.index, s.fsm.AppliedIndex())
		if ctx.Err() != nil {
			return out, true, s.toStatus(ctx, ctxError(ctx, what))
		}
		return out, true, s.toStatus(ctx, &leader.Error{Code: codes.Unavailable, Reason: apierr.NotSent,
			Msg: fmt.Sprintf("%s for %s: this node is behind the leader's log", what, s.applyTimeout())})
	}
	// Access control decides on this node's state, which now holds every
	// token change that completed before the read began.
	if s.cfg.Authorize != nil {
		if err := s.cfg.Authorize(ctx); err != nil {
			return out, true, err
		}
	}
	// The leader's clock when it answered, or the newest `now` this node
	// applied since, if later: either lies within the read.
	out, err = local(max(ri.now, s.fsm.LastNow()))
	s.followerReads.Add(1)
	return out, true, s.toStatus(ctx, err)
}

// CatchUp waits until this follower has applied the leader's read index:
// every write acknowledged before the call, token changes included (the
// access checker asks it before it calls a token unknown).
func (s *Service) CatchUp(ctx context.Context) error {
	ri, err := s.readIndexes.Do(ctx)
	if err != nil {
		return err
	}
	return s.fsm.WaitApplied(ctx, ri.index)
}

// ctxError is the error of a read whose caller's context ended while it
// waited: DeadlineExceeded or Canceled, NOT_SENT (a read writes nothing).
func ctxError(ctx context.Context, what string) *leader.Error {
	code := codes.DeadlineExceeded
	if errors.Is(ctx.Err(), context.Canceled) {
		code = codes.Canceled
	}
	return &leader.Error{Code: code, Reason: apierr.NotSent, Msg: "the read's " + ctx.Err().Error() + " while " + what}
}

func (s *Service) applyTimeout() time.Duration {
	if s.cfg.ApplyTimeout > 0 {
		return s.cfg.ApplyTimeout
	}
	return 10 * time.Second
}

// ReadIndex implements the leader's side of follower reads
// (peerpb.PeerServiceServer). A node that does not lead answers
// NOT_LEADER: it never forwards, since the asking follower's view of the
// leader is what was wrong.
func (s *Service) ReadIndex(ctx context.Context, _ *peerpb.ReadIndexRequest) (*peerpb.ReadIndexResponse, error) {
	t := s.lead.Term()
	if t == nil {
		return nil, s.failure(ctx, codes.Unavailable, apierr.NotLeader, "not the leader")
	}
	if err := t.Ready(ctx); err != nil {
		return nil, s.toStatus(ctx, err)
	}
	index, now, err := t.ReadIndex(ctx)
	if err != nil {
		return nil, s.toStatus(ctx, err)
	}
	return &peerpb.ReadIndexResponse{Index: index, Now: now}, nil
}
