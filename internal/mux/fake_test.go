package mux_test

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/grackle-coord/grackle/internal/mux"
	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
)

// fakeAPI answers ListNamespaces with the namespace it is asked for (as
// the response's one namespace), with a header and a trailer; a call for
// "block" waits for release, one for "panic" panics, one for "fail" fails
// with details.
type fakeAPI struct {
	pb.UnimplementedGrackleServiceServer
	entered chan struct{}
	release chan struct{}
	served  atomic.Int64 // ordinary calls answered
}

func newFake() *fakeAPI {
	return &fakeAPI{entered: make(chan struct{}, 16), release: make(chan struct{})}
}

func (f *fakeAPI) ListNamespaces(ctx context.Context, req *pb.ListNamespacesRequest) (*pb.ListNamespacesResponse, error) {
	switch req.PaginationToken {
	case "block":
		f.entered <- struct{}{}
		select {
		case <-f.release:
		case <-ctx.Done():
			return nil, status.FromContextError(ctx.Err()).Err()
		}
	case "panic":
		panic("a hostile request")
	case "md":
		// The call's incoming metadata, as key=value namespaces.
		md, _ := metadata.FromIncomingContext(ctx)
		var ns []*pb.Namespace
		for _, k := range []string{"authorization", "grackle-forwarded", "x-trace-bin"} {
			for _, v := range md.Get(k) {
				if strings.HasSuffix(k, "-bin") {
					v = fmt.Sprintf("%x", v)
				}
				ns = append(ns, &pb.Namespace{Name: k + "=" + v})
			}
		}
		return &pb.ListNamespacesResponse{Namespaces: ns}, nil
	case "fail":
		st, _ := status.New(codes.FailedPrecondition, "fails on purpose").WithDetails(&pb.Namespace{Name: "detail"})
		_ = grpc.SetTrailer(ctx, metadata.Pairs("grackle-leader-address", "10.0.0.1:7000"))
		return nil, st.Err()
	}
	_ = grpc.SendHeader(ctx, metadata.Pairs("grackle-raft-index", "42"))
	_ = grpc.SetTrailer(ctx, metadata.Pairs("t", "1"))
	f.served.Add(1)
	return &pb.ListNamespacesResponse{Namespaces: []*pb.Namespace{{Name: req.PaginationToken}}}, nil
}

// fakeServer serves f on loopback, with MuxService unless old.
func fakeServer(t *testing.T, f *fakeAPI, old bool) (*grpc.ClientConn, *mux.Server) {
	t.Helper()
	return fakeServerWith(t, f, old, 0)
}

func fakeServerWith(t *testing.T, f *fakeAPI, old bool, idle time.Duration, opts ...any) (*grpc.ClientConn, *mux.Server) {
	t.Helper()
	var sopts []grpc.ServerOption
	copts := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	for _, o := range opts {
		switch o := o.(type) {
		case grpc.ServerOption:
			sopts = append(sopts, o)
		case grpc.DialOption:
			copts = append(copts, o)
		}
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer(sopts...)
	pb.RegisterGrackleServiceServer(gs, f)
	ms := mux.NewServer(mux.ServerConfig{NodeID: "fake", IdleTimeout: idle})
	ms.Register(&pb.GrackleService_ServiceDesc, f)
	if !old {
		pb.RegisterMuxServiceServer(gs, ms)
	}
	go func() { _ = gs.Serve(lis) }()
	cc, err := grpc.NewClient(lis.Addr().String(), copts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cc.Close()
		ms.Drain()
		gs.Stop()
		ms.Close()
	})
	return cc, ms
}

// untilStream calls until a call has gone over m's stream (it opens in the
// background on first use).
func untilStream(t *testing.T, m *mux.Conn, call func() error) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for m.StreamCalls() == 0 {
		if err := call(); err != nil {
			t.Fatalf("call before the stream was up: %v", err)
		}
		if time.Now().After(deadline) {
			t.Fatal("no call went over the stream within 20s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func list(ctx context.Context, cc grpc.ClientConnInterface, token string, opts ...grpc.CallOption) (*pb.ListNamespacesResponse, error) {
	return pb.NewGrackleServiceClient(cc).ListNamespaces(ctx, &pb.ListNamespacesRequest{PaginationToken: token}, opts...)
}
