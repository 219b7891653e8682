package raftnode

import (
	"io"
	"net"

	"github.com/hashicorp/go-hclog"
)

// maxRaftRPCType bounds the first byte of a connection to the Raft port:
// hashicorp/raft's transport starts every call with its type, a small
// number (0 to 4 today); the margin leaves room for new types. Anything
// from 0x10 up is another protocol: an HTTP/2 (gRPC) client's preface
// starts with 'P', HTTP/1 with a method's letter, a TLS client with 0x16.
const maxRaftRPCType = 0x0f

// notRaftCheck closes a connection whose first byte is no Raft call, with
// one warning that says what it probably is, instead of the transport's
// "failed to decode incoming command: unknown rpc type 80". The client
// sees the connection closed without a byte (the CLI names the fix).
type notRaftCheck struct {
	net.Conn
	log     hclog.Logger
	checked bool // reads happen on the transport's one goroutine per connection
}

func (c *notRaftCheck) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if c.checked || n == 0 {
		return n, err
	}
	c.checked = true
	if b[0] <= maxRaftRPCType {
		return n, err
	}
	c.log.Warn("refused a connection to the Raft port: it does not speak Raft (a client? clients use the gRPC port)",
		"remote", c.RemoteAddr().String(), "first_bytes", printable(b[:min(n, 8)]))
	c.Conn.Close()
	return 0, io.EOF // the transport ends the connection without a log line of its own
}

// printable quotes the first bytes of a connection for a log line.
func printable(b []byte) string {
	out := make([]byte, 0, len(b))
	for _, c := range b {
		if c < 0x20 || c > 0x7e {
			c = '.'
		}
		out = append(out, c)
	}
	return string(out)
}
