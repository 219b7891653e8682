package peerconn

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/metadata"

	"github.com/grackle-coord/grackle/acl"
)

// shutdownBy waits (generously) for cc to be closed.
func shutdownBy(t *testing.T, cc *grpc.ClientConn, d time.Duration) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	for s := cc.GetState(); s != connectivity.Shutdown; s = cc.GetState() {
		if !cc.WaitForStateChange(ctx, s) {
			return false
		}
	}
	return true
}

func TestGetKeepsOneConnectionPerMember(t *testing.T) {
	c := New()
	defer c.Close()
	a, err := c.Get("n1", "127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := c.Get("n1", "127.0.0.1:1")
	other, _ := c.Get("n2", "127.0.0.1:2")
	if a != b || a == other || c.Dials() != 2 {
		t.Fatalf("same member twice: same connection (%v), other member: another (%v); %d dials, want 2", a == b, a != other, c.Dials())
	}
}

// A member whose address changed gets a new connection; the old one stays
// open for RetireAfter (the calls on it finish), then it is closed.
func TestAddressChangeRetiresTheOldConnection(t *testing.T) {
	c := New()
	defer c.Close()
	c.retireAfter = time.Hour
	old, _ := c.Get("n1", "127.0.0.1:1")
	moved, _ := c.Get("n1", "127.0.0.1:3")
	if old == moved || c.Dials() != 2 {
		t.Fatalf("moved member kept its old connection (%d dials)", c.Dials())
	}
	if old.GetState() == connectivity.Shutdown {
		t.Fatal("the retired connection was closed at once")
	}
	again, _ := c.Get("n1", "127.0.0.1:3")
	if again != moved {
		t.Fatal("the new address was not kept")
	}

	c.retireAfter = time.Millisecond
	last, _ := c.Redial("n1", "127.0.0.1:3")
	if last == moved || c.Dials() != 3 {
		t.Fatalf("Redial kept the connection (%d dials)", c.Dials())
	}
	if !shutdownBy(t, moved, 30*time.Second) {
		t.Fatal("the retired connection was never closed")
	}
	if old.GetState() == connectivity.Shutdown {
		t.Fatal("a connection retired for an hour was closed early")
	}
}

// Refresh replaces a kept connection that is not ready (here: never
// used, so idle) and retires it; a member without one gets none.
func TestRefreshReplacesAConnectionNotReady(t *testing.T) {
	c := New()
	defer c.Close()
	c.retireAfter = time.Hour
	old, _ := c.Get("n1", "127.0.0.1:1")
	c.Refresh("n1", "127.0.0.1:1")
	fresh, _ := c.Get("n1", "127.0.0.1:1")
	if fresh == old || c.Dials() != 2 {
		t.Fatalf("Refresh kept a connection that is not ready (%d dials)", c.Dials())
	}
	if old.GetState() == connectivity.Shutdown {
		t.Fatal("the replaced connection was closed at once, not retired")
	}
	c.Refresh("n2", "127.0.0.1:2")
	if c.Dials() != 2 {
		t.Fatal("Refresh dialled a member that had no connection")
	}

	// A ready connection is kept.
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	go srv.Serve(lis)
	defer srv.Stop()
	live, _ := c.Get("n3", lis.Addr().String())
	live.Connect()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for s := live.GetState(); s != connectivity.Ready; s = live.GetState() {
		if !live.WaitForStateChange(ctx, s) {
			t.Fatalf("never ready: %v", s)
		}
	}
	c.Refresh("n3", lis.Addr().String())
	if again, _ := c.Get("n3", lis.Addr().String()); again != live {
		t.Fatal("Refresh replaced a ready connection")
	}
}

func TestCloseClosesKeptAndRetired(t *testing.T) {
	c := New()
	c.retireAfter = time.Hour
	retired, _ := c.Get("n1", "127.0.0.1:1")
	kept, _ := c.Redial("n1", "127.0.0.1:1")
	c.Close()
	for name, cc := range map[string]*grpc.ClientConn{"kept": kept, "retired": retired} {
		if cc.GetState() != connectivity.Shutdown {
			t.Errorf("%s connection open after Close", name)
		}
	}
	if _, err := c.Get("n1", "127.0.0.1:1"); !errors.Is(err, ErrClosed) {
		t.Fatalf("Get after Close: %v, want ErrClosed", err)
	}
	c.Close() // twice is harmless
}

// A forwarded call carries the caller's token and the forwarded mark,
// which the receiving member sees.
func TestForwardCarriesTokenAndMark(t *testing.T) {
	in := metadata.NewIncomingContext(context.Background(), metadata.Pairs(TokenKey, "secret"))
	if Forwarded(in) {
		t.Fatal("a caller's own call reads as forwarded")
	}
	out, _ := metadata.FromOutgoingContext(Forward(in))
	if got := out.Get(TokenKey); len(got) != 1 || got[0] != "secret" {
		t.Fatalf("token passed on: %v", got)
	}
	if !Forwarded(metadata.NewIncomingContext(context.Background(), out)) {
		t.Fatal("the receiver does not see the forwarded mark")
	}
	probe, _ := metadata.FromOutgoingContext(OnBehalf(in))
	if len(probe.Get(ForwardedKey)) != 0 || len(probe.Get(TokenKey)) != 1 {
		t.Fatalf("OnBehalf: %v", probe)
	}
}

func TestTokenKeyIsACLs(t *testing.T) {
	if TokenKey != acl.MetadataKey {
		t.Fatalf("TokenKey %q, acl.MetadataKey %q", TokenKey, acl.MetadataKey)
	}
}

// GetMux hands out the multiplexed side of the member's kept connection:
// the same one for the same connection, a new one with a new connection.
func TestGetMuxFollowsTheConnection(t *testing.T) {
	c := New()
	defer c.Close()
	a, err := c.GetMux("n1", "127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	cc, _ := c.Get("n1", "127.0.0.1:1")
	if b, _ := c.GetMux("n1", "127.0.0.1:1"); b != a || a.ClientConn() != cc {
		t.Fatalf("same member: same stream conn (%v) over its kept connection (%v)", b == a, a.ClientConn() == cc)
	}
	fresh, _ := c.RedialMux("n1", "127.0.0.1:1")
	if fresh == a || fresh.ClientConn() == cc || c.Dials() != 2 {
		t.Fatalf("a redial gives a new stream conn over a new connection (%d dials)", c.Dials())
	}
	c.Close()
	if _, err := c.GetMux("n1", "127.0.0.1:1"); !errors.Is(err, ErrClosed) {
		t.Fatalf("after Close: %v, want ErrClosed", err)
	}
}
