package server_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grackle-coord/grackle/apierr"
	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
	"github.com/grackle-coord/grackle/server/servertest"
)

// A read on a follower sees every write that completed before it began:
// writes through the leader and through the other follower (forwarded),
// each followed at once by a read on the follower, by several workers at
// a time (their reads share read-index requests). The follower serves the
// reads itself.
func TestFollowerReadSeesPrecedingWrite(t *testing.T) {
	c := servertest.Start(t, 3, nil)
	l := c.WaitLeader()
	var fs []int
	for i := range c.Nodes {
		if i != l {
			fs = append(fs, i)
		}
	}
	f, g := fs[0], fs[1]
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if _, err := c.Client(l).CreateNamespace(ctx, &pb.CreateNamespaceRequest{Name: "fr"}); err != nil {
		t.Fatal(err)
	}
	served := func() (n uint64) {
		for _, s := range c.Nodes {
			n += s.API.FollowerReads()
		}
		return n
	}
	before := served()
	const workers, rounds = 6, 40
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			sem := fmt.Sprintf("s%d", w)
			r, err := retry(ctx, func(ctx context.Context) (*pb.CreateSemaphoreResponse, error) {
				return c.Client(l).CreateSemaphore(ctx, &pb.CreateSemaphoreRequest{NamespaceName: "fr", SemaphoreName: sem, Permits: 1})
			})
			if err != nil {
				t.Error(err)
				return
			}
			get := func(node int) (*pb.Semaphore, error) {
				got, err := retry(ctx, func(ctx context.Context) (*pb.GetSemaphoreResponse, error) {
					return c.Client(node).GetSemaphore(ctx, &pb.GetSemaphoreRequest{NamespaceName: "fr", SemaphoreName: sem})
				})
				return got.GetSemaphore(), err
			}
			version := r.Semaphore.Version // of the last write or read that completed
			for i := 0; i < rounds; i++ {
				writer := []int{l, g}[i%2]
				u, err := retry(ctx, func(ctx context.Context) (*pb.UpdateSemaphoreResponse, error) {
					return c.Client(writer).UpdateSemaphore(ctx, &pb.UpdateSemaphoreRequest{NamespaceName: "fr", SemaphoreName: sem,
						Permits: 1, Description: strconv.Itoa(i), ExpectedVersion: version})
				})
				switch {
				case err == nil:
					version = u.Semaphore.Version
				case status.Code(err) == codes.InvalidArgument:
					// A retried update whose first try applied: learn the
					// version from a read that completes now.
					s, err := get(writer)
					if err != nil {
						t.Errorf("worker %d read after update %d: %v", w, i, err)
						return
					}
					version = s.Version
				default:
					t.Errorf("worker %d update %d: %v", w, i, err)
					return
				}
				got, err := get(f)
				if err != nil {
					t.Errorf("worker %d read %d: %v", w, i, err)
					return
				}
				if got.Version < version {
					t.Errorf("worker %d: stale follower read: version %d after a call that saw version %d completed", w, got.Version, version)
					return
				}
			}
		}(w)
	}
	wg.Wait()
	if served() == before {
		t.Fatal("no read was served by a follower")
	}
	// The follower asked for read indexes on its connection's stream (a
	// fraction of a unary call's CPU on both members), not as unary calls.
	if c.Nodes[f].PeerStreamCalls() == 0 {
		t.Fatal("no read-index request rode the follower's multiplexed stream to the leader")
	}
}

// retry repeats call while it fails with a retryable status (Unavailable,
// a deadline of its own: this machine is loaded and a leader may change),
// each try with 5 s, until ctx ends.
func retry[T any](ctx context.Context, call func(context.Context) (T, error)) (T, error) {
	for {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		out, err := call(cctx)
		cancel()
		code := status.Code(err)
		if err == nil || ctx.Err() != nil || (code != codes.Unavailable && code != codes.DeadlineExceeded) {
			return out, err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A follower cut off from the leader's replication never answers a read
// with state older than a write that completed before the read: while it
// is cut off each read fails (its deadline, or no leader known), and once
// it rejoins it answers with the write.
func TestCutOffFollowerServesNoStaleRead(t *testing.T) {
	// The cut-off follower keeps believing in the leader for a while, so
	// reads also take the path that waits for the read index.
	c, _, proxy := clusterWithCuttableThird(t, nil)
	const f = 2
	servertest.Eventually(t, "node3 a follower", 20*time.Second, func() bool { return !c.Nodes[f].IsLeader() && c.Leader() >= 0 })
	l := c.Leader()

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := c.Client(l).CreateNamespace(ctx, &pb.CreateNamespaceRequest{Name: "cut"}); err != nil {
		t.Fatal(err)
	}
	r, err := c.Client(l).CreateSemaphore(ctx, &pb.CreateSemaphoreRequest{NamespaceName: "cut", SemaphoreName: "s", Permits: 1})
	if err != nil {
		t.Fatal(err)
	}
	read := func(within time.Duration) (*pb.Semaphore, error) {
		rctx, rcancel := context.WithTimeout(ctx, within)
		defer rcancel()
		got, err := c.Client(f).GetSemaphore(rctx, &pb.GetSemaphoreRequest{NamespaceName: "cut", SemaphoreName: "s"})
		if err != nil {
			return nil, err
		}
		return got.Semaphore, nil
	}
	if s, err := read(10 * time.Second); err != nil || s.Version != r.Semaphore.Version {
		t.Fatalf("read on node3 before the cut: %v, %v", s, err)
	}

	proxy.setCut(true)
	u, err := c.Client(l).UpdateSemaphore(ctx, &pb.UpdateSemaphoreRequest{NamespaceName: "cut", SemaphoreName: "s",
		Permits: 1, Description: "after the cut", ExpectedVersion: r.Semaphore.Version})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 6; i++ {
		s, err := read(500 * time.Millisecond)
		if err == nil {
			if s.Version < u.Semaphore.Version {
				t.Fatalf("read %d on the cut-off follower: version %d, after the write of version %d completed", i, s.Version, u.Semaphore.Version)
			}
			t.Fatalf("read %d on the cut-off follower answered version %d: it cannot have applied it", i, s.Version)
		}
		switch code, reason := status.Code(err), apierr.Info(err).GetReason(); {
		case code == codes.DeadlineExceeded, code == codes.Unavailable && (reason == apierr.NotLeader || reason == apierr.NotSent):
		default:
			t.Fatalf("read %d on the cut-off follower: %v (code %v, reason %q), want DeadlineExceeded or Unavailable", i, err, code, reason)
		}
	}

	proxy.setCut(false)
	servertest.Eventually(t, "node3 reads the write after rejoining", 30*time.Second, func() bool {
		s, err := read(2 * time.Second)
		return err == nil && s.Version == u.Semaphore.Version && s.Description == "after the cut"
	})
}
