package tlsutil

import (
	"errors"
	"net"
	"sync"
	"time"
)

// Split sorts the connections of one listener by their first byte: a TLS
// handshake record (0x16) goes to TLS(), anything else to Plain(). A port
// that serves TLS keeps a Plain() side only to answer a plaintext client at
// once with an error that says TLS is expected, instead of a hang-up the
// client would retry until its deadline.
type Split struct {
	inner   net.Listener
	timeout time.Duration
	tls     *subListener
	plain   *subListener

	closeOnce sync.Once
	done      chan struct{}
	errMu     sync.Mutex
	err       error
}

// NewSplit starts sorting l's connections. timeout bounds the wait for a
// connection's first byte; a connection silent for that long is closed.
func NewSplit(l net.Listener, timeout time.Duration) *Split {
	s := &Split{inner: l, timeout: timeout, done: make(chan struct{})}
	s.tls = &subListener{s: s, ch: make(chan net.Conn)}
	s.plain = &subListener{s: s, ch: make(chan net.Conn)}
	go s.loop()
	return s
}

// TLS is the listener of connections that start a TLS handshake.
func (s *Split) TLS() net.Listener { return s.tls }

// Plain is the listener of the other connections.
func (s *Split) Plain() net.Listener { return s.plain }

// Close closes the underlying listener and both sides.
func (s *Split) Close() error {
	var err error
	s.closeOnce.Do(func() {
		close(s.done)
		err = s.inner.Close()
	})
	return err
}

func (s *Split) loop() {
	for {
		c, err := s.inner.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			s.errMu.Lock()
			s.err = err
			s.errMu.Unlock()
			s.Close()
			return
		}
		go s.sort(c)
	}
}

func (s *Split) sort(c net.Conn) {
	_ = c.SetReadDeadline(time.Now().Add(s.timeout))
	var b [1]byte
	n, err := c.Read(b[:])
	if err != nil || n == 0 {
		c.Close()
		return
	}
	_ = c.SetReadDeadline(time.Time{})
	pc := &prefixConn{Conn: c, prefix: b[:n]}
	to := s.plain
	if b[0] == 0x16 {
		to = s.tls
	}
	select {
	case to.ch <- pc:
	case <-s.done:
		c.Close()
	}
}

func (s *Split) acceptErr() error {
	s.errMu.Lock()
	defer s.errMu.Unlock()
	if s.err != nil {
		return s.err
	}
	return net.ErrClosed
}

type subListener struct {
	s  *Split
	ch chan net.Conn
}

func (l *subListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.s.done:
		return nil, l.s.acceptErr()
	}
}

// Close closes the whole split: the two sides serve one port.
func (l *subListener) Close() error { return l.s.Close() }

func (l *subListener) Addr() net.Addr { return l.s.inner.Addr() }

// prefixConn replays the bytes read to sort the connection.
type prefixConn struct {
	net.Conn
	prefix []byte
}

func (c *prefixConn) Read(p []byte) (int, error) {
	if len(c.prefix) > 0 {
		n := copy(p, c.prefix)
		c.prefix = c.prefix[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}
