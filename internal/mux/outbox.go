package mux

import (
	"context"
	"runtime"
	"sync"

	"google.golang.org/grpc/metadata"
)

// outbox lets many goroutines send on one stream, which takes one sender
// at a time, and gathers what they send meanwhile into batches: whoever
// puts a message while no one is writing becomes the writer, and writes
// everything queued, again and again, until the queue is empty. Nothing
// waits for company (a lone message goes at once); messages that arrive
// while a write is under way share the next one. So under load one
// stream message, with its fixed cost at both ends, carries many calls or
// results, and with no load nothing changes.
//
// Order is kept: write sees the messages in the order put took them, and
// one write ends before the next begins.
type outbox[T any] struct {
	// write sends one batch (one or more messages, in order). It is called
	// by one goroutine at a time and must not keep the slice.
	write func([]T)

	// limit bounds the queue (0: none): put waits while this many wait
	// for a writer that is busy. A server's receive loop answers a call
	// it refuses through the outbox; without the bound, a client that
	// sends calls and never reads their results (the writer blocked by
	// flow control) would grow the queue without end, where a synchronous
	// send held the loop back.
	limit int
	room  *sync.Cond // signalled when the writer takes the queue

	mu    sync.Mutex
	queue []T
	busy  bool // a goroutine is writing; it will take what is queued
	spare []T  // the writer's previous batch, reused as the next queue
}

// writerPasses is how many batches a goroutine that became the writer
// writes before it hands the rest to a goroutine of its own: a caller of
// put has work of its own (a client's caller waits for its answer, a
// server's worker for its next call) and must not be kept writing for
// others for as long as they keep coming.
const writerPasses = 4

func newOutbox[T any](write func([]T), limit int) *outbox[T] {
	o := &outbox[T]{write: write, limit: limit}
	o.room = sync.NewCond(&o.mu)
	return o
}

// put queues v and, when no one is writing, writes it (and whatever comes
// meanwhile) before it returns.
func (o *outbox[T]) put(v T) {
	o.mu.Lock()
	for o.limit > 0 && o.busy && len(o.queue) >= o.limit {
		o.room.Wait()
	}
	o.queue = append(o.queue, v)
	if o.busy {
		o.mu.Unlock()
		return
	}
	o.busy = true
	o.mu.Unlock()
	runtime.Gosched()
	o.flush(writerPasses)
}

// flush writes batches until the queue is empty; after passes batches
// (-1: no bound) it leaves the rest to a new goroutine.
func (o *outbox[T]) flush(passes int) {
	for pass := 0; ; pass++ {
		o.mu.Lock()
		if len(o.queue) == 0 {
			o.busy = false
			o.mu.Unlock()
			return
		}
		if pass == passes {
			o.mu.Unlock()
			go o.flush(-1)
			return
		}
		batch := o.queue
		o.queue = o.spare[:0]
		if o.limit > 0 {
			o.room.Broadcast()
		}
		o.mu.Unlock()
		o.write(batch)
		clear(batch) // drop the references for the collector
		o.spare = batch[:0]
	}
}

// maxBatchBytes bounds the encoded size of one batched stream message, so
// that a batch stays far below gRPC's message size limit (4 MiB by
// default) whatever its calls carry; a message larger than this goes alone.
const maxBatchBytes = 64 << 10

// chunks calls emit with consecutive runs of items, in order: with
// batching, runs whose sizes add up to at most maxBatchBytes (a run of one
// when an item alone is larger); without, or for a lone item, runs of one
// (and size is not called). The caller sends a run of one as itself and a
// longer run as one batch message.
func chunks[T any](items []T, batching bool, size func(T) int, emit func([]T)) {
	if !batching || len(items) == 1 {
		for i := range items {
			emit(items[i : i+1])
		}
		return
	}
	start, bytes := 0, 0
	for i, it := range items {
		n := size(it) + 8 // the field's tag and length
		if i > start && bytes+n > maxBatchBytes {
			emit(items[start:i])
			start, bytes = i, 0
		}
		bytes += n
	}
	if start < len(items) {
		emit(items[start:])
	}
}

// batchKey is the metadata key by which each end says it takes batched
// messages: the client in the stream's request metadata (results may
// come batched), the server in its response header (calls may go
// batched). Either end of an older version leaves it out, and then gets
// one message per call or result, as before.
const batchKey = "grackle-mux-batch"

// wantsBatches reports whether the client that opened the stream of ctx
// takes batched results.
func wantsBatches(ctx context.Context) bool {
	v := metadata.ValueFromIncomingContext(ctx, batchKey)
	return len(v) > 0 && v[0] == "1"
}
