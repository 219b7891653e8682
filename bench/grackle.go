package bench

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
)

// Grackle drives a Grackle cluster over its gRPC API. Worker w uses
// conns[w % len(conns)]; leader answers GetClusterStatus for the commit
// index (any node's view would do, the leader's is the freshest).
type Grackle struct {
	conns  []pb.GrackleServiceClient
	leader pb.ClusterServiceClient
	ns     string
}

// NewGrackle returns the backend; conns must not be empty. A conn may be a
// *grpc.ClientConn or a multiplexed one (internal/mux).
func NewGrackle(conns []grpc.ClientConnInterface, leader grpc.ClientConnInterface) *Grackle {
	g := &Grackle{leader: pb.NewClusterServiceClient(leader)}
	for _, c := range conns {
		g.conns = append(g.conns, pb.NewGrackleServiceClient(c))
	}
	return g
}

func (g *Grackle) cl(w int) pb.GrackleServiceClient { return g.conns[w%len(g.conns)] }

// Setup creates the run's namespace.
func (g *Grackle) Setup(ctx context.Context, runID string) error {
	g.ns = "bench-" + runID
	_, err := g.conns[0].CreateNamespace(ctx, &pb.CreateNamespaceRequest{Name: g.ns})
	return err
}

// Cleanup deletes the namespace, with every lease, semaphore and lock in it.
func (g *Grackle) Cleanup(ctx context.Context) error {
	_, err := g.conns[0].DeleteNamespace(ctx, &pb.DeleteNamespaceRequest{NamespaceName: g.ns})
	return err
}

func (g *Grackle) CreateSemaphore(ctx context.Context, name string, permits int64) error {
	_, err := g.conns[0].CreateSemaphore(ctx, &pb.CreateSemaphoreRequest{NamespaceName: g.ns, SemaphoreName: name, Permits: permits})
	return err
}

func (g *Grackle) Read(ctx context.Context, w int, sem string) error {
	_, err := g.cl(w).GetSemaphore(ctx, &pb.GetSemaphoreRequest{NamespaceName: g.ns, SemaphoreName: sem})
	return err
}

func (g *Grackle) CommitIndex(ctx context.Context) (uint64, error) {
	st, err := g.leader.GetClusterStatus(ctx, &pb.GetClusterStatusRequest{})
	if err != nil {
		return 0, err
	}
	return st.CommitIndex, nil
}

func (g *Grackle) NewSession(ctx context.Context, w int, ttl time.Duration, keepAlive bool) (Session, error) {
	cl := g.cl(w)
	secs := int64(ttl / time.Second)
	r, err := cl.CreateSemaphoreLease(ctx, &pb.CreateSemaphoreLeaseRequest{NamespaceName: g.ns, ProcessId: "bench-" + strconv.Itoa(w), TtlSeconds: secs})
	if err != nil {
		return nil, err
	}
	s := &grackleSession{cl: cl, ns: g.ns, id: r.Lease.LeaseId, ttl: secs}
	if keepAlive {
		s.keeper.start(ctx, ttl/3, s.Touch)
	}
	return s, nil
}

// keeper refreshes a lease in the background until stopped.
type keeper struct {
	stop context.CancelFunc
	wg   sync.WaitGroup
}

// start calls touch every period; the refreshes outlive ctx's cancellation
// (they end with stopAndWait), as the lease outlives the call that made it.
func (k *keeper) start(ctx context.Context, every time.Duration, touch func(context.Context) error) {
	kctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	k.stop = cancel
	k.wg.Add(1)
	go func() {
		defer k.wg.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-kctx.Done():
				return
			case <-t.C:
				_ = touch(kctx)
			}
		}
	}()
}

func (k *keeper) stopAndWait() {
	if k.stop != nil {
		k.stop()
		k.wg.Wait()
	}
}

type grackleSession struct {
	cl  pb.GrackleServiceClient
	ns  string
	id  string
	ttl int64
	keeper
}

func (s *grackleSession) Acquire(ctx context.Context, sem string, weight int64, timeout time.Duration) (Grant, error) {
	r, err := s.cl.AcquireSemaphore(ctx, &pb.AcquireSemaphoreRequest{NamespaceName: s.ns, SemaphoreName: sem, LeaseId: s.id,
		Weight: weight, TimeoutSeconds: int64(timeout / time.Second)})
	if err != nil {
		return Grant{}, err
	}
	if r.Outcome != pb.AcquireOutcome_ACQUIRE_OUTCOME_ACQUIRED {
		return Grant{}, fmt.Errorf("outcome %v", r.Outcome)
	}
	// The fencing token is the Raft index of the entry that granted the
	// hold: a release that handed the permit over, or the acquire itself.
	return Grant{Based: r.Holder.FencingToken, Expires: time.Unix(0, r.Holder.ExpiresAt)}, nil
}

