package webui

// The locks part of the view: a namespace's held locks (the page draws
// them as a tree by path segment), a lock's queue, lock leases, and a
// lock's holders and queue live.

import (
	"context"
	"errors"
	"net/http"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/grackle-coord/grackle/apierr"
	"github.com/grackle-coord/grackle/client"
	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
)

// locks lists a namespace's held locks in name order, each with its
// holders; ?prefix= (a lock name) keeps that lock and its descendants.
func (h *handler) locks(w http.ResponseWriter, r *http.Request) {
	serveList(h, w, r, func(ctx context.Context, be Backend, tok string) ([]*pb.Lock, string, error) {
		p, err := be.ListLocks(ctx, &pb.ListLocksRequest{NamespaceName: r.PathValue("ns"),
			Prefix: r.URL.Query().Get("prefix"), Limit: 250, PaginationToken: tok})
		return p.GetLocks(), p.GetNextPaginationToken(), err
	}, func(items []*pb.Lock, next string) proto.Message {
		return &pb.ListLocksResponse{Locks: items, NextPaginationToken: next}
	})
}

// lockWaiters lists a lock's queue in order. The page reads it when a
// watch message carries only part of a long queue.
func (h *handler) lockWaiters(w http.ResponseWriter, r *http.Request) {
	serveList(h, w, r, func(ctx context.Context, be Backend, tok string) ([]*pb.LockWaiter, string, error) {
		p, err := be.ListLockWaiters(ctx, &pb.ListLockWaitersRequest{NamespaceName: r.PathValue("ns"),
			LockName: r.PathValue("lock"), Limit: 250, PaginationToken: tok})
		return p.GetWaiters(), p.GetNextPaginationToken(), err
	}, func(items []*pb.LockWaiter, next string) proto.Message {
		return &pb.ListLockWaitersResponse{Waiters: items, NextPaginationToken: next}
	})
}

func (h *handler) lockLeases(w http.ResponseWriter, r *http.Request) {
	serveList(h, w, r, func(ctx context.Context, be Backend, tok string) ([]*pb.LockLease, string, error) {
		p, err := be.ListLockLeases(ctx, &pb.ListLockLeasesRequest{NamespaceName: r.PathValue("ns"),
			ProcessId: r.URL.Query().Get("process_id"), Limit: 250, PaginationToken: tok})
		return p.GetLeases(), p.GetNextPaginationToken(), err
	}, func(items []*pb.LockLease, next string) proto.Message {
		return &pb.ListLockLeasesResponse{Leases: items, NextPaginationToken: next}
	})
}

// lockWatch relays a lock's states as server-sent events, as watch does
// for a semaphore ("state" events carry a WatchLockResponse).
func (h *handler) lockWatch(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithCancel(withToken(r.Context(), r))
	defer cancel()
	be, err := h.backend(ctx)
	if err != nil {
		writeErr(w, err)
		return
	}
	req := &pb.WatchLockRequest{NamespaceName: r.PathValue("ns"), LockName: r.PathValue("lock")}
	relay(ctx, w, watchLock(ctx, be, req), func(u lockUpdate) (proto.Message, bool, error) {
		return u.state, u.resumed, u.err
	})
}

// lockUpdate is one state of a watched lock, or (err set, last) the end.
type lockUpdate struct {
	state *pb.WatchLockResponse
	// resumed: the first state of a stream reopened after the previous
	// one ended; it is complete, the changes in between folded in.
	resumed bool
	err     error
}

// resumeBackoff is the pause before reopening a lock watch for the
// attempt-th time in a row (tests shorten it).
var resumeBackoff = func(attempt int) time.Duration {
	return min(100*time.Millisecond<<min(attempt, 5), 2*time.Second)
}

// watchLock follows a lock as client.Watch follows a semaphore, over the
// raw WatchLock stream: it reopens the stream when it ends for a reason
// that reopening cures (a leader change, a broken connection, a watcher
// cut off as too slow), never lets the raft index go backwards across a
// reopen, and hands the reader only the latest state when it is slower
// than the changes (Changes summed). The channel gets a last update with
// err when the watch ends for good, then is closed.
func watchLock(ctx context.Context, be Backend, req *pb.WatchLockRequest) <-chan lockUpdate {
	out := make(chan lockUpdate, 1)
	go func() {
		defer close(out)
		var last uint64
		resumed := false
		for attempt := 0; ; {
			st, err := be.WatchLock(ctx, req)
			if err == nil {
				attempt = 0
				for {
					var m *pb.WatchLockResponse
					if m, err = st.Recv(); err != nil {
						break
					}
					if m.RaftIndex < last {
						continue // an older view than one already sent
					}
					last = m.RaftIndex
					// Every message is the whole state, so the first one
					// sent from a reopened stream is the resume, even when
					// its initial message was skipped as older.
					if !offerLatest(ctx, out, lockUpdate{state: m, resumed: resumed}) {
						return
					}
					resumed = false
				}
			}
			if ctx.Err() != nil {
				return
			}
			if !resumable(err) {
				offerLatest(ctx, out, lockUpdate{err: err})
				return
			}
			resumed = true
			select {
			case <-time.After(resumeBackoff(attempt)):
			case <-ctx.Done():
				return
			}
			attempt++
		}
	}()
	return out
}

// offerLatest puts u in out (a channel of one slot that only this
// goroutine sends on), replacing an update the reader has not taken yet:
// a slow reader skips states, never falls behind. It is false when ctx
// has ended.
func offerLatest(ctx context.Context, out chan lockUpdate, u lockUpdate) bool {
	for {
		select {
		case out <- u:
			return true
		case old := <-out:
			if u.err == nil && old.err == nil {
				u.state.Changes += old.state.Changes
				u.resumed = u.resumed || old.resumed
			}
		case <-ctx.Done():
			return false
		}
	}
}

// resumable: the stream ended for a reason reopening can cure, as the
// client decides for semaphore watches; not a refusal (NotFound,
// InvalidArgument, PermissionDenied, a node's limit of streams) nor
// Internal, a server bug that reopening would only repeat.
func resumable(err error) bool {
	if errors.Is(err, client.ErrClientClosed) {
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
