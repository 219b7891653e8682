package mux

import (
	"testing"
	"time"
)

// A bounded outbox holds back whoever puts past its bound while the
// writer is busy, until the writer takes the queue; what was put is
// written once, in order.
func TestOutboxBoundHoldsPutsBack(t *testing.T) {
	writing := make(chan []int, 16)
	proceed := make(chan struct{})
	var o *outbox[int]
	o = newOutbox(func(b []int) {
		writing <- append([]int(nil), b...)
		<-proceed
	}, 2)
	go o.put(0) // becomes the writer, held in write
	if b := <-writing; len(b) != 1 || b[0] != 0 {
		t.Fatalf("first batch %v, want [0]", b)
	}
	o.put(1) // queued: the writer is busy
	o.put(2)
	third := make(chan struct{})
	go func() { o.put(3); close(third) }()
	select {
	case <-third:
		t.Fatal("a put past the bound returned while the writer was busy")
	case <-time.After(50 * time.Millisecond):
	}
	proceed <- struct{}{} // the writer takes [1 2]; 3 may queue
	if b := <-writing; len(b) != 2 || b[0] != 1 || b[1] != 2 {
		t.Fatalf("second batch %v, want [1 2]", b)
	}
	<-third
	proceed <- struct{}{}
	if b := <-writing; len(b) != 1 || b[0] != 3 {
		t.Fatalf("third batch %v, want [3]", b)
	}
	proceed <- struct{}{}
}
