package leader

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Reads that arrive while a round runs share the next round, and no read
// is answered by a round that began before it arrived.
func TestReadsShareARoundThatBeganAfterThem(t *testing.T) {
	var rounds atomic.Int64
	started := make(chan struct{}, 10)
	release := make(chan error)
	b := newReadBatcher(func() error {
		rounds.Add(1)
		started <- struct{}{}
		return <-release
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	first := make(chan error, 1)
	go func() { first <- b.Confirm(ctx) }()
	<-started // round 1 runs, for the first read only
	var wg sync.WaitGroup
	var answered atomic.Int64
	errs := make(chan error, 50)
	for i := 0; i < 50; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := b.Confirm(ctx)
			answered.Add(1)
			errs <- err
		}()
	}
	waitWaiting(t, b, 50)
	release <- nil // round 1 ends: it must not answer the 50
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	<-started // round 2: all 50 at once
	if n := answered.Load(); n != 0 {
		t.Fatalf("%d reads answered by a round that began before they arrived", n)
	}
	fail := errors.New("not leader")
	release <- fail
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != fail {
			t.Fatalf("got %v, want the round's error", err)
		}
	}
	if n := rounds.Load(); n != 2 {
		t.Fatalf("%d rounds for 51 reads, want 2", n)
	}
}

func waitWaiting(t *testing.T, b *readBatcher, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		b.mu.Lock()
		w := len(b.waiting)
		b.mu.Unlock()
		if w >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d reads waiting, want %d", w, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// A read whose caller gives up returns its context's error; the rounds go
// on for the others.
func TestReadsCallerGivesUp(t *testing.T) {
	release := make(chan struct{})
	b := newReadBatcher(func() error { <-release; return nil })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Confirm(ctx) }()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v", err)
	}
	close(release)
	if err := b.Confirm(context.Background()); err != nil {
		t.Fatal(err)
	}
}
