package watch

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/grackle-coord/grackle/acl"
	"github.com/grackle-coord/grackle/internal/peerconn"
)

// Defaults of the per-client bounds of Config.
const (
	DefaultMaxWatchersPerConnection = 1_000
	DefaultMaxWatchersPerClient     = 1_000
)

// shares counts the watch streams of each connection and of each client,
// so that one client cannot take every stream a node serves: a client is
// its token when it sends one, else its network address (without the
// port).
type shares struct {
	mu     sync.Mutex
	byConn map[string]int
	byWho  map[string]int
}

// admit counts a new stream of ctx's caller against the bounds, or refuses
// it naming the bound and the flag that sets it. A stream relayed by a
// follower was admitted there (its peer here is the follower, shared by
// all of the follower's clients) and is not counted again.
func (s *Service) admit(ctx context.Context) (release func(), err error) {
	if peerconn.Forwarded(ctx) {
		return func() {}, nil
	}
	conn, who := "unknown", "unknown"
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		conn = p.Addr.String()
		who = "address " + conn
		if host, _, err := net.SplitHostPort(conn); err == nil {
			who = "address " + host
		}
	}
	if secret := acl.SecretFrom(ctx); secret != "" {
		h := sha256.Sum256([]byte(secret))
		who = "token " + hex.EncodeToString(h[:8])
	}
	sh := &s.shares
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.byConn == nil {
		sh.byConn, sh.byWho = map[string]int{}, map[string]int{}
	}
	if sh.byConn[conn] >= s.cfg.MaxWatchersPerConnection {
		return nil, status.Errorf(codes.ResourceExhausted,
			"watchers: this connection already has %d watch streams on node %s (--max-watchers-per-connection); close some or open another connection",
			sh.byConn[conn], s.cfg.NodeID)
	}
	if sh.byWho[who] >= s.cfg.MaxWatchersPerClient {
		return nil, status.Errorf(codes.ResourceExhausted,
			"watchers: this client (%s) already has %d watch streams on node %s (--max-watchers-per-client); close some first",
			who, sh.byWho[who], s.cfg.NodeID)
	}
	sh.byConn[conn]++
	sh.byWho[who]++
	return func() {
		sh.mu.Lock()
		defer sh.mu.Unlock()
		decrement(sh.byConn, conn)
		decrement(sh.byWho, who)
	}, nil
}

func decrement(m map[string]int, k string) {
	if m[k]--; m[k] <= 0 {
		delete(m, k)
	}
}
