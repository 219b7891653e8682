package client_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grackle-coord/grackle/apierr"
	"github.com/grackle-coord/grackle/client"
	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
	"github.com/grackle-coord/grackle/server/servertest"
)

// A 2 s lease outlives 3.5 TTLs because the session refreshes it, also
// across a leadership transfer in the middle; its hold survives with it.
func TestSessionRefreshKeepsLeaseAlive(t *testing.T) {
	c := servertest.Start(t, 3, nil)
	cli := newClient(t, addrs(c)...)
	const ttl = 2 * time.Second
	setup(t, cli, "ka", "s", 1)
	ctx := ctxT(t)
	sess := newSession(t, cli, "ka", "keepalive", ttl)
	created, err := cli.GetSemaphoreLease(ctx, &pb.GetSemaphoreLeaseRequest{NamespaceName: "ka", LeaseId: sess.LeaseID()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sess.Semaphore("s").Acquire(ctx, 1); err != nil {
		t.Fatal(err)
	}

	// Transfer leadership once the session has refreshed at least once.
	first := sess.ExpiresAt()
	servertest.Eventually(t, "a first refresh", 10*time.Second, func() bool { return sess.ExpiresAt().After(first) })
	old := c.Leader()
	if _, err := c.TransferLeadership(ctx, old, ""); err != nil {
		t.Fatal(err)
	}

	// Let 3.5 TTLs pass (from the lease's creation): the lease must not
	// be lost meanwhile. The passing of time is what is under test here.
	deadline := time.Unix(0, created.Lease.CreatedAt).Add(ttl * 7 / 2)
	select {
	case <-sess.Done():
		t.Fatalf("session ended: %v", sess.Err())
	case <-time.After(time.Until(deadline)):
	}
	if err := sess.Err(); err != nil {
		t.Fatal(err)
	}
	now, err := cli.GetSemaphoreLease(ctx, &pb.GetSemaphoreLeaseRequest{NamespaceName: "ka", LeaseId: sess.LeaseID()})
	if err != nil {
		t.Fatalf("lease gone after 3.5 TTLs: %v", err)
	}
	if min := created.Lease.ExpiresAt + int64(2*ttl); now.Lease.ExpiresAt < min {
		t.Fatalf("expires_at %d not refreshed past %d", now.Lease.ExpiresAt, min)
	}
	hs := holders(t, cli, "ka", "s")
	if len(hs) != 1 || hs[0].LeaseId != sess.LeaseID() {
		t.Fatalf("hold lost with a live lease: %v", hs)
	}
	if c.Leader() == old {
		t.Fatal("leadership was not transferred")
	}

	// Close revokes: the hold goes with the lease.
	if err := sess.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(sess.Err(), client.ErrSessionClosed) {
		t.Fatalf("Err after Close: %v", sess.Err())
	}
	if hs := holders(t, cli, "ka", "s"); len(hs) != 0 {
		t.Fatalf("holders after Close: %v", hs)
	}
	if _, err := sess.Semaphore("s").Acquire(ctx, 1); !errors.Is(err, client.ErrSessionClosed) {
		t.Fatalf("Acquire on a closed session: %v", err)
	}
}

// A lease revoked behind the session's back: Done fires, Err and the
// context's cause say ErrLeaseLost, and a waiting Acquire ends with it.
func TestSessionDoneWhenLeaseRevoked(t *testing.T) {
	c := servertest.Start(t, 1, nil)
	cli := newClient(t, addrs(c)...)
	setup(t, cli, "rv", "s", 1)
	ctx := ctxT(t)
	holder := newSession(t, cli, "rv", "holder", 30*time.Second)
	if _, err := holder.Semaphore("s").Acquire(ctx, 1); err != nil {
		t.Fatal(err)
	}

	// 1. A waiting Acquire under a lease that is revoked.
	waiter := newSession(t, cli, "rv", "waiter", 30*time.Second)
	errc := make(chan error, 1)
	go func() {
		_, err := waiter.Semaphore("s").Acquire(ctx, 1)
		errc <- err
	}()
	waitQueue(t, c, "rv", "s", 1)
	raw := c.Client(0)
	if _, err := raw.RevokeSemaphoreLease(ctx, &pb.RevokeSemaphoreLeaseRequest{NamespaceName: "rv", LeaseId: waiter.LeaseID()}); err != nil {
		t.Fatal(err)
	}
	if err := recvWithin(t, errc, 20*time.Second, "the waiter's end"); !errors.Is(err, client.ErrLeaseLost) {
		t.Fatalf("waiting Acquire under a revoked lease: %v", err)
	}
	recvWithin(t, waiter.Done(), 20*time.Second, "Done of the waiter's session")

	// 2. An idle session (TTL 3 s: refreshed every second) whose lease is
	// revoked: the next refresh says NotFound.
	idle := newSession(t, cli, "rv", "idle", 3*time.Second)
	if _, err := raw.RevokeSemaphoreLease(ctx, &pb.RevokeSemaphoreLeaseRequest{NamespaceName: "rv", LeaseId: idle.LeaseID()}); err != nil {
		t.Fatal(err)
	}
	recvWithin(t, idle.Done(), 20*time.Second, "Done after an out-of-band revoke")
	if !errors.Is(idle.Err(), client.ErrLeaseLost) {
		t.Fatalf("Err: %v", idle.Err())
	}
	if cause := context.Cause(idle.Context()); !errors.Is(cause, client.ErrLeaseLost) {
		t.Fatalf("context cause: %v", cause)
	}
	if _, err := idle.Semaphore("s").TryAcquire(ctx, 1); !errors.Is(err, client.ErrLeaseLost) {
		t.Fatalf("TryAcquire on a lost session: %v", err)
	}
	// Closing a lost session is fine; the error stays ErrLeaseLost.
	if err := idle.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(idle.Err(), client.ErrLeaseLost) {
		t.Fatalf("Err after Close: %v", idle.Err())
	}
	// 3. A semaphore that does not exist is the call's failure only: the
	// session lives on (the reason, not the code, tells them apart).
	if _, err := holder.Semaphore("none").TryAcquire(ctx, 1); status.Code(err) != codes.NotFound || apierr.ReasonOf(err) != apierr.SemaphoreNotFound {
		t.Fatalf("TryAcquire of a missing semaphore: %v", err)
	}
	if err := holder.Err(); err != nil {
		t.Fatalf("a missing semaphore ended the session: %v", err)
	}
	// The holder was not disturbed.
	if hs := holders(t, cli, "rv", "s"); len(hs) != 1 || hs[0].LeaseId != holder.LeaseID() {
		t.Fatalf("holders: %v", hs)
	}
}

// Closing the client ends its sessions.
func TestClientCloseEndsSessions(t *testing.T) {
	c := servertest.Start(t, 1, nil)
	cli, err := client.New(ctxT(t), client.Config{Endpoints: addrs(c)})
	if err != nil {
		t.Fatal(err)
	}
	setup(t, cli, "cc", "s", 1)
	sess, err := cli.NewSession(ctxT(t), "cc", "p", 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	cli.Close()
	recvWithin(t, sess.Done(), 5*time.Second, "Done after the client's Close")
	if !errors.Is(sess.Err(), client.ErrClientClosed) {
		t.Fatalf("Err: %v", sess.Err())
	}
	if err := sess.Close(ctxT(t)); !errors.Is(err, client.ErrClientClosed) {
		t.Fatalf("Close: %v", err)
	}
}

// With the cluster gone, the session gives the lease up when its expiry
// passes by the client's own clock, not before.
func TestSessionExpiresByClientClock(t *testing.T) {
	c := servertest.Start(t, 1, nil)
	cli := newClient(t, addrs(c)...)
	setup(t, cli, "ex", "s", 1)
	sess, err := cli.NewSession(ctxT(t), "ex", "p", 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	c.StopNode(0)
	// No refresh can succeed from here on: the expiry known now is final
	// (a refresh sent before the stop may still have moved it).
	before := sess.ExpiresAt()
	recvWithin(t, sess.Done(), 15*time.Second, "Done after the expiry")
	doneAt := time.Now()
	if !errors.Is(sess.Err(), client.ErrLeaseLost) {
		t.Fatalf("Err: %v", sess.Err())
	}
	final := sess.ExpiresAt()
	if doneAt.Before(before) || doneAt.Before(final) {
		t.Fatalf("gave the lease up at %v, before its expiry %v", doneAt, final)
	}
	if late := doneAt.Sub(final); late > 2*time.Second {
		t.Fatalf("gave the lease up %v after its expiry", late)
	}
}
