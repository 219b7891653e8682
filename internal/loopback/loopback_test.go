package loopback

import (
	"net"
	"testing"
)

func TestAddr(t *testing.T) {
	for _, c := range []struct {
		addr string
		want bool
	}{
		{"127.0.0.1:7420", true},
		{"127.1.2.3:7420", true},
		{"[::1]:7420", true},
		{"localhost:7420", true},
		{"LocalHost:7420", true},
		{"0.0.0.0:7420", false}, // wildcard: every interface
		{"[::]:7420", false},
		{":7420", false},
		{"10.0.0.1:7420", false},
		{"[fe80::1]:7420", false},
		{"n1:7420", false}, // a name is not resolved
		{"localhost.example.com:7420", false},
		{"127.0.0.1", false}, // not host:port
		{"", false},
	} {
		if got := Addr(c.addr); got != c.want {
			t.Errorf("Addr(%q) = %v, want %v", c.addr, got, c.want)
		}
	}
}

func TestNetAddr(t *testing.T) {
	for _, c := range []struct {
		addr net.Addr
		want bool
	}{
		{&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1}, true},
		{&net.TCPAddr{IP: net.IPv6loopback, Port: 1}, true},
		{&net.TCPAddr{IP: net.IPv4(10, 0, 0, 1), Port: 1}, false},
		{&net.TCPAddr{Port: 1}, false},
		{&net.UnixAddr{Name: "/tmp/s", Net: "unix"}, true},
		{nil, false},
	} {
		if got := NetAddr(c.addr); got != c.want {
			t.Errorf("NetAddr(%v) = %v, want %v", c.addr, got, c.want)
		}
	}
}
