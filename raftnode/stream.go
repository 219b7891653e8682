package raftnode

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/grackle-coord/grackle/internal/connlimit"
	"github.com/grackle-coord/grackle/tlsutil"
)

// streamLayer is the raft.StreamLayer of NetworkTransport: TCP, with peer
// TLS when peer is set. Handshakes run off the accept loop (a silent
// connection cannot hold up the others) and are bounded by
// handshakeTimeout; a refused peer is logged with the reason.
type streamLayer struct {
	lis              net.Listener
	adv              net.Addr
	peer             *tlsutil.Peer
	handshakeTimeout time.Duration
	log              hclog.Logger

	conns     chan net.Conn
	done      chan struct{}
	closeOnce sync.Once
}

var _ raft.StreamLayer = (*streamLayer)(nil)

func newStreamLayer(bind string, adv net.Addr, peer *tlsutil.Peer, bounds Config, log hclog.Logger) (*streamLayer, error) {
	handshakeTimeout := bounds.HandshakeTimeout
	lis, err := net.Listen("tcp", bind)
	if err != nil {
		return nil, err
	}
	if adv == nil {
		adv = lis.Addr()
	}
	if ta, ok := adv.(*net.TCPAddr); !ok || ta.IP == nil || ta.IP.IsUnspecified() {
		lis.Close()
		return nil, fmt.Errorf("the Raft address %s is not one peers can dial: set --advertise-raft", adv)
	}
	if handshakeTimeout <= 0 {
		handshakeTimeout = 10 * time.Second
	}
	// A connection that never speaks, or falls silent, gives its slot back
	// (hashicorp/raft's transport reads an accepted connection with no
	// deadline of its own), and one address cannot take every slot.
	lis = connlimit.New(lis, connlimit.Config{Max: bounds.MaxConns, PerAddress: bounds.MaxConnsPerAddress, FirstByte: handshakeTimeout, Idle: bounds.IdleTimeout,
		Refused: func(addr string) {
			log.Warn("refused a Raft connection: its address has every connection it may open", "remote", addr, "max_per_address", bounds.MaxConnsPerAddress)
		}})
	s := &streamLayer{lis: lis, adv: adv, peer: peer, handshakeTimeout: handshakeTimeout, log: log,
		conns: make(chan net.Conn), done: make(chan struct{})}
	go s.acceptLoop()
	return s, nil
}

func (s *streamLayer) acceptLoop() {
	for {
		c, err := s.lis.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			s.Close()
			return
		}
		if s.peer == nil {
			s.deliver(&notRaftCheck{Conn: c, log: s.log})
			continue
		}
		go s.handshake(c)
	}
}

func (s *streamLayer) handshake(raw net.Conn) {
	tc := tls.Server(raw, s.peer.ServerConfig())
	ctx, cancel := context.WithTimeout(context.Background(), s.handshakeTimeout)
	defer cancel()
	if err := tc.HandshakeContext(ctx); err != nil {
		s.log.Warn("refused a Raft connection: peer TLS handshake failed", "remote", raw.RemoteAddr().String(), "reason", err.Error())
		raw.Close()
		return
	}
	s.deliver(&notRaftCheck{Conn: tc, log: s.log})
}

func (s *streamLayer) deliver(c net.Conn) {
	select {
	case s.conns <- c:
	case <-s.done:
		c.Close()
	}
}

// Accept returns the next connection (TLS-authenticated with peer TLS).
func (s *streamLayer) Accept() (net.Conn, error) {
	select {
	case c := <-s.conns:
		return c, nil
	case <-s.done:
		return nil, net.ErrClosed
	}
}

func (s *streamLayer) Close() error {
	var err error
	s.closeOnce.Do(func() {
		close(s.done)
		err = s.lis.Close()
	})
	return err
}

func (s *streamLayer) Addr() net.Addr { return s.adv }

// Dial connects to a peer's Raft address; with peer TLS the peer must
// present a certificate of the peer CA that names the address's host.
func (s *streamLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	c, err := net.DialTimeout("tcp", string(address), timeout)
	if err != nil || s.peer == nil {
		return c, err
	}
	tc := tls.Client(c, s.peer.ClientConfig(string(address)))
	if timeout <= 0 || timeout > s.handshakeTimeout {
		timeout = s.handshakeTimeout
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := tc.HandshakeContext(ctx); err != nil {
		c.Close()
		s.log.Warn("refused a Raft peer: peer TLS handshake failed", "peer", string(address), "reason", err.Error())
		return nil, fmt.Errorf("peer TLS handshake with %s: %w", address, err)
	}
	return tc, nil
}

// beyondLoopback reports whether a listen address accepts connections from
// other hosts.
func beyondLoopback(addr net.Addr) bool {
	ta, ok := addr.(*net.TCPAddr)
	if !ok {
		return true
	}
	return ta.IP == nil || !ta.IP.IsLoopback()
}
