package client

import (
	"context"
	"testing"
	"time"

	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
)

// A watch whose loop has already ended (in closed, one update not yet
// delivered) and whose context then ends closes its channel: the reader
// that stopped reading is not left with a goroutine blocked for ever.
func TestDeliverLatestEndsAfterInClosedAndContextDone(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	in := make(chan WatchUpdate, 1)
	out := make(chan WatchUpdate)
	done := make(chan struct{})
	go func() { deliverLatest(ctx, in, out); close(done) }()
	in <- WatchUpdate{State: &pb.WatchSemaphoreResponse{RaftIndex: 1}}
	close(in)
	// Nobody reads out; the update stays pending. Let deliverLatest see
	// the close first (it then waits only on out and ctx), then cancel.
	deadline := time.Now().Add(10 * time.Second)
	for len(in) > 0 {
		if time.Now().After(deadline) {
			t.Fatal("deliverLatest did not take the update")
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("deliverLatest did not return after its context ended with in closed")
	}
}
