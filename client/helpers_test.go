package client_test

import (
	"context"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grackle-coord/grackle/client"
	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
	"github.com/grackle-coord/grackle/server/servertest"
)

// ctxT is a generous per-test context.
func ctxT(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// deadAddr is a loopback address nobody listens on.
func deadAddr(t *testing.T) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a := lis.Addr().String()
	lis.Close()
	return a
}

func addrs(c *servertest.Cluster) []string {
	var out []string
	for _, n := range c.Nodes {
		if n != nil {
			out = append(out, n.GRPCAddr())
		}
	}
	return out
}

func newClient(t *testing.T, endpoints ...string) *client.Client {
	t.Helper()
	cli, err := client.New(ctxT(t), client.Config{Endpoints: endpoints})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// setup creates namespace ns (if missing) and semaphore sem with permits.
func setup(t *testing.T, cli *client.Client, ns, sem string, permits int64) {
	t.Helper()
	ctx := ctxT(t)
	if _, err := cli.CreateNamespace(ctx, &pb.CreateNamespaceRequest{Name: ns}); err != nil && status.Code(err) != codes.AlreadyExists {
		t.Fatal(err)
	}
	if _, err := cli.CreateSemaphore(ctx, &pb.CreateSemaphoreRequest{NamespaceName: ns, SemaphoreName: sem, Permits: permits}); err != nil {
		t.Fatal(err)
	}
}

func newSession(t *testing.T, cli *client.Client, ns, pid string, ttl time.Duration) *client.Session {
	t.Helper()
	s, err := cli.NewSession(ctxT(t), ns, pid, ttl)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s.Close(ctx)
	})
	return s
}

// holders lists the holders of a semaphore (one page is enough here).
func holders(t *testing.T, cli *client.Client, ns, sem string) []*pb.SemaphoreHolder {
	t.Helper()
	r, err := cli.ListSemaphoreHolders(ctxT(t), &pb.ListSemaphoreHoldersRequest{NamespaceName: ns, SemaphoreName: sem, Limit: 250})
	if err != nil {
		t.Fatal(err)
	}
	return r.Holders
}

// waitQueue waits until the current leader has n calls queued on sem.
func waitQueue(t *testing.T, c *servertest.Cluster, ns, sem string, n int) {
	t.Helper()
	servertest.Eventually(t, "waiters queued on the leader", 30*time.Second, func() bool {
		li := c.Leader()
		return li >= 0 && c.QueueLen(li, ns, sem) == n
	})
}

// recvWithin receives from ch or fails the test.
func recvWithin[T any](t *testing.T, ch <-chan T, d time.Duration, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(d):
		t.Fatalf("%s did not happen within %v", what, d)
	}
	var zero T
	return zero
}
