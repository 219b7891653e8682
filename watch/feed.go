// Package watch serves the queue-visibility calls of the API on one node:
// WatchSemaphore (a stream of a semaphore's state, fed by the state
// machine's applied entries) and ListSemaphoreWaiters (the leader's queue).
// It reads the state machine and the leader's queues; it never writes.
// DESIGN.md says why it is built this way.
package watch

import (
	"io"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/raft"

	"github.com/grackle-coord/grackle/fsm"
	fsmpb "github.com/grackle-coord/grackle/proto/grackle/fsm/v1"
)

// maxPending bounds the applied entries waiting for the dispatcher. Past
// it the feed drops them and tells every subscriber "something changed"
// (each message is a whole state, so nothing is lost but detail).
const maxPending = 16384

// Feed is the change feed: which semaphores each applied entry touched.
// The Raft apply path only appends to a slice (and only while someone
// watches); a dispatcher goroutine decodes the entries and wakes the
// subscribers of the semaphores they touched.
type Feed struct {
	fsm   *fsm.FSM
	nsubs atomic.Int64

	mu       sync.Mutex
	pending  []entry
	overflow bool
	wake     chan struct{}

	subMu sync.RWMutex
	subs  map[fsm.SemKey]map[*Sub]struct{}

	stop     chan struct{}
	stopOnce sync.Once
	done     chan struct{}

	// Dispatched counts entries the dispatcher looked at (tests).
	Dispatched atomic.Uint64
}

type entry struct {
	index uint64
	data  []byte
	res   *fsm.Result
}

// NewFeed starts a feed over f. Close stops its dispatcher.
func NewFeed(f *fsm.FSM) *Feed {
	fd := &Feed{fsm: f, wake: make(chan struct{}, 1), subs: map[fsm.SemKey]map[*Sub]struct{}{},
		stop: make(chan struct{}), done: make(chan struct{})}
	go fd.dispatch()
	return fd
}

// Close stops the dispatcher.
func (fd *Feed) Close() {
	fd.stopOnce.Do(func() { close(fd.stop) })
	<-fd.done
}

// Sub is one subscriber: a semaphore and a wake-up channel. Changes are
// counted and coalesced; the subscriber reads the state when it wakes.
type Sub struct {
	key     fsm.SemKey
	changes atomic.Uint64
	queue   atomic.Bool // the waiter queue changed since the last Take
	wake    chan struct{}
}

// Wake fires (coalesced: one pending wake-up at most) after a change.
func (s *Sub) Wake() <-chan struct{} { return s.wake }

// Take returns the changes noted since the last Take, and whether the
// waiter queue was one of them, and resets both.
func (s *Sub) Take() (changes uint64, queue bool) { return s.changes.Swap(0), s.queue.Swap(false) }

