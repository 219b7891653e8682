package fsm

import (
	"context"
	"sync"
)

// appliedIndex lets readers wait for the state to reach a Raft index (a
// follower's linearizable read waits for the leader's read index). It is
// not replicated state: only a notification of where the state is.
type appliedIndex struct {
	mu    sync.Mutex
	index uint64
	moved chan struct{} // closed when index moves; nil while no one waits
}

// set records the state's index (with the FSM's write lock held, so the
// state at index is what a woken reader sees, or newer).
func (a *appliedIndex) set(index uint64) {
	a.mu.Lock()
	a.index = index
	if a.moved != nil {
		close(a.moved)
		a.moved = nil
	}
	a.mu.Unlock()
}

// WaitApplied returns nil once the state includes the entry at index (it
// may be further on), or ctx's error if ctx ends first.
func (f *FSM) WaitApplied(ctx context.Context, index uint64) error {
	a := &f.index
	for {
		a.mu.Lock()
		if a.index >= index {
			a.mu.Unlock()
			return nil
		}
		if a.moved == nil {
			a.moved = make(chan struct{})
		}
		moved := a.moved
		a.mu.Unlock()
		select {
		case <-moved:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
