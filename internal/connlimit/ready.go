package connlimit

import (
	"sync/atomic"

	"google.golang.org/grpc/mem"
)

// ReadOnReady reads into a buffer of the pool that it takes only once
// data is there, so that a connection waiting for its next bytes holds no
// buffer. gRPC's server transport reads a connection that has this method
// through it (google.golang.org/grpc/internal/transport/readyreader, the
// interface Reader; gRPC does the same itself for a bare *net.TCPConn and
// gives any other connection a 32 KiB read buffer of its own for its
// whole life). It returns the buffer, the bytes read into it (the caller
// uses them before it looks at the error), and the error; a buffer with
// no bytes is given back to the pool here.
func (c *conn) ReadOnReady(size int, pool mem.BufferPool) (*[]byte, int, error) {
	c.ready.calls.Add(1)
	var buf *[]byte
	var n int
	var err error
	if c.raw != nil {
		buf, n, err = c.readRaw(size, pool)
	} else {
		buf = pool.Get(size)
		n, err = c.Conn.Read(*buf)
	}
	if n > 0 {
		c.gotData()
		return buf, n, err
	}
	if buf != nil {
		pool.Put(buf)
	}
	return nil, 0, err
}

// readyState is ReadOnReady's, kept in the connection so that a read
// allocates nothing (gRPC reads a connection from one goroutine).
type readyState struct {
	doRead func(fd uintptr) bool // the callback of the descriptor's Read
	size   int
	pool   mem.BufferPool
	buf    *[]byte
	n      int
	err    error
	calls  atomic.Uint32 // of ReadOnReady (tests: gRPC reads through it)
}
