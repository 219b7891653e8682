package server_test

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
	"github.com/grackle-coord/grackle/server"
	"github.com/grackle-coord/grackle/server/servertest"
)

// Silent connections cannot hold a port: each is closed once the handshake
// bound passes, the number open at once is bounded, and /healthz and new
// clients are served meanwhile. (With the old 120 s handshake default and
// no bound, 300 silent connections under a low descriptor limit made the
// node refuse new clients.)
func TestSilentConnectionsAreBoundedAndClosed(t *testing.T) {
	c := servertest.Start(t, 1, func(cfg *server.Config) {
		cfg.HTTPAddr = "127.0.0.1:0"
		cfg.MaxConnections = 50
		cfg.HandshakeTimeout = 300 * time.Millisecond
		cfg.IdleTimeout = 300 * time.Millisecond
	})
	s := c.Nodes[0]
	const silent = 300
	var conns []net.Conn
	for _, addr := range []string{s.GRPCAddr(), s.HTTPAddr()} {
		for i := 0; i < silent; i++ {
			conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
			if err != nil {
				t.Fatalf("dial %d to %s: %v", i, addr, err)
			}
			conns = append(conns, conn)
		}
	}
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()

	// While they are open: /healthz and a new gRPC client are served.
	hc := &http.Client{Timeout: 30 * time.Second}
	resp, err := hc.Get("http://" + s.HTTPAddr() + "/healthz")
	if err != nil {
		t.Fatalf("/healthz with %d silent connections open: %v", silent, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/healthz: %d", resp.StatusCode)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := c.Client(0).ListNamespaces(ctx, &pb.ListNamespacesRequest{}); err != nil {
		t.Fatalf("a new client with %d silent connections open: %v", silent, err)
	}

	// Every silent connection is closed by the server (EOF or reset), long
	// before the old 120 s handshake default.
	deadline := time.Now().Add(60 * time.Second)
	for i, conn := range conns {
		_ = conn.SetReadDeadline(deadline)
		_, err := io.Copy(io.Discard, conn)
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Fatalf("silent connection %d still open after 60 s", i)
		}
	}
}

// An idle HTTP keep-alive connection is closed after the idle timeout.
func TestIdleHTTPKeepAliveIsClosed(t *testing.T) {
	c := servertest.Start(t, 1, func(cfg *server.Config) {
		cfg.HTTPAddr = "127.0.0.1:0"
		cfg.IdleTimeout = 200 * time.Millisecond
	})
	conn, err := net.DialTimeout("tcp", c.Nodes[0].HTTPAddr(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte("GET /healthz HTTP/1.1\r\nHost: grackle\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	r := bufio.NewReader(conn)
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if strings.EqualFold(resp.Header.Get("Connection"), "close") {
		t.Fatal("the server closed after one request; the test needs a keep-alive connection")
	}
	if _, err := r.ReadByte(); err == nil {
		t.Fatal("the idle connection received data")
	} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatal("the idle keep-alive connection was still open after 30 s")
	}
}
