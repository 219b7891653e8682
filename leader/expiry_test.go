package leader

import (
	"math"
	"sync"
	"testing"
	"time"

	fsmpb "github.com/grackle-coord/grackle/proto/grackle/fsm/v1"
)

// expiryEvents records the expiry loop's reaping commands.
type expiryEvents struct {
	nopObserver
	mu sync.Mutex
	n  int
}

func (e *expiryEvents) ExpiryEvent(ev ExpiryEvent) {
	if ev.Err == nil {
		e.mu.Lock()
		e.n++
		e.mu.Unlock()
	}
}

func (e *expiryEvents) count() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.n
}

// The expiry loop sleeps until the earliest expiry it knows of. A write
// that makes an earlier one (a new, shorter lease) must wake it; the loop
// here would otherwise not look again for an hour.
func TestExpiryLoopWokenByAnEarlierLease(t *testing.T) {
	r, f := newRaft(t)
	events := &expiryEvents{}
	l := New(Config{NodeID: "n1", GRPCAddress: "127.0.0.1:1", Observer: events}, r, f)
	l.expiryMaxSleep = time.Hour
	l.Start(make(chan bool))
	defer l.Stop()
	term := readyTerm(t, l)
	long := seedSem(t, term, 1, 1)[0] // one lease of 300 s
	eventually(t, "the loop armed for the 300 s lease", func() bool {
		next, ok := f.NextExpiry()
		return ok && term.lookAt.Load() == next
	})

	mustWrite(t, term, &fsmpb.Command{Op: &fsmpb.Command_CreateLease{CreateLease: &fsmpb.CreateLease{
		NamespaceName: "ns", LeaseId: NewLeaseID(), ProcessId: "short", TtlSeconds: 1}}})
	eventually(t, "the 1 s lease reaped", func() bool { return events.count() > 0 })
	if _, err := f.GetSemaphoreLease("ns", long, l.clock.Now()); err != nil {
		t.Fatalf("the 300 s lease after the short one expired: %v", err)
	}
}

// Writes that leave the earliest expiry where it is do not wake the loop;
// an earlier one, or any lease while the loop is deciding, does.
func TestExpiryLooksTooLate(t *testing.T) {
	term := &Term{}
	term.lookAt.Store(math.MaxInt64) // deciding
	if !term.expiryLooksTooLate(1000) {
		t.Fatal("a lease while the loop decides: the loop not woken")
	}
	term.lookAt.Store(1000)
	for next, want := range map[int64]bool{999: true, 1000: false, 5000: false} {
		if got := term.expiryLooksTooLate(next); got != want {
			t.Errorf("a lease expiring at %d with the loop looking at 1000: too late %v, want %v", next, got, want)
		}
	}
}
