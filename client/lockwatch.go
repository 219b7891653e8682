package client

import (
	"context"

	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
)

// LockWatchUpdate is one state of a watched lock, or the end of the
// watch (as WatchUpdate is for a semaphore).
type LockWatchUpdate struct {
	// State is the lock's whole state at State.RaftIndex: its holders and
	// its queue (nil on the last update when Err is set).
	State *pb.WatchLockResponse
	// Resumed is true on the first state of a stream reopened after the
	// previous one ended (a leader change, or a watcher cut off for being
	// slow): the state is complete, the changes in between are folded in.
	Resumed bool
	// Err is set on the last update only: why the watch ended. A context
	// that ended gives its error; a call refused gives its status, and so
	// does Internal (a server bug: never reopened).
	Err error
}

// Watch follows the lock's state: holders and waiters, as
// Client.WatchLockState describes. The session's lease plays no part.
func (l *Lock) Watch(ctx context.Context) <-chan LockWatchUpdate {
	return l.sess.s.c.WatchLockState(ctx, l.sess.s.ns, l.name)
}

// WatchLockState follows a lock's state until ctx ends, as Client.Watch
// follows a semaphore's: the full state first, then a state after every
// change; a slow reader gets the latest state (State.Changes counts the
// changes each update folds in); the watch resumes on the new leader after
// a leader change and after being cut off as a slow watcher, re-reading
// the full state there, and raft indexes never go backwards across a
// resume. A lock needs no creating: watching one nobody holds shows it
// UNLOCKED until someone takes it. A watch that ends for good sends a last
// update carrying Err, then closes the channel; when ctx ends, the channel
// is closed (possibly after an update with ctx's error).
//
// (Client.WatchLock is the raw RPC: one stream, not reopened.)
func (c *Client) WatchLockState(ctx context.Context, ns, lock string) <-chan LockWatchUpdate {
	out := make(chan LockWatchUpdate)
	in := make(chan LockWatchUpdate, 1)
	req := &pb.WatchLockRequest{NamespaceName: ns, LockName: lock}
	go followStreams(ctx, c, func(ctx context.Context) (recvStream[*pb.WatchLockResponse], error) {
		return c.WatchLock(ctx, req)
	}, func(m *pb.WatchLockResponse, resumed bool, err error) LockWatchUpdate {
		return LockWatchUpdate{State: m, Resumed: resumed, Err: err}
	}, in)
	go deliverLatestOf(ctx, in, out, func(older, newer LockWatchUpdate) (LockWatchUpdate, bool) {
		if older.Err != nil || newer.Err != nil {
			return newer, false
		}
		newer.Resumed = newer.Resumed || older.Resumed
		newer.State.Changes += older.State.GetChanges()
		return newer, true
	})
	return out
}
