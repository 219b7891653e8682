// Package statusline draws one status line on a terminal: rewritten in
// place while something runs (a blocking acquire: how long it has waited,
// how much wait is left) and erased when it ends, so that the command's
// real output starts on a clean line. On anything but a terminal, or when
// the user asked for quiet, it draws nothing at all: scripts and logs never
// see it.
//
// Line is the drawing; Waiting is the text of a wait, with room for more
// parts (a queue position) through Waiting.Extra.
package statusline

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/mattn/go-isatty"
)

// Line is one status line on w. The zero value and a nil *Line draw
// nothing. Safe for concurrent use.
type Line struct {
	mu    sync.Mutex
	w     io.Writer
	drawn bool
}

// New returns a line that draws on w when enabled, else nothing.
func New(w io.Writer, enabled bool) *Line {
	if !enabled {
		return &Line{}
	}
	return &Line{w: w}
}

// IsTerminal reports whether w is a terminal.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	return isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd())
}

// ForTerminal returns a line on w that draws only when w is a terminal and
// quiet is false.
func ForTerminal(w io.Writer, quiet bool) *Line {
	return New(w, !quiet && IsTerminal(w))
}

// Enabled reports whether the line draws anything.
func (l *Line) Enabled() bool { return l != nil && l.w != nil }

// clearSeq returns to the start of the line and erases it.
const clearSeq = "\r\x1b[2K"

// Set replaces the line's text (kept to one line).
func (l *Line) Set(text string) {
	if !l.Enabled() {
		return
	}
	text = strings.Map(func(r rune) rune {
		if r == '\n' || r == '\r' {
			return ' '
		}
		return r
	}, text)
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprint(l.w, clearSeq+text)
	l.drawn = true
}

// Clear erases the line (if it was drawn).
func (l *Line) Clear() {
	if !l.Enabled() {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.drawn {
		fmt.Fprint(l.w, clearSeq)
		l.drawn = false
	}
}

// Show redraws the line with render() every interval, starting after
// delay (so that what ends at once never flickers), until the returned stop
// is called; stop erases the line and waits for the redrawing to end.
func (l *Line) Show(delay, interval time.Duration, render func() string) (stop func()) {
	if !l.Enabled() {
		return func() {}
	}
	quit := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTimer(delay)
		defer t.Stop()
		select {
		case <-quit:
			return
		case <-t.C:
		}
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			l.Set(render())
			select {
			case <-quit:
				return
			case <-tick.C:
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			close(quit)
			<-done
			l.Clear()
		})
	}
}

// Waiting is the status of a wait: "waiting for WHAT: 12s so far, 48s
// left". Extra, when set, adds parts (", 3rd in the queue").
type Waiting struct {
	What     string    // "3 permits of third_parties/partner_1"
	Since    time.Time // when the wait began
	Deadline time.Time // when it gives up (zero: no limit)
	Extra    func() string
}

// Text renders w at now.
func (w Waiting) Text(now time.Time) string {
	var b strings.Builder
	fmt.Fprintf(&b, "waiting for %s: %s so far", w.What, short(now.Sub(w.Since)))
	if !w.Deadline.IsZero() {
		left := w.Deadline.Sub(now)
		if left < 0 {
			left = 0
		}
		fmt.Fprintf(&b, ", %s left", short(left))
	}
	if w.Extra != nil {
		if e := w.Extra(); e != "" {
			b.WriteString(", " + e)
		}
	}
	return b.String()
}

// short is a duration in whole seconds (minutes past 100 s): 0s, 42s, 3m05s.
func short(d time.Duration) string {
	s := int64(d / time.Second)
	if s < 100 {
		return fmt.Sprintf("%ds", s)
	}
	return fmt.Sprintf("%dm%02ds", s/60, s%60)
}
