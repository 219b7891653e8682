package main

import (
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// An endpoint that cannot be a gRPC address is refused at once with exit
// 2 and the fix, not after --timeout with gRPC's parse error.
func TestEndpointMistakes(t *testing.T) {
	for _, tc := range []struct {
		endpoint, stderr string
	}{
		{"127.0.0.1", "grackle: namespace list: --endpoints 127.0.0.1: want host:port, the node's gRPC address (default port 7420), e.g. --endpoints 127.0.0.1:7420\n"},
		{"http://127.0.0.1:7420", "grackle: namespace list: --endpoints http://127.0.0.1:7420: give host:port without the http:// scheme (--endpoints 127.0.0.1:7420)\n"},
		{"127.0.0.1:http", "grackle: namespace list: --endpoints 127.0.0.1:http: port \"http\" is not a number in 1..65535\n"},
		{"127.0.0.1:7420:7421", "grackle: namespace list: --endpoints 127.0.0.1:7420:7421: want one host:port; an IPv6 address goes in brackets, e.g. --endpoints [::1]:7420\n"},
	} {
		start := time.Now()
		r := runCLI(t, nil, "namespace", "list", "--timeout", "30s", "--endpoints", tc.endpoint)
		if r.code != exitUsage || r.stderr != tc.stderr {
			t.Errorf("--endpoints %s: exit %d, stderr %q; want exit %d, %q", tc.endpoint, r.code, r.stderr, exitUsage, tc.stderr)
		}
		if d := time.Since(start); d > 20*time.Second {
			t.Errorf("--endpoints %s took %v: it should be refused without dialing", tc.endpoint, d)
		}
	}
}

// A node's HTTP port given as the endpoint (it answers HTTP/1 to gRPC's
// preface) ends the command at once with exit 2 and the fix.
func TestEndpointIsAnHTTPPort(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	defer srv.Close()
	ep := strings.TrimPrefix(srv.URL, "http://")
	start := time.Now()
	r := runCLI(t, nil, "namespace", "list", "--timeout", "60s", "--endpoints", ep)
	want := "grackle: namespace list: --endpoints " + ep + " answered HTTP/1: that is a node's HTTP port (/metrics, /ui/); give its gRPC port (default 7420)\n"
	if r.code != exitUsage || r.stderr != want {
		t.Fatalf("exit %d, stderr %q; want exit %d, %q", r.code, r.stderr, exitUsage, want)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Fatalf("took %v: it should end when the endpoint answers HTTP, not at --timeout (60s)", d)
	}
}

// An unknown flag near a known one is answered with it; a global flag
// works before the command too.
func TestFlagMistakes(t *testing.T) {
	r := runCLI(t, nil, "semaphore", "create", "ns", "s", "--permit", "3")
	if want := "grackle: semaphore create: unknown flag: --permit (did you mean --permits?)\n"; r.code != exitUsage || r.stderr != want {
		t.Errorf("--permit: exit %d, %q; want %d, %q", r.code, r.stderr, exitUsage, want)
	}
	r = runCLI(t, nil, "semaphore", "create", "ns", "s", "--bogus", "3")
	if want := "grackle: semaphore create: unknown flag: --bogus\n"; r.code != exitUsage || r.stderr != want {
		t.Errorf("--bogus: exit %d, %q; want %d, %q", r.code, r.stderr, exitUsage, want)
	}
	// -q before the command is the command's -q: the command is found (the
	// endpoint mistake below is then what is reported, not "unknown command").
	r = runCLI(t, nil, "-q", "cluster", "status", "--endpoints", "127.0.0.1")
	if !strings.HasPrefix(r.stderr, "grackle: cluster status: --endpoints 127.0.0.1:") {
		t.Errorf("-q before the command: exit %d, %q", r.code, r.stderr)
	}
}

// An endpoint that closes every connection without a byte (a node's Raft
// port, which drops what is not a Raft call) ends the command with exit 2
// and the fix, not at --timeout with a preface error.
func TestEndpointClosesSilently(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	ep := l.Addr().String()
	start := time.Now()
	r := runCLI(t, nil, "namespace", "list", "--timeout", "60s", "--endpoints", ep)
	want := "grackle: namespace list: --endpoints " + ep + " closed every connection without a word: that is no node's gRPC port (a node's Raft port, default 7421?), or the node refuses this host more connections (--max-connections-per-address); give its gRPC port (default 7420)\n"
	if r.code != exitUsage || r.stderr != want {
		t.Fatalf("exit %d, stderr %q; want exit %d, %q", r.code, r.stderr, exitUsage, want)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Fatalf("took %v: it should end at the second silent close, not at --timeout (60s)", d)
	}
}
