// Package loopback tells addresses only this host can reach from those
// other hosts can: the line between a node left open by default and one
// that must be secured or marked --insecure (docs/SECURITY.md).
package loopback

import (
	"net"
	"strings"
)

// Host reports whether host, the host part of an address, reaches only
// this machine: a loopback IP (127.0.0.0/8, ::1) or the name "localhost".
// A wildcard ("", 0.0.0.0, ::), any other IP and any other name are beyond
// loopback. Names are not resolved: what a name resolves to may change
// after the check, and an address that arrives in a request must not make
// the node query DNS.
func Host(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Addr is Host for a "host:port" address; one that does not parse as
// host:port counts as beyond loopback.
func Addr(hostport string) bool {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		return false
	}
	return Host(host)
}

// NetAddr is Addr for a connection's address: a TCP address is loopback
// when its IP is; an address that is not TCP (a Unix socket, an in-memory
// pipe) never left this host.
func NetAddr(a net.Addr) bool {
	ta, ok := a.(*net.TCPAddr)
	if !ok {
		return a != nil
	}
	return ta.IP != nil && ta.IP.IsLoopback()
}
