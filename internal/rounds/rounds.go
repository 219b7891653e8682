// Package rounds shares one call among the concurrent callers that need
// it, for calls whose answer is only good for callers that arrived before
// the call began: a leadership confirmation (leader.Term.Linearize), a
// follower's read-index request (rpc). One round runs at a time; every
// caller that arrived before a round began shares its answer, and a caller
// arriving while a round runs waits for the next one, so the round each
// caller gets began after it arrived (ReadIndex batching).
package rounds

import (
	"context"
	"runtime"
	"sync"
)

// Group runs rounds of do. The zero Group is not usable: use New.
type Group[T any] struct {
	do func(callers int) (T, error)

	mu      sync.Mutex
	next    *round[T] // the round the next callers join; nil: none yet
	running bool      // a goroutine runs rounds
}

// round is one call of do; done is closed once val and err are set, so
// one close wakes every caller of the round (no channel per caller).
type round[T any] struct {
	done    chan struct{}
	val     T
	err     error
	callers int // joined so far; fixed once the round is taken to run
}

// New returns a group whose rounds call do, telling it how many callers
// share the round (for metrics: how well rounds batch).
func New[T any](do func(callers int) (T, error)) *Group[T] { return &Group[T]{do: do} }

// Do returns the answer of a round that began after the call, or ctx's
// error when ctx ends first (the round goes on for the others).
func (g *Group[T]) Do(ctx context.Context) (T, error) {
	g.mu.Lock()
	r := g.next
	if r == nil {
		r = &round[T]{done: make(chan struct{})}
		g.next = r
	}
	r.callers++
	if !g.running {
		g.running = true
		go g.run()
	}
	g.mu.Unlock()
	select {
	case <-r.done:
		return r.val, r.err
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	}
}

// run takes the waiting round, runs it, and repeats while callers arrived
// during it; it returns when a round ends with no one waiting.
func (g *Group[T]) run() {
	for {
		// Let the goroutines that are ready to run go first: under load
		// they are mostly callers about to join (calls the stream just
		// handed to workers), and a round they miss they wait for whole.
		// One yield took the readers per leadership round from 5.7 to 8.4
		// and reads/s spread over three members up by 5-10 % (grackle bench
		// reads --spread); a second (the callers the first one's goroutines
		// woke) to 9.6 and another 4-8 %; a third made no difference. With
		// no one else ready a yield returns at once.
		runtime.Gosched()
		runtime.Gosched()
		g.mu.Lock()
		r := g.next
		g.next = nil
		if r == nil {
			g.running = false
			g.mu.Unlock()
			return
		}
		g.mu.Unlock()
		// No caller joins r once it is no longer next: callers is final.
		r.val, r.err = g.do(r.callers)
		close(r.done)
	}
}
