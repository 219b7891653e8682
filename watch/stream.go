package watch

import (
	"context"
	"fmt"
	"io"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/grackle-coord/grackle/apierr"
	"github.com/grackle-coord/grackle/fsm"
	"github.com/grackle-coord/grackle/internal/peerconn"
	"github.com/grackle-coord/grackle/internal/vtcodec"
	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
)

// WatchSemaphore streams a semaphore's state: the whole state first, then
// a state after every change (coalesced while the stream is busy). It runs
// on the leader; a follower relays the leader's stream.
func (s *Service) WatchSemaphore(r *pb.WatchSemaphoreRequest, stream grpc.ServerStreamingServer[pb.WatchSemaphoreResponse]) error {
	if err := validate(r.NamespaceName, r.SemaphoreName); err != nil {
		return err
	}
	key := fsm.SemKey{Namespace: r.NamespaceName, Semaphore: r.SemaphoreName}
	return serveWatch(s, stream, key, "semaphore", r.SemaphoreName,
		func(ctx context.Context) (*pb.WatchSemaphoreResponse, error) { return s.state(ctx, key) },
		func(m *pb.WatchSemaphoreResponse, initial bool, changes uint64) {
			m.Initial, m.Changes = initial, changes
		},
		func(ctx context.Context, cc grpc.ClientConnInterface, o ...grpc.CallOption) (grpc.ServerStreamingClient[pb.WatchSemaphoreResponse], error) {
			return pb.NewGrackleServiceClient(cc).WatchSemaphore(ctx, r, o...)
		})
}

// watchMsg is a watch stream's message (a pointer to M): a whole state as
// of a Raft index.
type watchMsg[M any] interface {
	*M
	GetRaftIndex() uint64
}

// serveWatch runs one watch stream of the object the feed knows as key
// (kind and name for logs): on the leader, the state read by read first,
// then after every change; on a follower, the leader's stream relayed
// (open opens it there). mark sets a message's initial flag and count of
// changes.
func serveWatch[M any, P watchMsg[M]](s *Service, stream grpc.ServerStreamingServer[M], key fsm.SemKey, kind, name string,
	read func(context.Context) (P, error), mark func(m P, initial bool, changes uint64),
	open func(context.Context, grpc.ClientConnInterface, ...grpc.CallOption) (grpc.ServerStreamingClient[M], error)) error {
	ctx := stream.Context()
	release, err := s.admit(ctx)
	if err != nil {
		return err
	}
	defer release()
	term := s.lead.Current()
	if term == nil {
		return relayWatch(s, stream, open)
	}
	if s.feed.Subscribers() >= s.cfg.MaxWatchers {
		return status.Errorf(codes.ResourceExhausted, "watchers: limit of %d streams on node %s reached", s.cfg.MaxWatchers, s.cfg.NodeID)
	}
	if err := term.Ready(ctx); err != nil {
		return s.notReady(ctx, err)
	}
	if err := s.authorize(ctx); err != nil {
		return err
	}
	// Subscribe before the first read: no change can fall between them.
	sub := s.feed.Subscribe(key)
	defer s.feed.Unsubscribe(sub)

	// One goroutine sends, so that a watcher that stops reading (its
	// stream blocked in Send) can be cut off: the loop below never blocks
	// on it and returns ResourceExhausted once a send has stalled too long.
	out := make(chan P)
	sent := make(chan error, 1)
	defer close(out)
	go func() {
		for m := range out {
			err := stream.Send((*M)(m))
			sent <- err
			if err != nil {
				return
			}
		}
	}()

	stall := time.NewTimer(time.Hour)
	stall.Stop()
	defer stall.Stop()
	busy, dirty, initial := false, true, true
	var lastIndex uint64
	for {
		if dirty && !busy {
			changes, queue := sub.Take()
			m, err := read(ctx)
			if err != nil {
				return err
			}
			dirty = false
			// An apply that this stream's first read already saw wakes it
			// once more: nothing new, nothing sent. A queue change has no
			// entry of its own: it is sent with the index it sees.
			if initial || m.GetRaftIndex() > lastIndex || queue {
				mark(m, initial, max(changes, 1))
				initial = false
				lastIndex = m.GetRaftIndex()
				out <- m
				busy = true
				stall.Reset(s.cfg.StallTimeout)
			}
		}
		select {
		case <-sub.Wake():
			dirty = true
		case err := <-sent:
			if err != nil {
				return err
			}
			busy = false
			stall.Stop()
		case <-stall.C:
			s.log.Warn("watcher cut off: it took no message for too long", kind, name, "stall", s.cfg.StallTimeout)
			return apierr.New(codes.ResourceExhausted, apierr.WatchStalled, s.cfg.NodeID, apierr.Leader{},
				fmt.Sprintf("watch: the stream took no message for %v (a slow watcher is cut off so it never holds the leader back); reopen it to read the whole state again", s.cfg.StallTimeout))
		case <-term.Done():
			// Name the next leader if one is known soon, so the client
			// goes straight there.
			wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			id, addr := s.lead.NextLeader(wctx)
			cancel()
			if id == s.cfg.NodeID {
				id, addr = "", ""
			}
			return s.unavailable(ctx, "leadership changed; reopen the watch on the new leader", id, addr)
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		}
	}
}