func (s *grackleSession) Release(ctx context.Context, sem string) (uint64, error) {
	var hdr metadata.MD
	if _, err := s.cl.ReleaseSemaphore(ctx, &pb.ReleaseSemaphoreRequest{NamespaceName: s.ns, SemaphoreName: sem, LeaseId: s.id},
		grpc.Header(&hdr)); err != nil {
		return 0, err
	}
	v := hdr.Get("grackle-raft-index")
	if len(v) == 0 {
		return 0, fmt.Errorf("release: no grackle-raft-index header")
	}
	return strconv.ParseUint(v[0], 10, 64)
}

func (s *grackleSession) Touch(ctx context.Context) error {
	_, err := s.cl.RefreshSemaphoreLease(ctx, &pb.RefreshSemaphoreLeaseRequest{NamespaceName: s.ns, LeaseId: s.id, TtlSeconds: s.ttl})
	return err
}

func (s *grackleSession) Close(ctx context.Context) error {
	s.stopAndWait()
	_, err := s.cl.RevokeSemaphoreLease(ctx, &pb.RevokeSemaphoreLeaseRequest{NamespaceName: s.ns, LeaseId: s.id})
	return err
}

// NewLockSession creates a lock lease (ll_...), refreshed at TTL/3. The
// calls are the generated stubs of the RPCs client/lockapi.go wraps,
// over the backend's connections (multiplexed or not, spread or not) as
// every other workload's.
func (g *Grackle) NewLockSession(ctx context.Context, w int, ttl time.Duration) (LockSession, error) {
	cl := g.cl(w)
	secs := int64(ttl / time.Second)
	r, err := cl.CreateLockLease(ctx, &pb.CreateLockLeaseRequest{NamespaceName: g.ns, ProcessId: "bench-" + strconv.Itoa(w), TtlSeconds: secs})
	if err != nil {
		return nil, err
	}
	s := &grackleLockSession{cl: cl, ns: g.ns, id: r.Lease.LeaseId, ttl: secs}
	s.keeper.start(ctx, ttl/3, s.Touch)
	return s, nil
}

type grackleLockSession struct {
	cl  pb.GrackleServiceClient
	ns  string
	id  string
	ttl int64
	keeper
}

func (s *grackleLockSession) Lock(ctx context.Context, name string, timeout time.Duration) (Grant, error) {
	r, err := s.cl.AcquireLock(ctx, &pb.AcquireLockRequest{NamespaceName: s.ns, LockName: name, LeaseId: s.id,
		Exclusive: true, TimeoutSeconds: int64(timeout / time.Second)})
	if err != nil {
		return Grant{}, err
	}
	if r.Outcome != pb.AcquireOutcome_ACQUIRE_OUTCOME_ACQUIRED {
		return Grant{}, fmt.Errorf("outcome %v (reason %v)", r.Outcome, r.Reason)
	}
	// The fencing token: the Raft index of the granting entry, strictly
	// increasing with every grant.
	return Grant{Based: r.Holder.FencingToken, Expires: time.Unix(0, r.Holder.ExpiresAt)}, nil
}

func (s *grackleLockSession) Unlock(ctx context.Context, name string) error {
	r, err := s.cl.ReleaseLock(ctx, &pb.ReleaseLockRequest{NamespaceName: s.ns, LockName: name, LeaseId: s.id})
	if err != nil {
		return err
	}
	if !r.Released {
		return fmt.Errorf("release: not held")
	}
	return nil
}

func (s *grackleLockSession) Touch(ctx context.Context) error {
	_, err := s.cl.RefreshLockLease(ctx, &pb.RefreshLockLeaseRequest{NamespaceName: s.ns, LeaseId: s.id, TtlSeconds: s.ttl})
	return err
}

func (s *grackleLockSession) Close(ctx context.Context) error {
	s.stopAndWait()
	_, err := s.cl.RevokeLockLease(ctx, &pb.RevokeLockLeaseRequest{NamespaceName: s.ns, LeaseId: s.id})
	return err
}
