package leader

import (
	"testing"
	"time"
)

// fakeSource is a clock the test moves: wall may jump, mono only advances.
type fakeSource struct {
	wall int64
	mono time.Duration
}

func (f *fakeSource) Wall() int64              { return f.wall }
func (f *fakeSource) Monotonic() time.Duration { return f.mono }
func (f *fakeSource) advance(d time.Duration)  { f.wall += int64(d); f.mono += d }

const t0 = int64(1_700_000_000_000_000_000)

func TestClockIgnoresWallJumpsWithinATerm(t *testing.T) {
	src := &fakeSource{wall: t0, mono: 5 * time.Second}
	c := NewClock(src)
	c.StartTerm(t0 - int64(time.Second))
	if got := c.Now(); got != t0 {
		t.Fatalf("term starts at the wall clock: %d, want %d", got, t0)
	}
	src.advance(time.Second)
	src.wall += int64(time.Hour) // a forward jump
	if got, want := c.Now(), t0+int64(time.Second); got != want {
		t.Fatalf("after a forward jump: now advanced %v, want 1s", time.Duration(got-t0))
	}
	src.advance(time.Second)
	src.wall -= 3 * int64(time.Hour) // a backward jump
	if got, want := c.Now(), t0+int64(2*time.Second); got != want {
		t.Fatalf("after a backward jump: now advanced %v, want 2s (time must not freeze)", time.Duration(got-t0))
	}
}

func TestClockNewTermFromWallNeverBelowApplied(t *testing.T) {
	src := &fakeSource{wall: t0, mono: time.Second}
	c := NewClock(src)
	// The previous leader's clock ran an hour ahead: applied now is t0+1h.
	applied := t0 + int64(time.Hour)
	c.StartTerm(applied)
	if got := c.Now(); got != applied {
		t.Fatalf("a new term starts never below the applied now: %d, want %d", got, applied)
	}
	src.advance(time.Second)
	if got := c.Now(); got != applied+int64(time.Second) {
		t.Fatalf("then advances at the monotonic rate: %v", time.Duration(got-applied))
	}
	// A later term on a node whose clock is right again starts from its
	// wall clock: the jump does not persist beyond the applied now.
	c.EndTerm()
	src.wall = applied + int64(10*time.Second)
	c.StartTerm(applied + int64(time.Second))
	if got := c.Now(); got != src.wall {
		t.Fatalf("new term from the wall clock: %d, want %d", got, src.wall)
	}
}

func TestClockNeverDecreases(t *testing.T) {
	src := &fakeSource{wall: t0, mono: time.Second}
	c := NewClock(src)
	last := c.Now()
	for i := 0; i < 100; i++ {
		switch i % 4 {
		case 0:
			src.wall -= int64(time.Minute)
		case 1:
			c.StartTerm(0)
		case 2:
			c.EndTerm()
		}
		src.advance(time.Millisecond)
		if n := c.Now(); n < last {
			t.Fatalf("step %d: now went from %d back to %d", i, last, n)
		} else {
			last = n
		}
	}
}
