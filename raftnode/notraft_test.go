package raftnode

import (
	"bytes"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
)

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A gRPC client that dials the Raft port by mistake (its HTTP/2 preface
// starts with 'P') is closed without a byte back and one warning that says
// what happened, while a connection that starts with a Raft call type goes
// through to the transport untouched.
func TestRaftPortRefusesWhatIsNotRaft(t *testing.T) {
	var logs syncBuffer
	log := hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Warn})
	s, err := newStreamLayer("127.0.0.1:0", nil, nil, Config{HandshakeTimeout: 10 * time.Second}, log)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	got := make(chan []byte, 1)
	go func() {
		c, err := s.Accept()
		if err != nil {
			return
		}
		b, _ := io.ReadAll(c)
		c.Close()
		got <- b
	}()
	c, err := net.Dial("tcp", s.lis.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	if n, err := c.Read(make([]byte, 16)); n != 0 || err == nil {
		t.Fatalf("the client read %d bytes, %v: want the connection closed without a byte", n, err)
	}
	select {
	case b := <-got:
		if len(b) != 0 {
			t.Fatalf("the transport read %q: want nothing", b)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the accepted connection was not ended")
	}
	if l := logs.String(); !strings.Contains(l, "does not speak Raft") || !strings.Contains(l, "first_bytes=\"PRI * HT\"") {
		t.Fatalf("log %q: want one warning naming the first bytes", l)
	}

	// A Raft call's type byte passes.
	go func() {
		c, err := s.Accept()
		if err != nil {
			return
		}
		b := make([]byte, 3)
		_, _ = io.ReadFull(c, b)
		c.Close()
		got <- b
	}()
	c2, err := net.Dial("tcp", s.lis.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if _, err := c2.Write([]byte{0, 1, 2}); err != nil {
		t.Fatal(err)
	}
	select {
	case b := <-got:
		if !bytes.Equal(b, []byte{0, 1, 2}) {
			t.Fatalf("the transport read %v: want [0 1 2]", b)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the Raft connection was not delivered")
	}
}
