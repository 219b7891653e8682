package main

import (
	"bytes"
	"context"
	"net"
	"sync"
)

// httpSniffer notices an endpoint that answers HTTP/1 (a node's HTTP port,
// given where its gRPC port belongs): the first bytes such a server sends
// back to gRPC's HTTP/2 preface are an "HTTP/1.x 400" status line. gRPC
// would retry that endpoint until --timeout and then report a framing
// error; the command stops at once instead and names the fix.
type httpSniffer struct {
	mu     sync.Mutex
	addr   string             // the first endpoint that answered HTTP/1
	cancel context.CancelFunc // the command's call, ended when one does
}

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
	if !c.checked && n > 0 {
		c.checked = true
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
