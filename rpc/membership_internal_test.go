package rpc

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// A leader transfers only once its term is MinTransferInterval old, and
// the refusal names the interval and the time of the next transfer.
func TestTransferAllowed(t *testing.T) {
	began := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	err := transferAllowed(began, began.Add(500*time.Millisecond))
	if status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("0.5 s into the term: %v", err)
	}
	msg := status.Convert(err).Message()
	for _, w := range []string{"one per 2s", "elected 500ms ago", "2026-01-02T03:04:07Z", "in 1.5s"} {
		if !strings.Contains(msg, w) {
			t.Fatalf("%q does not say %q", msg, w)
		}
	}
	if err := transferAllowed(began, began.Add(MinTransferInterval)); err != nil {
		t.Fatalf("at the interval: %v", err)
	}
}

// Through one node: one transfer at a time, at most one per interval.
func TestTransferGate(t *testing.T) {
	var g transferGate
	now := time.Now()
	done, err := g.begin(now)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.begin(now); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("a second transfer while one runs: %v", err)
	}
	done()
	if _, err := g.begin(time.Now()); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("a transfer right after the last: %v", err)
	}
	if _, err := g.begin(time.Now().Add(MinTransferInterval + time.Second)); err != nil {
		t.Fatalf("a transfer after the interval: %v", err)
	}
}
