package connlimit

import (
	"context"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// On a port at its pressure mark, a new connection closes the one idle
// longest, never one with a call (a stream) in flight.
func TestPressureEvictsTheIdlest(t *testing.T) {
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tracker := NewIdle(0)
	closed := make(chan string, 4)
	tracker.Closed = func(remote string, _ time.Duration) { closed <- remote }
	l := New(raw, Config{Pressure: 2, Tracker: tracker})
	srv := grpc.NewServer(grpc.StatsHandler(tracker))
	healthpb.RegisterHealthServer(srv, health.NewServer())
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(srv.Stop)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	client := func() (healthpb.HealthClient, *grpc.ClientConn) {
		cc, err := grpc.NewClient(l.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cc.Close() })
		return healthpb.NewHealthClient(cc), cc
	}
	// The watcher: a stream open for the whole test (a call in flight).
	watcher, _ := client()
	st, err := watcher.Watch(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Recv(); err != nil {
		t.Fatal(err)
	}
	// The idle one: one call, then nothing.
	idle, _ := client()
	if _, err := idle.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatal(err)
	}
	// A third connection finds two open: the idle one gives way.
	third, _ := client()
	if _, err := third.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-closed:
	case <-ctx.Done():
		t.Fatal("no connection was closed under pressure")
	}
	select {
	case r := <-closed:
		t.Fatalf("a second connection (%s) was closed", r)
	default:
	}
	// The watcher's stream is intact.
	done := make(chan error, 1)
	go func() { _, err := st.Recv(); done <- err }()
	select {
	case err := <-done:
		t.Fatalf("the watcher's stream ended: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
}
