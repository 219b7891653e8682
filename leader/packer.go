package leader

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/grackle-coord/grackle/fsm"
)

// applier is the part of *raft.Raft a packer uses (tests fake it).
type applier interface {
	Apply(cmd []byte, timeout time.Duration) raft.ApplyFuture
}

// packerConfig tunes a packer; zero values take the defaults.
type packerConfig struct {
	// OrdinaryInFlight bounds the entries proposed and not yet applied
	// (default 1); commands arriving meanwhile wait and go out together in
	// the next entry. MaxInFlight (default 2) is the bound instead when a
	// waiting command hands permits over (it carries grants: a release,
	// revoke or expiry with waiters behind it, a queued grant): that one
	// goes at once, with everything queued before it, so a hand-off never
	// waits a whole commit behind an unrelated entry (the previous
	// holder's new acquire). Every other command packs behind the one
	// entry in flight: two ordinary entries in flight would each carry
	// half of what arrives, and the cost of an entry (an fsync and a
	// replication round on every member) is most of a write's CPU.
	OrdinaryInFlight int
	MaxInFlight      int
	// MaxCommands and MaxBytes bound one batch (default 512 and 1 MiB).
	MaxCommands int
	MaxBytes    int
	// ApplyTimeout bounds the wait for Raft to accept an entry (default 10 s).
	ApplyTimeout time.Duration
	// LazyDelay (default DefaultLazyDelay; negative: off) is how long a
	// lazy command may wait for company: an acquire that will queue behind
	// other waiters anyway (a waiting acquire's answer comes with its
	// grant, not with its own entry). While only lazy commands wait they
	// go out with the next other command, or alone after LazyDelay; so a
	// holder's new acquire rides in the entry of the next release instead
	// of taking an entry (an fsync and a replication round on every member)
	// of its own, that the release would then wait behind. Arrival order,
	// and so FIFO, is unchanged: lazy commands stay in the queue in place.
	LazyDelay time.Duration
	// MaxQueued bounds the commands waiting for an entry slot (default
	// DefaultMaxQueued). A client command arriving at a full queue is
	// refused at once (errQueueFull: never proposed), so a flood of writes
	// cannot grow the leader's memory without bound; the leader's own
	// commands (grants to waiters, lease expiry, term setup) are always
	// queued: they are few, and refusing them would stall waiters.
	MaxQueued int
	// Hold (default DefaultPackHold; negative: off) and HoldIdle
	// (default DefaultPackHoldIdle) shape the entry after one
	// resolves. Its callers were just woken, and under a closed-loop load
	// most of them send their next command at once; without a hold those
	// commands miss the entry that goes out right away and wait a whole
	// commit for the one after. So when an entry resolves, ordinary
	// commands are held while fewer are queued than were queued then plus
	// the commands the entry carried (the callers expected back), for at
	// most Hold, and only while arrivals keep coming (no gap of
	// HoldIdle). A command that hands permits over ends the hold.
	Hold     time.Duration
	HoldIdle time.Duration
	// OnEntry (nil: none) is called on the packer's goroutine with every
	// entry it proposes (see EntryEvent).
	OnEntry func(EntryEvent)
}

// DefaultLazyDelay is the default packerConfig.LazyDelay: one to two
// unloaded commits on the reference machine (1.05-1.5 ms), so a lazy command seldom goes alone
// when a hand-off is near, and a lone waiter is delayed little.
const DefaultLazyDelay = 2 * time.Millisecond

// DefaultMaxQueued is the default bound of a packer's queue: at 512
// commands an entry, about twenty entries' worth.
const DefaultMaxQueued = 10_000

// packer is the Proposer's command packing: the commands that arrive while
// entries are in flight go out together in one Batch entry (see
// fsm/batch.go), so under load one fsync and one replication round carry
// many operations, and without load a command goes out at once, alone and
// as itself. It follows no term: on a node that does not lead, raft
// refuses every entry.
type packer struct {
	r   applier
	cfg packerConfig

	mu       sync.Mutex
	queue    []*proposal
	urgent   int // proposals in queue that hand permits over
	inFlight int // entries proposed and not yet resolved
	stopped  bool
	wake     chan struct{} // capacity 1: something was queued, or an entry resolved

	// The hold after an entry resolved (see Hold): while
	// holdUntil is set, take waits for holdTarget queued commands,
	// until holdUntil, or a gap of HoldIdle after lastArrival.
	holdUntil   time.Time
	holdTarget  int
	lastArrival time.Time

	inflight chan inflight // the entries in flight, in log order
	stop     chan struct{}
	wg       sync.WaitGroup
}

