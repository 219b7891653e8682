package fsm

import pb "github.com/grackle-coord/grackle/proto/grackle/v1"

// SemaphoreView is a semaphore's state as of one applied entry (the watch
// stream's message): the semaphore, its first maxHolders live holders in
// acquisition order, and the raft index of the last entry applied, all
// read under one lock so that they agree with each other.
func (f *FSM) SemaphoreView(ns, sem string, now int64, maxHolders int) (*pb.Semaphore, []*pb.SemaphoreHolder, uint64, error) {
	s, done := f.read()
	defer done()
	v, err := s.getSemaphore(ns, sem, now)
	if err != nil {
		return nil, nil, s.lastIndex, err
	}
	var hs []*pb.SemaphoreHolder
	for _, h := range s.semaphoreHolders(ns, sem) {
		if len(hs) >= maxHolders {
			break
		}
		if h.lease.liveExp > now { // the hold's lease (see dropHolder): no search
			hs = append(hs, holderView(h))
		}
	}
	return v, hs, s.lastIndex, nil
}

// LeaseHoldings returns, for each lease id, its process id ("" when the
// lease is gone) and the weight it holds on sem (0 if none), under one
// lock: what a queue listing adds to the leader's waiters.
func (f *FSM) LeaseHoldings(ns, sem string, leaseIDs []string) (procs []string, held []int64) {
	s, done := f.read()
	defer done()
	procs, held = make([]string, len(leaseIDs)), make([]int64, len(leaseIDs))
	for i, id := range leaseIDs {
		if l, ok := s.getLease(ns, id); ok {
			procs[i] = l.proc
		}
		if h, _, ok := s.holdOf(ns, sem, id); ok {
			held[i] = h.weight
		}
	}
	return procs, held
}
