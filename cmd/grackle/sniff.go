package main

import (
	"bytes"
	"context"
	"net"
	"sync"
)

// httpSniffer notices an endpoint that is not a gRPC port. One that
// answers HTTP/1 (a node's HTTP port, given where its gRPC port belongs):
// the first bytes such a server sends back to gRPC's HTTP/2 preface are an
// "HTTP/1.x 400" status line. One that closes connection after connection
// without sending a byte (a node's Raft port, which drops what is not a
// Raft call; a gRPC server always sends its settings first, a TLS server
// an alert). gRPC would retry either until --timeout and then report a
// framing or preface error; the command stops instead and names the fix.
type httpSniffer struct {
	mu     sync.Mutex
	addr   string             // the first endpoint that answered HTTP/1
	cancel context.CancelFunc // the command's call, ended when one does
	// silent counts, per endpoint, connections closed before their first
	// byte; spoke marks the endpoints that sent one (never silent then).
	silent     map[string]int
	spoke      map[string]bool
	silentAddr string // the first endpoint closed silentCloses times in a row
}

// silentCloses is how many connections in a row an endpoint must close
// without a byte to be called no gRPC port: one could be a node stopping
// or a connection refused under a bound; two in a row, from an endpoint
// that never sent a byte, is a port that speaks no gRPC.
const silentCloses = 2

// dial opens a TCP connection whose first read is checked.
func (s *httpSniffer) dial(ctx context.Context, addr string) (net.Conn, error) {
	c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	return &sniffConn{Conn: c, s: s, addr: addr}, nil
}

// found is the endpoint that answered HTTP/1, or "".
func (s *httpSniffer) found() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addr
}

// foundSilent is the endpoint that closed connections without a byte, or "".
func (s *httpSniffer) foundSilent() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.silentAddr
}

// closedSilently notes a connection to addr closed before its first byte;
// at silentCloses in a row the command's call ends.
func (s *httpSniffer) closedSilently(addr string) {
	s.mu.Lock()
	if s.silent == nil {
		s.silent = map[string]int{}
	}
	var cancel context.CancelFunc
	if !s.spoke[addr] {
		s.silent[addr]++
		if s.silent[addr] >= silentCloses && s.silentAddr == "" {
			s.silentAddr, cancel = addr, s.cancel
		}
	}
	s.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

func (s *httpSniffer) answered(addr string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.spoke == nil {
		s.spoke = map[string]bool{}
	}
	s.spoke[addr] = true
	delete(s.silent, addr)
}

func (s *httpSniffer) setCancel(cancel context.CancelFunc) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cancel = cancel
}

type sniffConn struct {
	net.Conn
	s       *httpSniffer
	addr    string
	checked bool // reads happen on one goroutine (gRPC's reader)
}

func (c *sniffConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if !c.checked && n == 0 && err != nil {
		c.checked = true
		c.s.closedSilently(c.addr)
		return n, err
	}
	if !c.checked && n > 0 {
		c.checked = true
		c.s.answered(c.addr)
		if bytes.HasPrefix(b[:n], []byte("HTTP/1.")) {
			c.s.mu.Lock()
			if c.s.addr == "" {
				c.s.addr = c.addr
			}
			cancel := c.s.cancel
			c.s.mu.Unlock()
			if cancel != nil {
				cancel()
			}
		}
	}
	return n, err
}
