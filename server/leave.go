package server

import (
	"time"

	"github.com/hashicorp/raft"
)

// Leave hands leadership to the most up-to-date other voter when this
// node leads, so that stopping it costs the cluster no election timeout
// (a rolling restart): raft's leadership transfer catches the target up
// and tells it to start an election at once. It returns once another node
// leads, the transfer failed, or within has passed; the node keeps
// serving (a follower forwards) until Close.
func (s *Server) Leave(within time.Duration) {
	r := s.Node.Raft
	if r.State() != raft.Leader {
		return
	}
	voters := 0
	if cf := r.GetConfiguration(); cf.Error() == nil {
		for _, srv := range cf.Configuration().Servers {
			if srv.Suffrage == raft.Voter && string(srv.ID) != s.cfg.NodeID {
				voters++
			}
		}
	}
	if voters == 0 {
		return
	}
	start := time.Now()
	f := r.LeadershipTransfer()
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	select {
	case err := <-done:
		if err != nil {
			s.log.Warn("leaving: leadership transfer failed; stopping anyway (the others elect a leader)", "error", err)
			return
		}
	case <-time.After(within):
		s.log.Warn("leaving: leadership transfer did not finish in time; stopping anyway", "within", within)
		return
	}
	// The transfer returns once the target was told to run; wait (bounded)
	// until this node sees a new leader, so forwarded calls find it.
	for time.Since(start) < within {
		if _, id := r.LeaderWithID(); id != "" && string(id) != s.cfg.NodeID {
			s.log.Info("leaving: leadership handed over", "to", string(id), "took", time.Since(start).Round(time.Millisecond))
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}
