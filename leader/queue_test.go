package leader

import (
	"testing"
	"time"

	"github.com/grackle-coord/grackle/fsm"
	fsmpb "github.com/grackle-coord/grackle/proto/grackle/fsm/v1"
)

type fakeView struct{ permits, holds int64 }

func (v *fakeView) SemaphoreCapacity(string, string) (int64, int64, bool) {
	return v.permits, v.holds, true
}
func (v *fakeView) HeldWeight(string, string, string) int64 { return 0 }

func testQueues(v view) (*queues, *[][]*waiter) {
	q := newQueues(100, v, nopObserver{})
	var proposed [][]*waiter
	q.proposeGrants = func(_ *fsmpb.Command, ws []*waiter) bool {
		proposed = append(proposed, ws)
		return true
	}
	return q, &proposed
}

var key = fsm.SemKey{Namespace: "ns", Semaphore: "s"}

func state(q *queues, w *waiter) State {
	q.mu.Lock()
	defer q.mu.Unlock()
	return w.state
}

// A call is behind only waiters the leader decided must wait: acquires in
// flight (Proposed) put nobody behind them; a Waiting one does.
func TestQueueBehindOnlyDecidedWaiters(t *testing.T) {
	v := &fakeView{permits: 3, holds: 3}
	q, proposed := testQueues(v)
	a, b := newWaiter(key, "a", 2, nil, time.Minute, 0), newWaiter(key, "b", 1, nil, time.Minute, 0)
	for _, w := range []*waiter{a, b} {
		if behind, err := q.enqueue(w); err != nil || behind {
			t.Fatalf("%s behind in-flight acquires: %v %v", w.leaseID, behind, err)
		}
	}
	q.acquired(a, &fsm.Result{}, nil, false) // not granted: a waits
	if state(q, a) != Waiting {
		t.Fatalf("a is %v", state(q, a))
	}
	c := newWaiter(key, "c", 1, nil, 0, 0)
	if behind, _ := q.enqueue(c); !behind || state(q, c) != Queued {
		t.Fatal("a call arriving behind a waiter is not queued")
	}
	q.acquired(c, &fsm.Result{}, nil, true) // a non-blocking try behind a waiter
	if o := <-c.done; o.Granted || o.Err != nil || state(q, c) != Done {
		t.Fatalf("try-acquire behind a waiter: %+v", o)
	}

	// b's own Acquire is granted: it was not behind a.
	q.acquired(b, &fsm.Result{Acquired: true}, nil, false)
	if o := <-b.done; !o.Granted {
		t.Fatalf("b: %+v", o)
	}

	// Head-of-line: a (weight 2) blocks d (weight 1) although d would fit.
	d := newWaiter(key, "d", 1, nil, time.Minute, 0)
	q.enqueue(d)
	q.acquired(d, &fsm.Result{}, nil, false)
	v.holds = 2 // one permit free: d would fit, a does not
	q.mu.Lock()
	q.pumpLocked(key)
	q.mu.Unlock()
	if len(*proposed) != 0 {
		t.Fatalf("head-of-line broken: granted %v", (*proposed)[0][0].leaseID)
	}
	v.holds = 0
	q.mu.Lock()
	q.pumpLocked(key)
	q.mu.Unlock()
	if len(*proposed) != 1 || len((*proposed)[0]) != 2 || (*proposed)[0][0] != a || (*proposed)[0][1] != d {
		t.Fatalf("FIFO grants: %v", *proposed)
	}
	if state(q, a) != Granting || state(q, d) != Granting {
		t.Fatal("collected waiters are not Granting")
	}
	// d's caller gives up while its grant is in Raft: it waits for the
	// outcome, which here is a grant.
	q.stop(d)
	q.settle((*proposed)[0], &fsm.Result{Grants: []fsm.GrantResult{{Granted: true}, {Granted: true}}})
	if o := <-a.done; !o.Granted {
		t.Fatalf("a: %+v", o)
	}
	if o := <-d.done; !o.Granted {
		t.Fatalf("abandoned d must get its grant's outcome: %+v", o)
	}
	if n := len(q.snapshot(key)); n != 0 {
		t.Fatalf("%d calls left in the queue", n)
	}
}
