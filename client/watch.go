package client

import (
	"context"
	"errors"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grackle-coord/grackle/apierr"
	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
)

// ListSemaphoreWaiters calls GrackleService.ListSemaphoreWaiters on the leader.
// Retried on any Unavailable.
func (c *Client) ListSemaphoreWaiters(ctx context.Context, in *pb.ListSemaphoreWaitersRequest, opts ...grpc.CallOption) (*pb.ListSemaphoreWaitersResponse, error) {
	return call(c, ctx, retryAlways, in, opts, pb.GrackleServiceClient.ListSemaphoreWaiters)
}

// WatchSemaphore opens GrackleService.WatchSemaphore on the leader. Opening
// is retried on any Unavailable (a node that does not lead names the
// leader) until the first message, the full state, has arrived; the stream
// it returns starts with that message. A stream that ends later is not
// reopened: Watch does that.
func (c *Client) WatchSemaphore(ctx context.Context, in *pb.WatchSemaphoreRequest, opts ...grpc.CallOption) (grpc.ServerStreamingClient[pb.WatchSemaphoreResponse], error) {
	return openPrimed(c, ctx, opts, func(ctx context.Context, cc grpc.ClientConnInterface, o []grpc.CallOption) (grpc.ServerStreamingClient[pb.WatchSemaphoreResponse], error) {
		return pb.NewGrackleServiceClient(cc).WatchSemaphore(ctx, in, o...)
	})
}

// WatchUpdate is one state of a watched semaphore, or the end of the watch.
type WatchUpdate struct {
	// State is the semaphore's whole state at State.RaftIndex (nil on the
	// last update when Err is set).
	State *pb.WatchSemaphoreResponse
	// Resumed is true on the first state of a stream reopened after the
	// previous one ended (a leader change, or a watcher cut off for being
	// slow): the state is complete, the changes in between are folded in.
	Resumed bool
	// Err is set on the last update only: why the watch ended. A context
	// that ended gives its error; a semaphore that does not exist (or was
	// deleted) gives NotFound; a call refused gives its status, and so
	// does Internal (a server bug: never reopened).
	Err error
}

// Watch follows the semaphore's state: holders, waiters and permits, as
// Client.Watch describes. The session's lease plays no part.
func (m *Semaphore) Watch(ctx context.Context) <-chan WatchUpdate {
	return m.sess.c.Watch(ctx, m.sess.ns, m.name)
}

// Watch follows a semaphore's state until ctx ends. The channel receives
// the full state first, then a state after every change; a reader that is
// slower than the changes gets the latest state (updates are coalesced,
// never queued without bound; State.Changes counts the changes each one
// folds in). The watch resumes on the new leader after a leader change
// and after being cut off as a slow watcher, and re-reads the full state
// there; raft indexes never go backwards across a resume. A watch that ends
// for good sends a last update carrying Err, then closes the channel; when
// ctx ends, the channel is closed (possibly after an update with ctx's
// error).
func (c *Client) Watch(ctx context.Context, ns, sem string) <-chan WatchUpdate {
	out := make(chan WatchUpdate)
	in := make(chan WatchUpdate, 1)
	go c.watchLoop(ctx, &pb.WatchSemaphoreRequest{NamespaceName: ns, SemaphoreName: sem}, in)
	go deliverLatest(ctx, in, out)
	return out
}

// watchLoop reads streams, reopening them, and hands every update to in
// (which deliverLatest drains at once).
func (c *Client) watchLoop(ctx context.Context, req *pb.WatchSemaphoreRequest, in chan<- WatchUpdate) {
	followStreams(ctx, c, func(ctx context.Context) (recvStream[*pb.WatchSemaphoreResponse], error) {
		return c.WatchSemaphore(ctx, req)
	}, func(m *pb.WatchSemaphoreResponse, resumed bool, err error) WatchUpdate {
		return WatchUpdate{State: m, Resumed: resumed, Err: err}
	}, in)
}

