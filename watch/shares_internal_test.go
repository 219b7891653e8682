package watch

import (
	"context"
	"net"
	"testing"

	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
)

// With a token, the client is the token: two tokens from one address
// (one machine, or one NAT) each get the whole per-client bound.
func TestSharesKeyTokensApart(t *testing.T) {
	s := &Service{cfg: Config{MaxWatchersPerConnection: 100, MaxWatchersPerClient: 2}}
	from := func(port int, secret string) context.Context {
		ctx := peer.NewContext(context.Background(), &peer.Peer{Addr: &net.TCPAddr{IP: net.IPv4(10, 0, 0, 1), Port: port}})
		if secret != "" {
			ctx = metadata.NewIncomingContext(ctx, metadata.Pairs("authorization", "Bearer "+secret))
		}
		return ctx
	}
	var releases []func()
	for i, c := range []struct {
		port   int
		secret string
		ok     bool
	}{
		{1, "grk_a", true}, {2, "grk_a", true}, {3, "grk_a", false}, // token a: its bound
		{1, "grk_b", true}, {2, "grk_b", true}, // token b from the same address
		{4, "", true}, {5, "", true}, {6, "", false}, // no token: the address
	} {
		rel, err := s.admit(from(c.port, c.secret))
		if (err == nil) != c.ok {
			t.Fatalf("stream %d (port %d, token %q): %v, want admitted %v", i, c.port, c.secret, err, c.ok)
		}
		if err == nil {
			releases = append(releases, rel)
		}
	}
	for _, r := range releases {
		r()
	}
	if len(s.shares.byConn) != 0 || len(s.shares.byWho) != 0 {
		t.Fatalf("counts left after every stream ended: %v %v", s.shares.byConn, s.shares.byWho)
	}
	if _, err := s.admit(from(3, "grk_a")); err != nil {
		t.Fatalf("token a after its streams ended: %v", err)
	}
}
