package fsm

import (
	"context"
	"errors"
	"testing"

	fsmpb "github.com/grackle-coord/grackle/proto/grackle/fsm/v1"
)

// WaitApplied returns once the state reaches the index (at once when it
// already has), and with the context's error when that ends first.
func TestWaitApplied(t *testing.T) {
	h := newHarness(t)
	ns := func(name string) *fsmpb.Command {
		return &fsmpb.Command{Op: &fsmpb.Command_CreateNamespace{CreateNamespace: &fsmpb.CreateNamespace{Name: name}}}
	}
	h.apply(ns("a"))
	if err := h.f.WaitApplied(context.Background(), 1); err != nil {
		t.Fatalf("index 1 is applied: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- h.f.WaitApplied(context.Background(), 3) }()
	h.apply(ns("b")) // index 2: not yet
	select {
	case err := <-done:
		t.Fatalf("returned (%v) at index 2, waiting for 3", err)
	default:
	}
	h.apply(ns("c"))
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := h.f.GetNamespace("c"); err != nil {
		t.Fatalf("woken before the entry's state was visible: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { done <- h.f.WaitApplied(ctx, 99) }()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
}
