package client_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"

	"github.com/grackle-coord/grackle/internal/syncbuf"

	"github.com/hashicorp/go-hclog"

	"github.com/grackle-coord/grackle/client"
	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
	"github.com/grackle-coord/grackle/server"
	"github.com/grackle-coord/grackle/server/servertest"
)

func bufLogger(buf *syncbuf.Buffer) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{Name: "grackle-client", Level: hclog.Debug, Output: buf})
}

// fallbackLines counts the client's lines saying that addr's calls go
// through the given endpoints.
func fallbackLines(log, addr string) int {
	n := 0
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, "through the given endpoints") && strings.Contains(l, addr) {
			n++
		}
	}
	return n
}

// A node advertises a gRPC address whose name does not resolve where the
// client runs (a compose service name seen from the host): the node's own
// resolver knows "localhost", the client's does not (its Dialer resolves
// like a host outside the Docker network: no such host). The client learns
// it as the leader's address, cannot dial it, falls back to the endpoint it
// was given, and says so once in its log. The non-idempotent creates go
// through too: the failed dial proves they were never sent.
func TestAdvertisedAddressDoesNotResolve(t *testing.T) {
	const adv = "localhost:7420"
	c := servertest.Start(t, 1, func(cfg *server.Config) { cfg.AdvertiseGRPC = adv })
	var d net.Dialer
	hostView := func(ctx context.Context, addr string) (net.Conn, error) {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		if host == "localhost" {
			return nil, &net.OpError{Op: "dial", Net: "tcp", Err: &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}}
		}
		return d.DialContext(ctx, "tcp", addr)
	}
	ctx := ctxT(t)
	st, err := c.ClusterClient(0).GetClusterStatus(ctx, &pb.GetClusterStatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if st.LeaderAddress != adv {
		t.Fatalf("leader_address %q, want the advertised %q", st.LeaderAddress, adv)
	}

	var logs syncbuf.Buffer
	cli, err := client.New(ctx, client.Config{Endpoints: []string{c.Nodes[0].GRPCAddr()}, Logger: bufLogger(&logs), Dialer: hostView})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	if _, err := cli.CreateNamespace(ctx, &pb.CreateNamespaceRequest{Name: "nat"}); err != nil {
		t.Fatalf("create through the fallback: %v", err)
	}
	if _, err := cli.CreateSemaphore(ctx, &pb.CreateSemaphoreRequest{NamespaceName: "nat", SemaphoreName: "s", Permits: 2}); err != nil {
		t.Fatal(err)
	}
	sess, err := cli.NewSession(ctx, "nat", "host-1/pid-1", 30e9)
	if err != nil {
		t.Fatalf("session through the fallback: %v", err)
	}
	g, err := sess.Semaphore("s").Acquire(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	if g.FencingToken == 0 {
		t.Fatal("no fencing token")
	}
	if err := sess.Semaphore("s").Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := sess.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if cli.Leader() != adv {
		t.Fatalf("client's leader %q, want %q (it still knows who leads)", cli.Leader(), adv)
	}
	if n := fallbackLines(logs.String(), adv); n != 1 {
		t.Fatalf("want exactly one fallback line for %s, got %d; log:\n%s", adv, n, logs.String())
	}
	if !strings.Contains(logs.String(), "no such host") {
		t.Errorf("the fallback line should say why (a lookup failure); log:\n%s", logs.String())
	}
	// Nothing is wrong (the endpoints forward): said at info, which the
	// CLI does not show, not as a warning on every command.
	if !strings.Contains(logs.String(), "[INFO]  grackle-client: the leader's advertised address does not resolve from here") {
		t.Errorf("the fallback for a name that does not resolve should be an info line; log:\n%s", logs.String())
	}
}

// In a 3-node cluster, the leader's advertised address is refused by the
// network between the client and it (NAT, a firewall): the client is given
// every node, reaches the followers, and they forward to the leader.
func TestLeaderUnreachableGoesThroughFollowers(t *testing.T) {
	c := servertest.Start(t, 3, nil)
	leader := c.Nodes[c.Leader()].GRPCAddr()
	var logs syncbuf.Buffer
	var d net.Dialer
	cli, err := client.New(ctxT(t), client.Config{
		Endpoints:  addrs(c),
		LeaderOnly: true, // every call meant for the leader (a spreading client's home may be a follower)
		Logger:     bufLogger(&logs),
		Dialer: func(ctx context.Context, addr string) (net.Conn, error) {
			if addr == leader {
				return nil, errors.New("blocked by the test's firewall")
			}
			return d.DialContext(ctx, "tcp", addr)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx := ctxT(t)
	setup(t, cli, "fw", "s", 1)
	for i := 0; i < 5; i++ {
		if _, err := cli.GetSemaphore(ctx, &pb.GetSemaphoreRequest{NamespaceName: "fw", SemaphoreName: "s"}); err != nil {
			t.Fatal(err)
		}
	}
	if cli.Leader() != leader {
		t.Fatalf("client's leader %q, want %q", cli.Leader(), leader)
	}
	if n := fallbackLines(logs.String(), leader); n != 1 {
		t.Fatalf("want exactly one fallback line for %s, got %d; log:\n%s", leader, n, logs.String())
	}
	// A leader that resolves but does not answer: said as what it is.
	if !strings.Contains(logs.String(), "[WARN]  grackle-client: the leader does not answer at its advertised address (down, or a failover under way)") {
		t.Errorf("the fallback for a leader that does not answer should say so; log:\n%s", logs.String())
	}
}
