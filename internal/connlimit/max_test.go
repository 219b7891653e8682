package connlimit

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/mem"
)

// freed: no connection open and no slot of Max taken but the one an
// Accept waiting for the next connection holds.
func freed(l *Listener) bool { return l.Total() == 0 && len(l.slots) <= 1 }

// waitFor polls cond for up to 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("waited 10 s for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// With Max open, Accept waits; a close gives one slot back, a second close
// of the same connection none.
func TestMaxWaitsForASlot(t *testing.T) {
	l, accepted := listen(t, Config{Max: 2})
	dial(t, l)
	dial(t, l)
	first, second := <-accepted, <-accepted
	dial(t, l)
	select {
	case <-accepted:
		t.Fatal("a third connection was accepted with Max 2 open")
	case <-time.After(200 * time.Millisecond):
	}
	first.Close()
	third := <-accepted
	first.Close() // gives nothing back twice
	dial(t, l)
	select {
	case <-accepted:
		t.Fatal("a second close of one connection freed a slot")
	case <-time.After(200 * time.Millisecond):
	}
	second.Close()
	fourth := <-accepted
	third.Close()
	fourth.Close()
	waitFor(t, "every slot back", func() bool { return freed(l) })
}

// A connection refused for its address's bound keeps no slot of Max.
func TestRefusedKeepsNoSlot(t *testing.T) {
	l, accepted := listen(t, Config{Max: 2, PerAddress: 1})
	dial(t, l)
	first := <-accepted
	for i := 0; i < 5; i++ {
		closedByServer(t, dial(t, l))
	}
	if n := len(l.slots); n > 2 {
		t.Fatalf("%d slots taken with one connection open", n)
	}
	first.Close()
	if !freed(l) {
		t.Fatalf("%d slots taken with none open", len(l.slots))
	}
	// Were a refusal to keep a slot, Accept would wait for one here.
	dial(t, l)
	select {
	case c := <-accepted:
		c.Close()
	case <-time.After(10 * time.Second):
		t.Fatal("no slot for a connection after refusals")
	}
}

// Close ends an Accept that waits for a slot.
func TestCloseEndsAWaitingAccept(t *testing.T) {
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := New(raw, Config{Max: 1})
	dial(t, l)
	c, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	done := make(chan error, 1)
	go func() { _, err := l.Accept(); done <- err }()
	time.Sleep(50 * time.Millisecond)
	l.Close()
	select {
	case err := <-done:
		if !errors.Is(err, net.ErrClosed) {
			t.Fatalf("Accept: %v, want net.ErrClosed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Accept still waits after Close")
	}
}

// gRPC's server reads an accepted connection through ReadOnReady (into
// buffers of its pool, none held while the connection is idle); every
// connection, whether its client closes it, it never speaks HTTP/2, or
// the server stops, gives its slot back.
func TestGRPCReadsOnReadyAndFreesSlots(t *testing.T) {
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []*conn
	l := New(raw, Config{Max: 8, PerAddress: 8})
	srv := grpc.NewServer()
	healthpb.RegisterHealthServer(srv, health.NewServer())
	go func() { _ = srv.Serve(recording{l, &mu, &conns}) }()
	t.Cleanup(srv.Stop)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	for round := 0; round < 3; round++ { // more connections in all than Max
		var ccs []*grpc.ClientConn
		for i := 0; i < 6; i++ {
			cc, err := grpc.NewClient(l.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
				t.Fatal(err)
			}
			ccs = append(ccs, cc)
		}
		for _, cc := range ccs {
			cc.Close()
		}
		waitFor(t, "the closed connections' slots", func() bool { return freed(l) })
	}
	mu.Lock()
	for _, c := range conns {
		if c.ready.calls.Load() == 0 {
			t.Errorf("gRPC read connection %s without ReadOnReady", c.RemoteAddr())
		}
	}
	mu.Unlock()

	// Not HTTP/2: gRPC closes it, before any transport exists.
	junk := dial(t, l)
	if _, err := junk.Write([]byte("GET / HTTP/1.1\r\nHost: grackle\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	_ = junk.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.Copy(io.Discard, junk); err != nil && !isReset(err) {
		t.Fatalf("read: %v, want the server to close the connection", err)
	}
	waitFor(t, "the refused connection's slot", func() bool { return freed(l) })

	// Open when the server stops.
	cc, err := grpc.NewClient(l.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	if _, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	waitFor(t, "the slots of a stopped server", func() bool { return l.Total() == 0 && len(l.slots) == 0 })
}

// recording keeps each accepted connection.
type recording struct {
	*Listener
	mu    *sync.Mutex
	conns *[]*conn
}

func (r recording) Accept() (net.Conn, error) {
	c, err := r.Listener.Accept()
	if err == nil {
		r.mu.Lock()
		*r.conns = append(*r.conns, c.(*conn))
		r.mu.Unlock()
	}
	return c, err
}

// ReadOnReady returns what was sent, in reads of at most the size asked,
// then the end; a buffer with no bytes goes back to the pool.
func TestReadOnReady(t *testing.T) {
	l, accepted := listen(t, Config{})
	client := dial(t, l)
	sc := (<-accepted).(*conn)
	defer sc.Close()
	if sc.raw == nil {
		t.Fatal("a TCP connection has no raw descriptor")
	}
	want := bytes.Repeat([]byte("0123456789abcdef"), 10000) // 160,000 bytes
	go func() {
		_, _ = client.Write(want)
		client.Close()
	}()
	pool := &countingPool{BufferPool: mem.DefaultBufferPool()}
	var got []byte
	for {
		buf, n, err := sc.ReadOnReady(32*1024, pool)
		if n > 0 {
			if n > 32*1024 {
				t.Fatalf("read %d bytes into a buffer of 32 KiB", n)
			}
			got = append(got, (*buf)[:n]...)
			pool.Put(buf)
		} else if buf != nil {
			t.Fatal("a buffer with no bytes was returned")
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("read %d bytes, want the %d sent", len(got), len(want))
	}
	if pool.out() != 0 {
		t.Fatalf("%d buffers not given back to the pool", pool.out())
	}
}

// ReadOnReady keeps the first-byte deadline: a silent connection's read
// ends with it.
func TestReadOnReadyDeadline(t *testing.T) {
	l, accepted := listen(t, Config{FirstByte: 100 * time.Millisecond})
	dial(t, l)
	sc := (<-accepted).(*conn)
	defer sc.Close()
	pool := &countingPool{BufferPool: mem.DefaultBufferPool()}
	_, n, err := sc.ReadOnReady(1024, pool)
	if n != 0 || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read %d bytes, %v; want the first-byte deadline", n, err)
	}
	if pool.out() != 0 {
		t.Fatalf("%d buffers not given back to the pool", pool.out())
	}
}

type countingPool struct {
	mem.BufferPool
	mu       sync.Mutex
	got, put int
}

func (p *countingPool) Get(n int) *[]byte {
	p.mu.Lock()
	p.got++
	p.mu.Unlock()
	return p.BufferPool.Get(n)
}

func (p *countingPool) Put(b *[]byte) {
	p.mu.Lock()
	p.put++
	p.mu.Unlock()
	p.BufferPool.Put(b)
}

func (p *countingPool) out() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.got - p.put
}
