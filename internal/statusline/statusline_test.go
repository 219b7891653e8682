package statusline

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/grackle-coord/grackle/internal/syncbuf"
)

func TestDisabledDrawsNothing(t *testing.T) {
	var buf bytes.Buffer
	for _, l := range []*Line{nil, {}, New(&buf, false), ForTerminal(&buf, false)} {
		l.Set("x")
		l.Show(0, time.Millisecond, func() string { return "y" })()
		l.Clear()
	}
	if buf.Len() != 0 {
		t.Fatalf("drew %q", buf.String())
	}
}

func TestShowDrawsThenErases(t *testing.T) {
	var buf syncbuf.Buffer
	l := New(&buf, true)
	drawn := make(chan struct{})
	var once sync.Once
	stop := l.Show(0, time.Millisecond, func() string {
		once.Do(func() { close(drawn) })
		return "waiting\nfor it"
	})
	<-drawn
	stop()
	stop() // idempotent
	out := buf.String()
	if !strings.HasPrefix(out, clearSeq+"waiting for it") || !strings.HasSuffix(out, clearSeq) {
		t.Fatalf("output %q", out)
	}
	n := len(buf.String())
	l.Clear() // nothing drawn any more: nothing written
	if len(buf.String()) != n {
		t.Fatal("Clear after stop wrote again")
	}
}

func TestWaitingText(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	w := Waiting{What: "3 permits of ns/s", Since: t0, Deadline: t0.Add(60 * time.Second)}
	if got := w.Text(t0.Add(12500 * time.Millisecond)); got != "waiting for 3 permits of ns/s: 12s so far, 47s left" {
		t.Errorf("got %q", got)
	}
	if got := w.Text(t0.Add(2 * time.Minute)); got != "waiting for 3 permits of ns/s: 2m00s so far, 0s left" {
		t.Errorf("got %q", got)
	}
	w.Deadline = time.Time{}
	w.Extra = func() string { return "3rd in the queue" }
	if got := w.Text(t0.Add(time.Second)); got != "waiting for 3 permits of ns/s: 1s so far, 3rd in the queue" {
		t.Errorf("got %q", got)
	}
}
