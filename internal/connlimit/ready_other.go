//go:build !unix

package connlimit

import "google.golang.org/grpc/mem"

// readRaw is a blocking read where no raw non-blocking read is done.
func (c *conn) readRaw(size int, pool mem.BufferPool) (*[]byte, int, error) {
	buf := pool.Get(size)
	n, err := c.Conn.Read(*buf)
	return buf, n, err
}
