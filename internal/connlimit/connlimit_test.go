package connlimit

import (
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"
)

func listen(t *testing.T, cfg Config) (*Listener, chan net.Conn) {
	t.Helper()
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := New(raw, cfg)
	t.Cleanup(func() { l.Close() })
	accepted := make(chan net.Conn, 16)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	return l, accepted
}

func dial(t *testing.T, l net.Listener) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// closedByServer waits (generously) for the server to close c.
func closedByServer(t *testing.T, c net.Conn) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, io.EOF) && !isReset(err) {
		t.Fatalf("read: %v, want the server to have closed the connection", err)
	}
}

func isReset(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && !errors.Is(err, os.ErrDeadlineExceeded)
}

// One address gets PerAddress connections; past it a connection is closed
// at once, and a closed one gives its slot back.
func TestPerAddress(t *testing.T) {
	refused := make(chan string, 4)
	l, accepted := listen(t, Config{PerAddress: 2, Refused: func(a string) { refused <- a }})
	dial(t, l)
	dial(t, l)
	first, second := <-accepted, <-accepted
	third := dial(t, l)
	if a := <-refused; a != "127.0.0.1" {
		t.Fatalf("refused %q, want 127.0.0.1", a)
	}
	closedByServer(t, third)
	if n := l.Open("127.0.0.1"); n != 2 {
		t.Fatalf("open %d, want 2", n)
	}
	first.Close()
	first.Close() // a second close gives nothing back twice
	if n := l.Open("127.0.0.1"); n != 1 {
		t.Fatalf("open %d after a close, want 1", n)
	}
	dial(t, l)
	<-accepted
	second.Close()
}

// A connection that never sends a byte is closed after FirstByte; one that
// spoke is then bounded by Idle between reads.
func TestFirstByteAndIdle(t *testing.T) {
	l, accepted := listen(t, Config{FirstByte: 200 * time.Millisecond, Idle: 3 * time.Second})
	silent := dial(t, l)
	sc := <-accepted
	go func() { _, _ = io.Copy(io.Discard, sc); sc.Close() }()
	closedByServer(t, silent)

	talker := dial(t, l)
	tc := <-accepted
	done := make(chan error, 1)
	go func() {
		_, err := io.Copy(io.Discard, tc)
		tc.Close()
		done <- err
	}()
	// Talking keeps it open past the first-byte bound...
	for i := 0; i < 10; i++ {
		if _, err := talker.Write([]byte("x")); err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	select {
	case err := <-done:
		t.Fatalf("a talking connection was closed: %v", err)
	default:
	}
	// ... and silence closes it.
	select {
	case err := <-done:
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("the silent connection ended with %v, want its idle deadline", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("a silent connection stayed open")
	}
	if n := l.Open("127.0.0.1"); n != 0 {
		t.Fatalf("open %d after both closed, want 0", n)
	}
}
