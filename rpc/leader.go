package rpc

import (
	"context"
	"time"

	"github.com/grackle-coord/grackle/apierr"
	"github.com/grackle-coord/grackle/fsm"
	fsmpb "github.com/grackle-coord/grackle/proto/grackle/fsm/v1"
)

// leaderState is the leader-only work of one term: it exists from the
// moment raft says this node leads until it says otherwise.
type leaderState struct {
	ctx    context.Context
	cancel context.CancelFunc
	ready  chan struct{} // closed once the barrier and setup are done
	q      *queues
	kick   chan struct{}
}

func (ls *leaderState) kickExpiry() {
	select {
	case ls.kick <- struct{}{}:
	default:
	}
}

// stepUp starts leader work. Setup runs in the background so that the
// leadership notification channel keeps being drained.
func (s *Service) stepUp() {
	if s.leader.Load() != nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	ls := &leaderState{ctx: ctx, cancel: cancel, ready: make(chan struct{}), kick: make(chan struct{}, 1)}
	ls.q = newQueues(s, ls)
	s.leader.Store(ls)
	s.log.Info("became leader; running barrier")
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if err := s.setupLeader(ls); err != nil {
			if ctx.Err() == nil {
				s.log.Error("leader setup failed; stepping down", "error", err)
				s.stepDown()
			}
			return
		}
		close(ls.ready)
		s.log.Info("leader ready")
		s.expiryLoop(ls)
	}()
}

// setupLeader: a barrier so the FSM has applied everything committed by
// earlier leaders, then the replicated bookkeeping a leader owns.
func (s *Service) setupLeader(ls *leaderState) error {
	if err := s.raft.Barrier(0).Error(); err != nil {
		return err
	}
	s.clock.atLeast(s.fsm.LastNow())
	ctx := ls.ctx
	if s.fsm.Limits() != s.cfg.Limits {
		l := s.cfg.Limits
		if _, err := s.apply(ctx, nil, &fsmpb.Command{Op: &fsmpb.Command_SetLimits{SetLimits: &fsmpb.SetLimits{
			MaxNamespaces: l.MaxNamespaces, MaxSemaphoresPerNamespace: l.MaxSemaphoresPerNamespace,
			MaxLeasesPerNamespace: l.MaxLeasesPerNamespace, MaxHoldersPerSemaphore: l.MaxHoldersPerSemaphore,
			MaxPermits: l.MaxPermits, MaxTtlSeconds: l.MaxTTLSeconds}}}); err != nil {
			return err
		}
	}
	if err := s.replicateMembers(ctx); err != nil {
		return err
	}
	// Never reap a lease the old leader would still have kept: give every
	// live lease one more grace period to be refreshed across the election.
	if s.cfg.LeaseGrace > 0 {
		if _, err := s.apply(ctx, nil, &fsmpb.Command{Op: &fsmpb.Command_ExtendLeases{ExtendLeases: &fsmpb.ExtendLeases{
			ExtendNs: int64(s.cfg.LeaseGrace)}}}); err != nil {
			return err
		}
	}
	return nil
}

// replicateMembers makes sure the FSM knows the gRPC address of this node
// and of every initial member, so any node can name the leader's address.
func (s *Service) replicateMembers(ctx context.Context) error {
	known := map[string]fsm.Member{}
	for _, m := range s.fsm.Members() {
		known[m.NodeID] = m
	}
	want := map[string]string{s.cfg.NodeID: s.cfg.GRPCAddress}
	for id, a := range s.cfg.InitialGRPC {
		if _, ok := want[id]; !ok && a != "" {
			want[id] = a
		}
	}
	cf := s.raft.GetConfiguration()
	if err := cf.Error(); err != nil {
		return err
	}
	for _, srv := range cf.Configuration().Servers {
		id := string(srv.ID)
		g, ok := want[id]
		if !ok {
			continue
		}
		if m, ok := known[id]; ok && m.GRPCAddress == g && m.RaftAddress == string(srv.Address) {
			continue
		}
		if _, err := s.apply(ctx, nil, &fsmpb.Command{Op: &fsmpb.Command_SetMember{SetMember: &fsmpb.SetMember{
			NodeId: id, RaftAddress: string(srv.Address), GrpcAddress: g}}}); err != nil {
			return err
		}
	}
	return nil
}

// stepDown ends leader work: every waiting call ends with Unavailable, and
// the client retries on the new leader (re-acquire is idempotent).
func (s *Service) stepDown() {
	ls := s.leader.Swap(nil)
	if ls == nil {
		return
	}
	s.log.Info("no longer leader; ending waiting calls")
	ls.cancel()
	ls.q.failAll(func(w *waiter) error {
		return s.unavailable(w.ctx, apierr.OutcomeUnknown, "leadership lost while waiting")
	})
}

// expiryLoop reaps expired leases: a timer on the earliest expires_at,
// re-armed whenever a command may have changed it.
func (s *Service) expiryLoop(ls *leaderState) {
	const maxSleep = time.Second
	for {
		next, ok := s.fsm.NextExpiry()
		wait := maxSleep
		if ok {
			now := s.clock.now()
			if next <= now {
				if _, err := s.apply(ls.ctx, ls, &fsmpb.Command{Op: &fsmpb.Command_ExpireLeases{
					ExpireLeases: &fsmpb.ExpireLeases{Max: s.cfg.ExpireBatch}}}); err != nil {
					if ls.ctx.Err() != nil {
						return
					}
					s.log.Warn("expiring leases failed", "error", err)
					wait = 50 * time.Millisecond
				} else {
					continue
				}
			} else if d := time.Duration(next - now); d < wait {
				// +1µs: expires_at <= now must hold when the command applies.
				wait = d + time.Microsecond
			}
		}
		t := time.NewTimer(wait)
		select {
		case <-ls.ctx.Done():
			t.Stop()
			return
		case <-ls.kick:
			t.Stop()
		case <-t.C:
		}
	}
}
