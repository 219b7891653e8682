package logrepeat

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
)

func TestRepeatsAreCounted(t *testing.T) {
	var out bytes.Buffer
	now := time.Unix(1_700_000_000, 0)
	base := hclog.New(&hclog.LoggerOptions{Name: "grackle", Output: &out, DisableTime: true, Level: hclog.Info})
	log := NewWith(base, time.Minute, 3, func() time.Time { return now }).Named("raft")
	for i := 0; i < 250; i++ {
		log.Error("failed to heartbeat to", "peer", "n2", "error", "connection refused")
		log.Info("an info line", "i", i) // never held back
	}
	log.Warn("another message") // its own kind
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	count := func(sub string) (n int) {
		for _, l := range lines {
			if strings.Contains(l, sub) {
				n++
			}
		}
		return n
	}
	if n := count("failed to heartbeat"); n != 3 {
		t.Fatalf("%d heartbeat lines in the window, want 3:\n%s", n, out.String())
	}
	if n := count("an info line"); n != 250 {
		t.Fatalf("%d info lines, want all 250", n)
	}
	if n := count("another message"); n != 1 {
		t.Fatalf("%d lines of another message, want 1", n)
	}
	// After the window: the next one is written with the count left out.
	now = now.Add(61 * time.Second)
	out.Reset()
	log.Error("failed to heartbeat to", "peer", "n2", "error", "connection refused")
	if got := out.String(); !strings.Contains(got, "repeated=247") || !strings.Contains(got, "in_last=1m1s") || !strings.Contains(got, "[ERROR] grackle.raft: failed to heartbeat to") {
		t.Fatalf("first line after the window: %q", got)
	}
	// A logger derived with With shares the counts.
	out.Reset()
	derived := log.With("k", "v")
	for i := 0; i < 5; i++ {
		derived.Error("failed to heartbeat to")
	}
	if n := strings.Count(out.String(), "failed to heartbeat"); n != 2 {
		t.Fatalf("%d lines from a derived logger, want the 2 left of the burst:\n%s", n, out.String())
	}
}
