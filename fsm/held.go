package fsm

// HeldPermits is the sum of the permits held over every semaphore (the
// held_permits gauge). It walks the semaphores under the read lock: one
// pass per metrics scrape.
func (f *FSM) HeldPermits() int64 {
	s, done := f.read()
	defer done()
	var n int64
	s.semaphores.Scan(func(x semRec) bool {
		n += x.holds
		return true
	})
	return n
}
