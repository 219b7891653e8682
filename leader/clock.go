package leader

import (
	"sync"
	"time"
)

// Source is what the leader's clock reads. Wall may jump (NTP steps, an
// operator's date command); Monotonic never does. Tests inject their own.
type Source interface {
	// Wall is the wall clock in Unix nanoseconds.
	Wall() int64
	// Monotonic is a clock that only moves forward at a steady rate,
	// from an arbitrary origin.
	Monotonic() time.Duration
}

// SystemSource reads the machine's clocks.
func SystemSource() Source { return systemSource{t0: time.Now()} }

type systemSource struct{ t0 time.Time }

func (systemSource) Wall() int64                { return time.Now().UnixNano() }
func (s systemSource) Monotonic() time.Duration { return time.Since(s.t0) }

// Clock stamps the leader's `now` into every command (the FSM never reads
// a clock). Within a term it advances at the monotonic rate from the wall
// time read when the term started, so a jump of the wall clock during the
// term changes nothing: a forward jump does not reap leases early, a
// backward one does not freeze time. A new term starts from the wall clock
// again (so a jump, or a skewed node, influences at most the terms it
// leads), but never below the greatest `now` already applied: time never
// goes backwards in the replicated state.
type Clock struct {
	src Source

	mu       sync.Mutex
	inTerm   bool
	baseWall int64
	baseMono time.Duration
	last     int64
}

// NewClock returns a clock reading src (nil: SystemSource).
func NewClock(src Source) *Clock {
	if src == nil {
		src = SystemSource()
	}
	return &Clock{src: src}
}

// StartTerm anchors the clock at the start of a term, once the term's
// barrier has applied everything earlier: from max(wall, applied, the
// last `now` this clock returned).
func (c *Clock) StartTerm(applied int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	w := c.src.Wall()
	if w < applied {
		w = applied
	}
	if w < c.last {
		// Reads of this node's earlier terms saw `now` up to last (those
		// are not in the applied state): never answer earlier than them.
		w = c.last
	}
	c.inTerm, c.baseWall, c.baseMono, c.last = true, w, c.src.Monotonic(), w
}

// EndTerm drops the anchor; until the next StartTerm, Now reads the wall
// clock (never below what it returned before).
func (c *Clock) EndTerm() {
	c.mu.Lock()
	c.inTerm = false
	c.mu.Unlock()
}

// Now is the leader's current time in Unix nanoseconds; it never
// decreases.
func (c *Clock) Now() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	var t int64
	if c.inTerm {
		t = c.baseWall + int64(c.src.Monotonic()-c.baseMono)
	} else {
		t = c.src.Wall()
	}
	if t < c.last {
		t = c.last
	}
	c.last = t
	return t
}
