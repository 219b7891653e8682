package rpc_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
	"github.com/grackle-coord/grackle/server/servertest"
)

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// must unwraps a call's result; an error fails the test (via panic, which
// the testing package reports with the stack of the failing call).
func must[T any](v T, err error) T {
	if err != nil {
		panic(fmt.Sprintf("unexpected error: %v", err))
	}
	return v
}

func wantCode(t *testing.T, err error, c codes.Code) {
	t.Helper()
	if status.Code(err) != c {
		t.Fatalf("want %v, got %v", c, err)
	}
}

// seed creates namespace ns, semaphore sem with permits, and n leases.
func seed(t *testing.T, c pb.GrackleServiceClient, ns, sem string, permits int64, n int, ttl int64) []string {
	t.Helper()
	ctx := ctxT(t)
	if _, err := c.CreateNamespace(ctx, &pb.CreateNamespaceRequest{Name: ns}); err != nil && status.Code(err) != codes.AlreadyExists {
		t.Fatal(err)
	}
	must(c.CreateSemaphore(ctx, &pb.CreateSemaphoreRequest{NamespaceName: ns, SemaphoreName: sem, Permits: permits}))
	var ids []string
	for i := 0; i < n; i++ {
		l := must(c.CreateSemaphoreLease(ctx, &pb.CreateSemaphoreLeaseRequest{NamespaceName: ns, ProcessId: "w", TtlSeconds: ttl}))
		ids = append(ids, l.Lease.LeaseId)
	}
	return ids
}

func startOne(t *testing.T) *servertest.Cluster { return servertest.Start(t, 1, nil) }
