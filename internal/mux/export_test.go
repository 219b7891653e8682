package mux

// HasStream reports whether c has an open stream (for tests that wait
// for one to end).
func (c *Conn) HasStream() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cur != nil
}