// state reads the whole watched state of key: the state machine's view,
// then the queue (which the leader changes only after the entries it
// reacts to have applied, so the queue is at least as new as the view).
func (s *Service) state(ctx context.Context, key fsm.SemKey) (*pb.WatchSemaphoreResponse, error) {
	now := s.cfg.Now()
	sem, holders, idx, err := s.fsm.SemaphoreView(key.Namespace, key.Semaphore, now, MaxListed)
	if err != nil {
		return nil, statusOf(err)
	}
	m := &pb.WatchSemaphoreResponse{RaftIndex: idx, Semaphore: sem, Holders: holders}
	q, err := s.queues(ctx)
	if err != nil {
		return nil, err
	}
	all := q.Waiters(key.Namespace, key.Semaphore)
	m.WaitersCount = int64(len(all))
	if len(all) > MaxListed {
		all = all[:MaxListed]
	}
	m.Waiters = s.describe(key.Namespace, key.Semaphore, all, 0)
	holders, waiters := m.Holders, m.Waiters
	m.Holders, m.Waiters = nil, nil
	m.Holders, m.Waiters = fitLists(vtcodec.Size(m), holders, waiters)
	return m, nil
}

// relayWatch serves a watch on a follower by relaying the leader's stream;
// the leader's end (Unavailable on a leader change, with its trailer) is
// passed on as it is.
func relayWatch[M any](s *Service, stream grpc.ServerStreamingServer[M],
	open func(context.Context, grpc.ClientConnInterface, ...grpc.CallOption) (grpc.ServerStreamingClient[M], error)) error {
	ctx := stream.Context()
	cc, l, err := s.leaderConn(ctx)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var tr metadata.MD
	up, err := open(peerconn.Forward(ctx), cc, grpc.Trailer(&tr))
	if err != nil {
		return s.relayed(stream.Context(), err, l)
	}
	for {
		m, err := up.Recv()
		if err != nil {
			relayTrailer(stream.Context(), tr)
			if err == io.EOF {
				return nil
			}
			if status.Code(err) == codes.Canceled && stream.Context().Err() == nil {
				// The connection to the leader was closed under the relay
				// (this node stopping, or the connection retired), not by
				// the caller: a retryable "not here", so its client resumes.
				return s.elsewhere(stream.Context(), "the relay to the leader was cut: "+status.Convert(err).Message())
			}
			return s.relayed(stream.Context(), err, l)
		}
		if err := stream.Send(m); err != nil {
			return err
		}
	}
}
