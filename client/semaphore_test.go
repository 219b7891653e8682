package client_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grackle-coord/grackle/client"
	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
	"github.com/grackle-coord/grackle/server/servertest"
)

// A blocking acquire on a full semaphore with a 1.5 s deadline ends
// promptly with ErrTimeout and leaves no hold behind; TryAcquire says
// ErrWouldBlock; an impossible weight fails at once.
func TestAcquireDeadline(t *testing.T) {
	c := servertest.Start(t, 1, nil)
	cli := newClient(t, addrs(c)...)
	setup(t, cli, "dl", "s", 1)
	ctx := ctxT(t)
	holder := newSession(t, cli, "dl", "holder", 30*time.Second)
	if _, err := holder.Semaphore("s").Acquire(ctx, 1); err != nil {
		t.Fatal(err)
	}
	waiter := newSession(t, cli, "dl", "waiter", 30*time.Second)
	m := waiter.Semaphore("s")

	dctx, cancel := context.WithTimeout(ctx, 1500*time.Millisecond)
	defer cancel()
	start := time.Now()
	g, err := m.Acquire(dctx, 1)
	elapsed := time.Since(start)
	if !errors.Is(err, client.ErrTimeout) || g != nil {
		t.Fatalf("want ErrTimeout, got %v %v", g, err)
	}
	var ae *client.AcquireError
	if !errors.As(err, &ae) || ae.Outcome != pb.AcquireOutcome_ACQUIRE_OUTCOME_TIMED_OUT {
		t.Fatalf("want an *AcquireError TIMED_OUT, got %#v", err)
	}
	if elapsed > 3*time.Second {
		t.Fatalf("a 1.5 s deadline returned after %v", elapsed)
	}
	if hs := holders(t, cli, "dl", "s"); len(hs) != 1 || hs[0].LeaseId != holder.LeaseID() {
		t.Fatalf("holders after the timed-out acquire: %v", hs)
	}
	if n := c.QueueLen(0, "dl", "s"); n != 0 {
		t.Fatalf("%d waiters left queued", n)
	}

	// A deadline already too near: no call, ErrTimeout at once.
	nctx, ncancel := context.WithTimeout(ctx, time.Millisecond)
	defer ncancel()
	if _, err := m.Acquire(nctx, 1); !errors.Is(err, client.ErrTimeout) {
		t.Fatalf("near deadline: %v", err)
	}

	if _, err := m.TryAcquire(ctx, 1); !errors.Is(err, client.ErrWouldBlock) || !errors.As(err, &ae) || ae.State.GetActiveHolds() != 1 {
		t.Fatalf("TryAcquire on a full semaphore: %v", err)
	}
	_, err = m.Acquire(ctx, 2)
	if !errors.Is(err, client.ErrWeightExceedsPermits) || status.Code(err) != codes.InvalidArgument {
		t.Fatalf("weight 2 of 1 permit: %v", err)
	}

	// Cancelling (not a deadline) a waiting acquire: context.Canceled,
	// and no hold left behind either.
	cctx, ccancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() {
		_, err := m.Acquire(cctx, 1)
		errc <- err
	}()
	waitQueue(t, c, "dl", "s", 1)
	ccancel()
	if err := recvWithin(t, errc, 10*time.Second, "the cancelled acquire's end"); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled acquire: %v", err)
	}
	if hs := holders(t, cli, "dl", "s"); len(hs) != 1 || hs[0].LeaseId != holder.LeaseID() {
		t.Fatalf("holders after the cancelled acquire: %v", hs)
	}

	// Once the holder releases, TryAcquire succeeds.
	if err := holder.Semaphore("s").Release(ctx); err != nil {
		t.Fatal(err)
	}
	g, err = m.TryAcquire(ctx, 1)
	if err != nil || g.Weight != 1 || g.FencingToken == 0 || g.LeaseID != waiter.LeaseID() || g.LockedAt.IsZero() || !g.ExpiresAt.After(g.LockedAt) {
		t.Fatalf("TryAcquire on a free semaphore: %+v %v", g, err)
	}
}

// WithPermits releases on success, on error and on panic (re-panicking),
// and cancels fn's context when the lease is lost.
func TestWithPermits(t *testing.T) {
	c := servertest.Start(t, 1, nil)
	cli := newClient(t, addrs(c)...)
	setup(t, cli, "wp", "s", 3)
	ctx := ctxT(t)
	sess := newSession(t, cli, "wp", "p", 30*time.Second)
	m := sess.Semaphore("s")
	held := func() int64 {
		t.Helper()
		r, err := cli.GetSemaphore(ctx, &pb.GetSemaphoreRequest{NamespaceName: "wp", SemaphoreName: "s"})
		if err != nil {
			t.Fatal(err)
		}
		return r.Semaphore.ActiveHolds
	}

	t.Run("success", func(t *testing.T) {
		var inside int64
		err := client.WithPermits(ctx, m, 2, func(ctx context.Context, g *client.Grant) error {
			inside = held()
			if g.Weight != 2 || g.FencingToken == 0 {
				t.Errorf("grant %+v", g)
			}
			return ctx.Err()
		})
		if err != nil || inside != 2 || held() != 0 {
			t.Fatalf("err %v, held inside %d, after %d", err, inside, held())
		}
	})

	t.Run("error", func(t *testing.T) {
		boom := errors.New("boom")
		err := client.WithPermits(ctx, m, 3, func(context.Context, *client.Grant) error { return boom })
		if !errors.Is(err, boom) {
			t.Fatalf("want fn's error, got %v", err)
		}
		if h := held(); h != 0 {
			t.Fatalf("%d permits still held after fn failed", h)
		}
	})

	t.Run("panic", func(t *testing.T) {
		type oops struct{ n int }
		var recovered any
		func() {
			defer func() { recovered = recover() }()
			_ = client.WithPermits(ctx, m, 1, func(context.Context, *client.Grant) error { panic(oops{7}) })
		}()
		if recovered != (oops{7}) {
			t.Fatalf("recovered %v, want the fn's panic value", recovered)
		}
		if h := held(); h != 0 {
			t.Fatalf("%d permits still held after fn panicked", h)
		}
	})

	t.Run("acquire fails", func(t *testing.T) {
		ran := false
		err := client.WithPermits(ctx, m, 4, func(context.Context, *client.Grant) error { ran = true; return nil })
		if ran || !errors.Is(err, client.ErrWeightExceedsPermits) {
			t.Fatalf("ran %v, err %v", ran, err)
		}
	})

	t.Run("lease lost", func(t *testing.T) {
		// TTL 3 s: refreshed every second, so the loss is noticed soon.
		lost := newSession(t, cli, "wp", "lost", 3*time.Second)
		err := client.WithPermits(ctx, lost.Semaphore("s"), 1, func(fctx context.Context, g *client.Grant) error {
			if _, err := c.Client(0).RevokeSemaphoreLease(ctx, &pb.RevokeSemaphoreLeaseRequest{NamespaceName: "wp", LeaseId: g.LeaseID}); err != nil {
				return err
			}
			select {
			case <-fctx.Done():
				if !errors.Is(context.Cause(fctx), client.ErrLeaseLost) {
					t.Errorf("fn's context cause: %v", context.Cause(fctx))
				}
				return nil
			case <-time.After(20 * time.Second):
				return errors.New("fn's context was not cancelled when the lease was lost")
			}
		})
		if !errors.Is(err, client.ErrLeaseLost) {
			t.Fatalf("want ErrLeaseLost, got %v", err)
		}
		if h := held(); h != 0 {
			t.Fatalf("%d permits still held", h)
		}
	})
}
