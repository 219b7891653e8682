//go:build unix

package connlimit

import (
	"io"
	"os"
	"syscall"

	"google.golang.org/grpc/mem"
)

// readRaw waits until the descriptor is readable (the read deadline
// holds), then takes a buffer and reads without blocking.
func (c *conn) readRaw(size int, pool mem.BufferPool) (*[]byte, int, error) {
	r := &c.ready
	if r.doRead == nil {
		r.doRead = func(fd uintptr) bool {
			r.buf = r.pool.Get(r.size)
			for {
				r.n, r.err = syscall.Read(int(fd), *r.buf)
				if r.err != syscall.EINTR {
					break
				}
			}
			if r.err != nil {
				r.pool.Put(r.buf)
				r.buf, r.n = nil, 0
				// Not readable after all: wait again.
				return r.err != syscall.EAGAIN && r.err != syscall.EWOULDBLOCK
			}
			return true
		}
	}
	r.size, r.pool = size, pool
	err := c.raw.Read(r.doRead)
	buf, n, rerr := r.buf, r.n, r.err
	r.buf, r.pool, r.err = nil, nil, nil
	switch {
	case err != nil: // closed, or past the deadline
		if buf != nil {
			pool.Put(buf)
		}
		return nil, 0, err
	case rerr != nil:
		return nil, 0, os.NewSyscallError("read", rerr)
	case n == 0: // the peer closed its side
		return buf, 0, io.EOF
	}
	return buf, n, nil
}
