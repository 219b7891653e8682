package rounds

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Callers that arrive while a round runs share the next round, and no
// caller is answered by a round that began before it arrived.
func TestCallersShareARoundThatBeganAfterThem(t *testing.T) {
	var n atomic.Int64
	started := make(chan int, 10) // each round's callers, as do is told
	release := make(chan error)
	g := New(func(callers int) (int64, error) {
		k := n.Add(1)
		started <- callers
		return k, <-release
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	first := make(chan error, 1)
	go func() {
		k, err := g.Do(ctx)
		if err == nil && k != 1 {
			err = errors.New("first caller not answered by round 1")
		}
		first <- err
	}()
	if c := <-started; c != 1 { // round 1 runs, for the first caller only
		t.Fatalf("round 1 told of %d callers, want 1", c)
	}
	var wg sync.WaitGroup
	var answered atomic.Int64
	type answer struct {
		k   int64
		err error
	}
	out := make(chan answer, 50)
	for i := 0; i < 50; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			k, err := g.Do(ctx)
			answered.Add(1)
			out <- answer{k, err}
		}()
	}
	waitCallers(t, g, 50)
	release <- nil // round 1 ends: it must not answer the 50
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if c := <-started; c != 50 { // round 2: all 50 at once
		t.Fatalf("round 2 told of %d callers, want 50", c)
	}
	if a := answered.Load(); a != 0 {
		t.Fatalf("%d callers answered by a round that began before they arrived", a)
	}
	fail := errors.New("not leader")
	release <- fail
	wg.Wait()
	close(out)
	for a := range out {
		if a.err != fail || a.k != 2 {
			t.Fatalf("got %d, %v; want round 2's answer and error", a.k, a.err)
		}
	}
	if k := n.Load(); k != 2 {
		t.Fatalf("%d rounds for 51 callers, want 2", k)
	}
}

func waitCallers(t *testing.T, g *Group[int64], n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		g.mu.Lock()
		w := 0
		if g.next != nil {
			w = g.next.callers
		}
		g.mu.Unlock()
		if w >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d callers waiting, want %d", w, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// A caller that gives up returns its context's error; the rounds go on
// for the others, and the group's goroutine ends once no one waits.
func TestCallerGivesUp(t *testing.T) {
	release := make(chan struct{})
	g := New(func(int) (struct{}, error) { <-release; return struct{}{}, nil })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { _, err := g.Do(ctx); done <- err }()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v", err)
	}
	close(release)
	if _, err := g.Do(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// Many concurrent callers, many rounds: every caller gets an answer of a
// round that began after it called (race detector; goleak at exit).
func TestManyCallers(t *testing.T) {
	var began atomic.Int64 // rounds begun
	g := New(func(int) (int64, error) { return began.Add(1), nil })
	var wg sync.WaitGroup
	for i := 0; i < 32; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 200; j++ {
				before := began.Load()
				k, err := g.Do(context.Background())
				if err != nil || k <= before {
					t.Errorf("answered by round %d, but %d had begun before the call (err %v)", k, before, err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// The cost of sharing one round per caller, with rounds as fast as the
// callers (make a round take longer and more callers share it).
func BenchmarkDo(b *testing.B) {
	g := New(func(int) (struct{}, error) { return struct{}{}, nil })
	ctx := context.Background()
	b.ReportAllocs()
	b.SetParallelism(16)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := g.Do(ctx); err != nil {
				b.Error(err)
			}
		}
	})
}