type inflight struct {
	f     raft.ApplyFuture
	batch []*proposal
}

type proposal struct {
	data []byte
	// urgent: the command hands permits over (see OrdinaryInFlight).
	urgent bool
	// lazyUntil, when set, is until when the command may wait for company
	// (see LazyDelay).
	lazyUntil time.Time
	// then, when set, runs with the outcome before any caller of this or a
	// later entry is woken (see completions).
	then func(*fsm.Result, error)
	done chan outcome // capacity 1
}

type outcome struct {
	res *fsm.Result
	err error
}

// errNotQueued wraps the caller's context error when it ended while its
// command was still queued: it was never handed to Raft.
var errNotQueued = errors.New("leader: not proposed")

// errQueueFull: the queue held MaxQueued commands; the command was never
// queued, never proposed.
var errQueueFull = errors.New("leader: the proposal queue is full")

// errNoResult reports an applied entry whose result is missing or of the
// wrong shape (a bug, never a normal outcome).
var errNoResult = errors.New("leader: no result from the state machine")

// newPacker starts a proposer on r.
func newPacker(r applier, cfg packerConfig) *packer {
	if cfg.MaxInFlight <= 0 {
		cfg.MaxInFlight = 2
	}
	if cfg.OrdinaryInFlight <= 0 {
		cfg.OrdinaryInFlight = 1
	}
	cfg.OrdinaryInFlight = min(cfg.OrdinaryInFlight, cfg.MaxInFlight)
	if cfg.MaxCommands <= 0 {
		cfg.MaxCommands = 512
	}
	if cfg.MaxBytes <= 0 {
		cfg.MaxBytes = 1 << 20
	}
	if cfg.ApplyTimeout <= 0 {
		cfg.ApplyTimeout = 10 * time.Second
	}
	if cfg.MaxQueued <= 0 {
		cfg.MaxQueued = DefaultMaxQueued
	}
	if cfg.LazyDelay == 0 {
		cfg.LazyDelay = DefaultLazyDelay
	}
	if cfg.Hold == 0 {
		cfg.Hold = DefaultPackHold
	}
	if cfg.HoldIdle <= 0 {
		cfg.HoldIdle = DefaultPackHoldIdle
	}
	p := &packer{r: r, cfg: cfg, wake: make(chan struct{}, 1),
		inflight: make(chan inflight, cfg.MaxInFlight), stop: make(chan struct{})}
	p.wg.Add(2)
	go p.run()
	go p.completions()
	return p
}

// propose submits one encoded command (urgent: it hands permits over, see
// OrdinaryInFlight) and waits until it is applied (its
// own result) or fails. A proposal never handed to Raft fails with
// raft.ErrNotLeader when the packer was shut down, or errNotQueued (wrapping
// ctx's error) when ctx ended while it was queued: certainly not in the
// log. Once handed to Raft it is waited for whatever ctx does (its outcome
// must be known); errors are then Raft's, as raft.Apply returns them.
//
// then (nil: none) runs exactly once with the same outcome, before the
// caller returns; for an applied entry it runs on the packer's completion
// goroutine, in log order, before any caller of that entry or a later one
// is woken. So what a caller does with its result (a waiter registering
// that it must wait) is done before anyone can act on a later result (a
// releaser's next acquire must queue behind that waiter). then must not
// block on the packer.
//
// A bounded proposal (a client's) arriving while MaxQueued commands wait
// fails at once with errQueueFull, then run first: it never entered the
// queue, so the order of those queued is untouched.
func (p *packer) propose(ctx context.Context, data []byte, urgent, bounded bool, then func(*fsm.Result, error)) (*fsm.Result, error) {
	return p.submit(ctx, &proposal{data: data, urgent: urgent, then: then, done: make(chan outcome, 1)}, bounded)
}

