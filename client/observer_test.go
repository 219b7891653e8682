package client_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/grackle-coord/grackle/client"
	"github.com/grackle-coord/grackle/server/servertest"
)

// recorder keeps every event as a line: "start s 2", "rejected s unavailable", "stop s rejected".
type recorder struct {
	mu     sync.Mutex
	lines  []string
	starts map[uint64]int
	stops  map[uint64]int
}

func (r *recorder) add(line string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lines = append(r.lines, line)
}

func (r *recorder) AcquireStart(e client.AcquireStartEvent) {
	r.mu.Lock()
	r.starts[e.ID]++
	r.mu.Unlock()
	r.add(fmt.Sprintf("start %s %d", e.Semaphore, e.Weight))
}

func (r *recorder) AcquireRejected(e client.AcquireRejectedEvent) {
	r.add(fmt.Sprintf("rejected %s %s", e.Semaphore, e.Reason))
}

func (r *recorder) AcquireStop(e client.AcquireStopEvent) {
	r.mu.Lock()
	if r.starts[e.ID] != 1 {
		r.lines = append(r.lines, fmt.Sprintf("stop %d without its start", e.ID))
	}
	r.stops[e.ID]++
	r.mu.Unlock()
	if e.Duration < 0 || (e.Result == client.ResultAcquired) != (e.FencingToken != 0) || (e.Err == nil) != (e.Result == client.ResultAcquired) {
		r.add(fmt.Sprintf("bad stop %+v", e))
	}
	r.add(fmt.Sprintf("stop %s %s", e.Semaphore, e.Result))
}

// take returns the lines so far and forgets them.
func (r *recorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	l := r.lines
	r.lines = nil
	return l
}

func TestObserverEventsPerAcquire(t *testing.T) {
	c := servertest.Start(t, 1, nil)
	rec := &recorder{starts: map[uint64]int{}, stops: map[uint64]int{}}
	cli, err := client.New(ctxT(t), client.Config{Endpoints: addrs(c), Observer: rec})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	setup(t, cli, "obs", "s", 2)
	a := newSession(t, cli, "obs", "a", 30*time.Second)
	b := newSession(t, cli, "obs", "b", 30*time.Second)
	ctx := ctxT(t)
	check := func(what string, want ...string) {
		t.Helper()
		got := rec.take()
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("%s: events %q, want %q", what, got, want)
		}
	}

	if _, err := a.Semaphore("s").Acquire(ctx, 2); err != nil {
		t.Fatal(err)
	}
	check("granted", "start s 2", "stop s acquired")

	if _, err := b.Semaphore("s").TryAcquire(ctx, 1); !errors.Is(err, client.ErrWouldBlock) {
		t.Fatal(err)
	}
	check("try on a full semaphore", "start s 1", "rejected s unavailable", "stop s rejected")

	if _, err := b.Semaphore("s").Acquire(ctx, 3); !errors.Is(err, client.ErrWeightExceedsPermits) {
		t.Fatal(err)
	}
	check("weight over permits", "start s 3", "rejected s weight_exceeds_permits", "stop s error")

	tctx, cancel := context.WithTimeout(ctx, 1500*time.Millisecond)
	_, err = b.Semaphore("s").Acquire(tctx, 1)
	cancel()
	if !errors.Is(err, client.ErrTimeout) {
		t.Fatal(err)
	}
	check("blocking acquire that times out (waits: no rejected)", "start s 1", "stop s timed_out")

	if _, err := b.Semaphore("nope").Acquire(ctx, 1); err == nil {
		t.Fatal("acquire of a missing semaphore succeeded")
	}
	check("missing semaphore", "start nope 1", "stop nope error")

	// WithPermits goes through Acquire: one start, one stop.
	if err := a.Semaphore("s").Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := client.WithPermits(ctx, b.Semaphore("s"), 1, func(context.Context, *client.Grant) error { return nil }); err != nil {
		t.Fatal(err)
	}
	check("WithPermits", "start s 1", "stop s acquired")

	rec.mu.Lock()
	defer rec.mu.Unlock()
	for id, n := range rec.starts {
		if n != 1 || rec.stops[id] != 1 {
			t.Errorf("acquire %d: %d starts, %d stops", id, n, rec.stops[id])
		}
	}
}