// watchMessage is what followStreams reads of a watch stream's messages
// (WatchSemaphoreResponse, WatchLockResponse).
type watchMessage interface {
	GetRaftIndex() uint64
	GetInitial() bool
}

// recvStream is the receiving end of a server stream of M.
type recvStream[M any] interface{ Recv() (M, error) }

// followStreams opens streams with open, reopening them after the ends
// that resumable says a reopen cures, and hands every state to in as
// update(m, resumed, nil), then the end as update(zero, false, err); it
// closes in when done.
func followStreams[M watchMessage, U any](ctx context.Context, c *Client,
	open func(context.Context) (recvStream[M], error),
	update func(m M, resumed bool, err error) U, in chan<- U) {
	defer close(in)
	var zero M
	var last uint64
	resumed := false
	for attempt := 0; ; {
		st, err := open(ctx)
		if err == nil {
			attempt = 0
			for {
				var m M
				if m, err = st.Recv(); err != nil {
					break
				}
				if m.GetRaftIndex() < last {
					continue // an older view than one already delivered
				}
				last = m.GetRaftIndex()
				in <- update(m, resumed && m.GetInitial(), nil)
				if m.GetInitial() {
					resumed = false
				}
			}
		}
		if ctx.Err() != nil {
			in <- update(zero, false, ctx.Err())
			return
		}
		if !resumable(err) {
			in <- update(zero, false, err)
			return
		}
		resumed = true
		if serr := sleepCtx(ctx, c.backoff(attempt)); serr != nil {
			in <- update(zero, false, serr)
			return
		}
		attempt++
	}
}

// resumable: the stream ended for a reason that reopening can cure (a
// leader change, a broken connection, a watcher cut off as too slow), not
// a refusal (NotFound, InvalidArgument, PermissionDenied, the node's limit
// of streams) nor Internal: that is a bug on the server, and reopening
// would only repeat it (forever).
func resumable(err error) bool {
	if errors.Is(err, ErrClientClosed) {
		return false
	}
	switch status.Code(err) {
	case codes.Unavailable, codes.Aborted, codes.Unknown:
		return true
	case codes.ResourceExhausted:
		return apierr.ReasonOf(err) == apierr.WatchStalled
	}
	return false
}

// deliverLatest forwards updates from in to out, keeping only the latest
// undelivered state when out's reader is slow (Changes are summed). Once
// ctx has ended it stops delivering: it drains in and closes out.
func deliverLatest(ctx context.Context, in <-chan WatchUpdate, out chan<- WatchUpdate) {
	deliverLatestOf(ctx, in, out, func(older, newer WatchUpdate) (WatchUpdate, bool) {
		if older.Err != nil || newer.Err != nil {
			return newer, false
		}
		// Fold the undelivered state into the newer one (which came from
		// Recv and is ours to change).
		newer.Resumed = newer.Resumed || older.Resumed
		newer.State.Changes += older.State.GetChanges()
		return newer, true
	})
}

// deliverLatestOf is deliverLatest for any kind of update: fold merges an
// undelivered update into a newer one and reports true, or reports false
// when one of them is the end (an error), which is then delivered after
// the last state.
func deliverLatestOf[U any](ctx context.Context, in <-chan U, out chan<- U, fold func(older, newer U) (U, bool)) {
	defer close(out)
	var pending *U
	for {
		var send chan<- U
		var next U
		if pending != nil {
			send, next = out, *pending
		} else if in == nil {
			return
		}
		select {
		case u, ok := <-in:
			switch {
			case !ok:
				in = nil
			case pending == nil:
				pending = &u
			default:
				if merged, ok := fold(*pending, u); ok {
					pending = &merged
					break
				}
				// The end: deliver the last state first, then the error.
				select {
				case out <- *pending:
				case <-ctx.Done():
				}
				pending = &u
			}
		case send <- next:
			pending = nil
		case <-ctx.Done():
			// Drain what the stream loop still sends until it closes in;
			// once in is closed (nil here) there is nothing to drain, and
			// ranging over a nil channel would block for ever.
			if in != nil {
				for range in {
				}
			}
			return
		}
	}
}