// proposeLazy is propose for a lazy command (see LazyDelay): one that
// hands nothing over and whose caller waits for more than its own result.
func (p *packer) proposeLazy(ctx context.Context, data []byte, bounded bool, then func(*fsm.Result, error)) (*fsm.Result, error) {
	pr := &proposal{data: data, then: then, done: make(chan outcome, 1)}
	if p.cfg.LazyDelay > 0 {
		pr.lazyUntil = time.Now().Add(p.cfg.LazyDelay)
	}
	return p.submit(ctx, pr, bounded)
}

func (p *packer) submit(ctx context.Context, pr *proposal, bounded bool) (*fsm.Result, error) {
	urgent := pr.urgent
	p.mu.Lock()
	if p.stopped {
		p.mu.Unlock()
		pr.finish(outcome{err: raft.ErrNotLeader})
		return nil, raft.ErrNotLeader
	}
	if bounded && len(p.queue) >= p.cfg.MaxQueued {
		p.mu.Unlock()
		err := fmt.Errorf("%w (%d commands wait)", errQueueFull, p.cfg.MaxQueued)
		pr.finish(outcome{err: err})
		return nil, err
	}
	p.queue = append(p.queue, pr)
	if urgent {
		p.urgent++
	}
	if !p.holdUntil.IsZero() {
		p.lastArrival = time.Now()
	}
	p.mu.Unlock()
	p.signal()
	select {
	case o := <-pr.done:
		return o.res, o.err
	case <-ctx.Done():
	}
	if p.unqueue(pr) {
		err := fmt.Errorf("%w: %w", errNotQueued, ctx.Err())
		pr.finish(outcome{err: err})
		return nil, err
	}
	o := <-pr.done
	return o.res, o.err
}

// unqueue removes a proposal not yet taken; it reports whether it was.
func (p *packer) unqueue(pr *proposal) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, x := range p.queue {
		if x == pr {
			p.queue = append(p.queue[:i:i], p.queue[i+1:]...)
			if pr.urgent {
				p.urgent--
			}
			return true
		}
	}
	return false
}

func (p *packer) signal() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// shutdown fails what is still queued (with raft.ErrNotLeader) and waits for
// the entries in flight to resolve (Raft fails them when leadership ends).
func (p *packer) shutdown() {
	p.mu.Lock()
	if p.stopped {
		p.mu.Unlock()
		p.wg.Wait()
		return
	}
	p.stopped = true
	queued := p.queue
	p.queue = nil
	p.mu.Unlock()
	close(p.stop)
	for _, pr := range queued {
		pr.finish(outcome{err: raft.ErrNotLeader})
		pr.done <- outcome{err: raft.ErrNotLeader}
	}
	p.wg.Wait()
}

func (p *packer) run() {
	defer p.wg.Done()
	defer close(p.inflight)
	lazy := time.NewTimer(time.Hour)
	lazy.Stop()
	defer lazy.Stop()
	for {
		// take gives nothing while the entries in flight are at their
		// bound: what arrives meanwhile piles up and goes out in one entry.
		// Nor while only lazy commands wait: until the first one's time
		// is up (the timer), or another command comes.
		batch, held, until := p.take(time.Now())
		for batch == nil {
			if !until.IsZero() {
				lazy.Reset(time.Until(until))
			}
			select {
			case <-p.wake:
			case <-lazy.C:
			case <-p.stop:
				return
			}
			lazy.Stop()
			batch, held, until = p.take(time.Now())
		}
		if p.cfg.OnEntry != nil {
			p.cfg.OnEntry(EntryEvent{Commands: len(batch), Held: held})
		}
		// Raft applies entries in log order, so their futures resolve in
		// the order they are sent here.
		p.inflight <- inflight{f: p.r.Apply(p.entry(batch), p.cfg.ApplyTimeout), batch: batch}
	}
}

