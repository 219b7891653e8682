package server

import (
	"context"
	"net"

	"google.golang.org/grpc"

	"github.com/grackle-coord/grackle/client"
	"github.com/grackle-coord/grackle/leader"
	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
	"github.com/grackle-coord/grackle/rpc"
	"github.com/grackle-coord/grackle/watch"
	"github.com/grackle-coord/grackle/webui"
)

// grackleAPI is the GrackleService of a node: the rpc package's calls,
// with the queue-visibility calls served by the watch package.
type grackleAPI struct {
	*rpc.Service
	watch *watch.Service
}

func (a grackleAPI) ListSemaphoreWaiters(ctx context.Context, r *pb.ListSemaphoreWaitersRequest) (*pb.ListSemaphoreWaitersResponse, error) {
	return a.watch.ListSemaphoreWaiters(ctx, r)
}

func (a grackleAPI) WatchSemaphore(r *pb.WatchSemaphoreRequest, st grpc.ServerStreamingServer[pb.WatchSemaphoreResponse]) error {
	return a.watch.WatchSemaphore(r, st)
}

func (a grackleAPI) ListLockWaiters(ctx context.Context, r *pb.ListLockWaitersRequest) (*pb.ListLockWaitersResponse, error) {
	return a.watch.ListLockWaiters(ctx, r)
}

func (a grackleAPI) WatchLock(r *pb.WatchLockRequest, st grpc.ServerStreamingServer[pb.WatchLockResponse]) error {
	return a.watch.WatchLock(r, st)
}

// uiBackend is the web view's view of the API: a Go client of this node
// (it follows the leader like any client), made on the first page load.
// It carries no token of its own: each page request passes the browser's.
func (s *Server) uiBackend(ctx context.Context) (webui.Backend, error) {
	cfg := client.Config{Endpoints: []string{selfDialAddr(s.GRPCAddr())}, Logger: s.log.Named("webui")}
	if s.sec.api != nil {
		cfg.DialOptions = []grpc.DialOption{grpc.WithTransportCredentials(s.sec.peerDialCreds())}
	}
	c, err := client.New(ctx, cfg)
	if err != nil {
		return nil, err
	}
	s.uiClient.Store(c)
	return c, nil
}

// leaderQueues reads one leader term's waiter queues for the watch
// package (calls still deciding whether they must wait are not waiters).
type leaderQueues struct{ t *leader.Term }

func (q leaderQueues) Waiters(ns, sem string) []watch.QueuedWaiter {
	ws := q.t.Waiters(ns, sem)
	out := make([]watch.QueuedWaiter, 0, len(ws))
	for _, w := range ws {
		if w.State == leader.Proposed {
			continue
		}
		out = append(out, watch.QueuedWaiter{Seq: w.Seq, LeaseID: w.LeaseID, Weight: w.Weight,
			Since: w.Since.UnixNano(), Deadline: w.Deadline.UnixNano()})
	}
	return out
}

func (q leaderQueues) LockWaiters(ns, lock string) []watch.QueuedWaiter {
	ws := q.t.LockWaiters(ns, lock)
	out := make([]watch.QueuedWaiter, 0, len(ws))
	for _, w := range ws {
		if w.State == leader.Proposed {
			continue
		}
		out = append(out, watch.QueuedWaiter{Seq: w.Seq, LeaseID: w.LeaseID, Since: w.Since.UnixNano(), Deadline: w.Deadline.UnixNano(),
			Exclusive: w.Exclusive, Upgrade: w.Upgrade})
	}
	return out
}

// queuesOf returns the queues of api's current term, nil between terms.
func queuesOf(api *rpc.Service) func() watch.Queues {
	return func() watch.Queues {
		if t := api.Leader().Term(); t != nil {
			return leaderQueues{t}
		}
		return nil
	}
}

// observers passes the leader's events to each of its observers.
type observers []leader.Observer

func (os observers) WaiterEvent(e leader.WaiterEvent) {
	for _, o := range os {
		o.WaiterEvent(e)
	}
}

func (os observers) ExpiryEvent(e leader.ExpiryEvent) {
	for _, o := range os {
		o.ExpiryEvent(e)
	}
}

func (os observers) EntryEvent(e leader.EntryEvent) {
	for _, o := range os {
		if eo, ok := o.(leader.EntryObserver); ok {
			eo.EntryEvent(e)
		}
	}
}

func (os observers) ReadRoundEvent(e leader.ReadRoundEvent) {
	for _, o := range os {
		if ro, ok := o.(leader.ReadRoundObserver); ok {
			ro.ReadRoundEvent(e)
		}
	}
}

// queueFeed wakes the watchers of a semaphore whose queue changed.
type queueFeed struct{ feed *watch.Feed }

func (q queueFeed) WaiterEvent(e leader.WaiterEvent) {
	if e.Lock != "" {
		q.feed.QueueChanged(watch.LockKey(e.Key.Namespace, e.Lock))
		return
	}
	q.feed.QueueChanged(e.Key)
}
func (queueFeed) ExpiryEvent(leader.ExpiryEvent) {}

// selfDialAddr is an address this node can dial itself at: a wildcard
// bind (0.0.0.0, [::]) is dialed on loopback, which is also a name its
// certificate carries (deploy/gen-certs.sh), where "0.0.0.0" never is.
func selfDialAddr(bound string) string {
	h, p, err := net.SplitHostPort(bound)
	if err != nil {
		return bound
	}
	if ip := net.ParseIP(h); h == "" || (ip != nil && ip.IsUnspecified()) {
		return net.JoinHostPort("127.0.0.1", p)
	}
	return bound
}
