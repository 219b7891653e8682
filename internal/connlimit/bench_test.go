package connlimit

import (
	"context"
	"net"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// hidden hides ReadOnReady: gRPC reads it through a buffer of its own.
type hidden struct{ net.Listener }

type hiddenConn struct{ net.Conn }

func (h hidden) Accept() (net.Conn, error) {
	c, err := h.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return hiddenConn{c}, nil
}

// Unary calls through the listener, read through ReadOnReady (Pooled) or
// through gRPC's own buffer (Buffered), 8 callers on one connection.
func BenchmarkGRPCUnaryPooled(b *testing.B)   { benchUnary(b, false) }
func BenchmarkGRPCUnaryBuffered(b *testing.B) { benchUnary(b, true) }

func benchUnary(b *testing.B, hide bool) {
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	var l net.Listener = New(raw, Config{Max: 64})
	if hide {
		l = hidden{l}
	}
	srv := grpc.NewServer()
	healthpb.RegisterHealthServer(srv, health.NewServer())
	go func() { _ = srv.Serve(l) }()
	defer srv.Stop()
	cc, err := grpc.NewClient(raw.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	defer cc.Close()
	hc := healthpb.NewHealthClient(cc)
	ctx := context.Background()
	if _, err := hc.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
		b.Fatal(err)
	}
	b.SetParallelism(4)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := hc.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
