package leader

import (
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/grackle-coord/grackle/fsm"
	fsmpb "github.com/grackle-coord/grackle/proto/grackle/fsm/v1"
)

// A follower measures its wall clock against the leader's stamped now of
// each newly applied entry, and not on the leader.
func TestSkewMonitorMeasuresAppliedNow(t *testing.T) {
	f := fsm.New(fsm.Options{TempDir: t.TempDir()})
	src := &fakeSource{wall: t0}
	leading := false
	m := newSkewMonitor(f, src, 2*time.Second, func() bool { return leading }, hclog.NewNullLogger())
	apply := func(index uint64, now int64) {
		cmd := &fsmpb.Command{Now: now, Op: &fsmpb.Command_CreateNamespace{CreateNamespace: &fsmpb.CreateNamespace{Name: "n" + string(rune('a'+index))}}}
		if res := f.ApplyCommand(index, cmd); res.Err != nil {
			t.Fatal(res.Err)
		}
	}
	m.sample()
	if !m.Last().At.IsZero() {
		t.Fatal("a measurement before anything applied")
	}
	apply(1, t0-int64(1500*time.Millisecond)) // the leader is 1.5 s behind us
	m.sample()
	if got := m.Last(); got.Offset != 1500*time.Millisecond || got.At.IsZero() {
		t.Fatalf("skew %+v, want +1.5s", got)
	}
	if m.warned {
		t.Fatal("one sample warned (it may be one delayed commit)")
	}
	apply(2, t0-int64(1600*time.Millisecond))
	m.sample()
	apply(3, t0-int64(1550*time.Millisecond))
	m.sample()
	if got := m.Last().Offset; got != 1500*time.Millisecond {
		t.Fatalf("skew %v, want the smallest sample, +1.5s", got)
	}
	if !m.warned {
		t.Fatal("a skew above half the lease grace is not warned about")
	}
	apply(4, t0+int64(100*time.Millisecond))
	m.sample()
	if got := m.Last().Offset; got != -100*time.Millisecond || m.warned {
		t.Fatalf("skew %v (warned %v), want -100ms and no warning", got, m.warned)
	}
	leading = true
	apply(5, t0)
	m.sample()
	if !m.Last().At.IsZero() {
		t.Fatal("the leader measures its own clock")
	}
}

// On a loaded cluster single samples carry the commit latency (the
// stamped now is older than the apply by it); the reported skew is the
// smallest recent sample, so a correct clock is not reported far off
// and not warned about.
func TestSkewMonitorFiltersDelayedSamples(t *testing.T) {
	f := fsm.New(fsm.Options{TempDir: t.TempDir()})
	src := &fakeSource{wall: t0}
	m := newSkewMonitor(f, src, 600*time.Millisecond, func() bool { return false }, hclog.NewNullLogger())
	delays := []time.Duration{700, 650, 5, 720, 680, 690} // ms from stamping to sampling
	for i, d := range delays {
		cmd := &fsmpb.Command{Now: t0 - int64(d*time.Millisecond), Op: &fsmpb.Command_CreateNamespace{CreateNamespace: &fsmpb.CreateNamespace{Name: "n" + string(rune('a'+i))}}}
		if res := f.ApplyCommand(uint64(i+1), cmd); res.Err != nil {
			t.Fatal(res.Err)
		}
		m.sample()
	}
	if got := m.Last().Offset; got != 5*time.Millisecond {
		t.Fatalf("skew %v, want the least delayed sample, 5ms", got)
	}
	if m.warned {
		t.Fatal("delayed samples of a correct clock were warned about")
	}
}
