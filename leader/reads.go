package leader

import (
	"context"
	"sync"
)

// readBatcher batches leadership confirmations for linearizable reads (ReadIndex
// batching). A read may be served from the leader's state machine once a
// quorum confirmed, after the read arrived, that this node still leads:
// every write acknowledged before the read began is then applied here.
// One confirmation round at a time runs; every read that arrived before a
// round began shares its answer, and reads arriving during a round wait
// for the next one (so each read's confirmation starts after it arrived).
type readBatcher struct {
	verify func() error // raft.VerifyLeader().Error

	mu      sync.Mutex
	waiting []chan error
	running bool
}

// newReadBatcher batches calls of verify, which confirms leadership with a
// quorum (for *raft.Raft: func() error { return r.VerifyLeader().Error() }).
func newReadBatcher(verify func() error) *readBatcher { return &readBatcher{verify: verify} }

// Confirm returns once a confirmation round that began after the call
// succeeded (nil) or failed (its error), or when ctx ends (ctx's error).
func (b *readBatcher) Confirm(ctx context.Context) error {
	ch := make(chan error, 1)
	b.mu.Lock()
	b.waiting = append(b.waiting, ch)
	if !b.running {
		b.running = true
		go b.rounds()
	}
	b.mu.Unlock()
	select {
	case err := <-ch:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (b *readBatcher) rounds() {
	for {
		b.mu.Lock()
		batch := b.waiting
		b.waiting = nil
		if len(batch) == 0 {
			b.running = false
			b.mu.Unlock()
			return
		}
		b.mu.Unlock()
		err := b.verify()
		for _, ch := range batch {
			ch <- err
		}
	}
}
