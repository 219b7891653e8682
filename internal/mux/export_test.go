package mux

import "time"

// HasStream reports whether c has an open stream (for tests that wait
// for one to end).
func (c *Conn) HasStream() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cur != nil
}

// Extras is the number of extra workers running (see dispatch).
func (s *Server) Extras() int64 { return s.extras.Load() }

// Waiting is the number of workers (long-lived and extra) waiting for a
// call.
func (s *Server) Waiting() int64 { return s.waiting.Load() }

// Workers is the number of long-lived workers a Server starts.
const Workers = workers

// SetExtraIdle sets how long extra workers wait for a call, and how many
// may stay to wait, until the returned restore.
func SetExtraIdle(d time.Duration, most int64) (restore func()) {
	oldIdle, oldMost := extraIdle.Swap(int64(d)), maxExtras.Swap(most)
	return func() { extraIdle.Store(oldIdle); maxExtras.Store(oldMost) }
}

// Queued is the number of calls waiting in the outbox of c's open stream
// for a writer (0 without a stream).
func (c *Conn) Queued() int {
	c.mu.Lock()
	cur := c.cur
	c.mu.Unlock()
	if cur == nil {
		return 0
	}
	cur.out.mu.Lock()
	defer cur.out.mu.Unlock()
	return len(cur.out.queue)
}