// Note records n changes and wakes the subscriber. It never blocks.
func (s *Sub) Note(n uint64) {
	s.changes.Add(n)
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Subscribe registers a subscriber of one semaphore.
func (fd *Feed) Subscribe(key fsm.SemKey) *Sub {
	s := &Sub{key: key, wake: make(chan struct{}, 1)}
	fd.subMu.Lock()
	m := fd.subs[key]
	if m == nil {
		m = map[*Sub]struct{}{}
		fd.subs[key] = m
	}
	m[s] = struct{}{}
	fd.subMu.Unlock()
	fd.nsubs.Add(1)
	return s
}

// Unsubscribe removes a subscriber.
func (fd *Feed) Unsubscribe(s *Sub) {
	fd.subMu.Lock()
	if m := fd.subs[s.key]; m != nil {
		if _, ok := m[s]; ok {
			delete(m, s)
			fd.nsubs.Add(-1)
		}
		if len(m) == 0 {
			delete(fd.subs, s.key)
		}
	}
	fd.subMu.Unlock()
}

// Subscribers is the number of subscribers.
func (fd *Feed) Subscribers() int { return int(fd.nsubs.Load()) }

// observe is called by the Raft apply path after a batch applied. It only
// appends, and does nothing at all while nobody watches.
func (fd *Feed) observe(logs []*raft.Log, results []interface{}) {
	if fd.nsubs.Load() == 0 {
		return
	}
	fd.mu.Lock()
	for i, l := range logs {
		if l.Type != raft.LogCommand {
			continue
		}
		res, _ := results[i].(*fsm.Result)
		fd.pending = append(fd.pending, entry{index: l.Index, data: l.Data, res: res})
	}
	if len(fd.pending) > maxPending {
		fd.pending, fd.overflow = nil, true
	}
	fd.mu.Unlock()
	fd.signal()
}

// everything tells every subscriber that anything may have changed (a
// snapshot was restored, the dispatcher fell behind).
func (fd *Feed) everything() {
	fd.mu.Lock()
	fd.pending, fd.overflow = nil, true
	fd.mu.Unlock()
	fd.signal()
}

func (fd *Feed) signal() {
	select {
	case fd.wake <- struct{}{}:
	default:
	}
}

func (fd *Feed) dispatch() {
	defer close(fd.done)
	var batch []entry
	for {
		select {
		case <-fd.stop:
			return
		case <-fd.wake:
		}
		fd.mu.Lock()
		batch, fd.pending = fd.pending, batch[:0]
		overflow := fd.overflow
		fd.overflow = false
		fd.mu.Unlock()
		if overflow {
			fd.noteAll()
		}
		for _, e := range batch {
			fd.dispatchEntry(e)
		}
		fd.Dispatched.Add(uint64(len(batch)))
		clear(batch) // drop the references to entries' data
	}
}

func (fd *Feed) noteAll() {
	fd.subMu.RLock()
	defer fd.subMu.RUnlock()
	for _, m := range fd.subs {
		for s := range m {
			s.Note(1)
		}
	}
}

// dispatchEntry wakes the subscribers of every semaphore the entry touched.
func (fd *Feed) dispatchEntry(e entry) {
	cmd, err := fsm.Decode(e.data)
	if err != nil {
		return // the state machine refused it too: nothing changed
	}
	fd.dispatchCommand(cmd, e.res)
}

// dispatchCommand notes one change per command on each semaphore it
// touched; the commands of a Batch entry (packed by the leader) count one
// by one, each with its own result.
func (fd *Feed) dispatchCommand(cmd *fsmpb.Command, res *fsm.Result) {
	switch op := cmd.GetOp().(type) {
	case *fsmpb.Command_Batch:
		for i, data := range op.Batch.GetCommands() {
			sub, err := fsm.Decode(data)
			if err != nil {
				continue
			}
			var r *fsm.Result
			if res != nil && i < len(res.Batch) {
				r = res.Batch[i]
			}
			fd.dispatchCommand(sub, r)
		}
		return
	case *fsmpb.Command_ExtendLeases:
		fd.noteAll() // every holder's expires_at moved
		return
	}
	fd.subMu.RLock()
	defer fd.subMu.RUnlock()
	if len(fd.subs) == 0 {
		return
	}
	keys := Touched(cmd, res, fd.leaseHolds)
	for i, k := range keys {
		if slices.Contains(keys[:i], k) {
			continue
		}
		for s := range fd.subs[k] {
			s.Note(1)
		}
	}
}

// Touched lists the semaphores whose watched state (the semaphore, its
// holders, its queue) an applied command may have changed. leaseHolds
// names the semaphores a lease holds (a refresh moves their holders'
// expires_at).
func Touched(cmd *fsmpb.Command, res *fsm.Result, leaseHolds func(ns, lease string) []string) []fsm.SemKey {
	var out []fsm.SemKey
	add := func(ns, sem string) { out = append(out, fsm.SemKey{Namespace: ns, Semaphore: sem}) }
	switch op := cmd.GetOp().(type) {
	case *fsmpb.Command_CreateSemaphore:
		add(op.CreateSemaphore.GetNamespaceName(), op.CreateSemaphore.GetName())
	case *fsmpb.Command_UpdateSemaphore:
		add(op.UpdateSemaphore.GetNamespaceName(), op.UpdateSemaphore.GetName())
	case *fsmpb.Command_DeleteSemaphore:
		add(op.DeleteSemaphore.GetNamespaceName(), op.DeleteSemaphore.GetName())
	case *fsmpb.Command_Acquire:
		g := op.Acquire.GetGrant()
		add(g.GetNamespaceName(), g.GetSemaphoreName())
	case *fsmpb.Command_Release:
		add(op.Release.GetNamespaceName(), op.Release.GetSemaphoreName())
	case *fsmpb.Command_RefreshLease:
		if leaseHolds != nil {
			// A lock lease's "holds" are lock feed keys already (LockKey).
			for _, sem := range leaseHolds(op.RefreshLease.GetNamespaceName(), op.RefreshLease.GetLeaseId()) {
				add(op.RefreshLease.GetNamespaceName(), sem)
			}
		}
	}
	for _, g := range cmd.GetGrants() {
		add(g.GetNamespaceName(), g.GetSemaphoreName())
	}
	out = append(out, touchedLocks(cmd, res)...)
	if res != nil {
		out = append(out, res.Freed...)
		out = append(out, res.RemovedSemaphores...)
	}
	return out
}

// FSM is the state machine Raft applies to, with the feed observing it:
// the apply path pays one atomic load per batch while nobody watches.
type FSM struct {
	raft.BatchingFSM
	feed *Feed
}

var (
	_ raft.FSM         = (*FSM)(nil)
	_ raft.BatchingFSM = (*FSM)(nil)
)

// Observe wraps the node's state machine (the fsm package's, or a wrapper
// of it) so that fd sees every applied entry.
func Observe(f raft.BatchingFSM, fd *Feed) *FSM { return &FSM{BatchingFSM: f, feed: fd} }

// Apply implements raft.FSM.
func (o *FSM) Apply(l *raft.Log) interface{} { return o.ApplyBatch([]*raft.Log{l})[0] }

// ApplyBatch implements raft.BatchingFSM.
func (o *FSM) ApplyBatch(logs []*raft.Log) []interface{} {
	out := o.BatchingFSM.ApplyBatch(logs)
	o.feed.observe(logs, out)
	return out
}

// Restore implements raft.FSM: the whole state changed.
func (o *FSM) Restore(rc io.ReadCloser) error {
	err := o.BatchingFSM.Restore(rc)
	o.feed.everything()
	return err
}

// QueueChanged wakes the subscribers of key after its waiter queue changed
// (a waiter queued, granted or gone: leader memory, no Raft entry of its
// own). It never blocks: the leader calls it with a queue's lock held.
func (fd *Feed) QueueChanged(key fsm.SemKey) {
	if fd.nsubs.Load() == 0 {
		return
	}
	fd.subMu.RLock()
	for s := range fd.subs[key] {
		s.queue.Store(true)
		s.Note(1)
	}
	fd.subMu.RUnlock()
}