// take removes the next batch from the queue and counts it in flight (nil:
// the queue is empty, or the entries in flight are at their bound: the
// ordinary one, or MaxInFlight while a command that hands permits over
// waits; or only lazy commands wait, the first until until).
func (p *packer) take(now time.Time) (batch []*proposal, held time.Duration, until time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	limit := p.cfg.OrdinaryInFlight
	if p.urgent > 0 {
		limit = p.cfg.MaxInFlight
	}
	if len(p.queue) == 0 || p.inFlight >= limit {
		return nil, 0, time.Time{}
	}
	if first := p.queue[0].lazyUntil; !first.IsZero() && now.Before(first) && p.onlyLazyLocked() {
		return nil, 0, first
	}
	var holdEnd time.Time
	if holdEnd, held = p.holdLocked(now); !holdEnd.IsZero() {
		return nil, 0, holdEnd
	}
	n, size := 0, 0
	for n < len(p.queue) && n < p.cfg.MaxCommands && (n == 0 || size+len(p.queue[n].data) <= p.cfg.MaxBytes) {
		size += len(p.queue[n].data)
		if p.queue[n].urgent {
			p.urgent--
		}
		n++
	}
	p.inFlight++
	batch = p.queue[:n:n]
	p.queue = p.queue[n:]
	if len(p.queue) == 0 {
		p.queue = nil // let the backing array go
	}
	return batch, held, time.Time{}
}

// holdLocked says until when take holds the queue after an entry
// resolved (zero: no hold; see Hold). Once the hold is over it ends it
// and says how long it lasted (the entry take forms next is the one it
// held back).
func (p *packer) holdLocked(now time.Time) (until time.Time, held time.Duration) {
	if p.holdUntil.IsZero() {
		return time.Time{}, 0
	}
	idleEnd := p.lastArrival.Add(p.cfg.HoldIdle)
	if p.urgent > 0 || p.inFlight > 0 || len(p.queue) >= p.holdTarget || !now.Before(p.holdUntil) || !now.Before(idleEnd) {
		held = now.Sub(p.holdUntil.Add(-p.cfg.Hold)) // the hold began Hold before its end
		p.holdUntil = time.Time{}
		return time.Time{}, held
	}
	if idleEnd.Before(p.holdUntil) {
		return idleEnd, 0
	}
	return p.holdUntil, 0
}

// onlyLazyLocked: every queued command is lazy. The queue is short when
// it is (waiters of hand-offs), and long queues have non-lazy commands
// near the front.
func (p *packer) onlyLazyLocked() bool {
	for _, pr := range p.queue {
		if pr.lazyUntil.IsZero() {
			return false
		}
	}
	return true
}

// entry is the Raft entry of a batch: a lone command as itself (the log
// stays as it was without load), several as one Batch command.
func (p *packer) entry(batch []*proposal) []byte {
	if len(batch) == 1 {
		return batch[0].data
	}
	cmds := make([][]byte, len(batch))
	for i, pr := range batch {
		cmds[i] = pr.data
	}
	data, err := fsm.EncodeBatch(cmds)
	if err != nil {
		panic("leader: encoding a batch of encoded commands failed: " + err.Error()) // only bytes: cannot fail
	}
	return data
}

// finish runs a proposal's then (once).
func (pr *proposal) finish(o outcome) {
	if pr.then != nil {
		pr.then(o.res, o.err)
		pr.then = nil
	}
}

// completions resolves the entries in flight one by one, in log order:
// every proposal's then, then every caller of the entry.
func (p *packer) completions() {
	defer p.wg.Done()
	for e := range p.inflight {
		outs := outcomes(e.f, len(e.batch))
		p.mu.Lock()
		p.inFlight--
		if p.cfg.Hold > 0 && p.inFlight == 0 && len(e.batch) > 0 {
			now := time.Now()
			p.holdUntil = now.Add(p.cfg.Hold)
			p.holdTarget = min(len(p.queue)+len(e.batch), p.cfg.MaxCommands)
			p.lastArrival = now
		}
		p.mu.Unlock()
		p.signal()
		for i, pr := range e.batch {
			pr.finish(outs[i])
		}
		for i, pr := range e.batch {
			pr.done <- outs[i]
		}
	}
}

// outcomes waits for an entry and splits its result among its n commands.
func outcomes(f raft.ApplyFuture, n int) []outcome {
	outs := make([]outcome, n)
	fill := func(o outcome) {
		for i := range outs {
			outs[i] = o
		}
	}
	if err := f.Error(); err != nil {
		fill(outcome{err: err})
		return outs
	}
	res, _ := f.Response().(*fsm.Result)
	switch {
	case n == 1 && res != nil:
		outs[0] = outcome{res: res}
	case n == 1 || res == nil || len(res.Batch) != n:
		fill(outcome{err: errNoResult})
	default:
		for i := range outs {
			outs[i] = outcome{res: res.Batch[i]}
		}
	}
	return outs
}
