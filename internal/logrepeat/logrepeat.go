// Package logrepeat keeps a node's log readable while something keeps
// failing: a warning or an error with the same logger name and message
// (a peer that is down: "failed to heartbeat", several times a second) is
// written the first Burst times in a window, then counted, and the next
// one after the window says how many were left out:
//
//	[ERROR] grackle.raft: failed to heartbeat to: peer=... repeated=250 in_last=60s
//
// Messages below Warn, and the first ones of every kind, pass untouched.
package logrepeat

import (
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
)

// Defaults of New.
const (
	DefaultWindow = time.Minute
	DefaultBurst  = 3
)

// counts is shared by a logger and every logger derived from it.
type counts struct {
	mu     sync.Mutex
	window time.Duration
	burst  int
	now    func() time.Time
	seen   map[key]*seen
}

type key struct {
	name, msg string
	level     hclog.Level
}

type seen struct {
	start      time.Time // of the current window
	written    int       // in the current window
	suppressed int       // in the current window, beyond burst
}

// decide reports whether a message is written, and how many of its kind
// were left out in the window that ended (0: none, or the window goes on).
func (c *counts) decide(k key) (write bool, left int, in time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	s := c.seen[k]
	if s == nil {
		if len(c.seen) > 10_000 {
			c.sweep(now)
		}
		s = &seen{start: now}
		c.seen[k] = s
	}
	if now.Sub(s.start) >= c.window {
		left, in = s.suppressed, now.Sub(s.start).Round(time.Second)
		*s = seen{start: now}
	}
	if s.written < c.burst {
		s.written++
		return true, left, in
	}
	s.suppressed++
	return false, 0, 0
}

// sweep drops kinds whose window ended with nothing left out.
func (c *counts) sweep(now time.Time) {
	for k, s := range c.seen {
		if now.Sub(s.start) >= c.window && s.suppressed == 0 {
			delete(c.seen, k)
		}
	}
}

// Logger wraps an hclog.Logger.
type Logger struct {
	hclog.Logger
	c *counts
}

// New wraps l with the default window and burst.
func New(l hclog.Logger) *Logger {
	return NewWith(l, DefaultWindow, DefaultBurst, time.Now)
}

// NewWith wraps l: at most burst messages of a kind per window.
func NewWith(l hclog.Logger, window time.Duration, burst int, now func() time.Time) *Logger {
	return &Logger{Logger: l, c: &counts{window: window, burst: burst, now: now, seen: map[key]*seen{}}}
}

func (l *Logger) derive(n hclog.Logger) hclog.Logger { return &Logger{Logger: n, c: l.c} }

// Log writes msg unless it repeats past the burst.
func (l *Logger) Log(level hclog.Level, msg string, args ...any) {
	if level < hclog.Warn {
		l.Logger.Log(level, msg, args...)
		return
	}
	write, left, in := l.c.decide(key{name: l.Logger.Name(), msg: msg, level: level})
	if !write {
		return
	}
	if left > 0 {
		args = append(args[:len(args):len(args)], "repeated", left, "in_last", in.String())
	}
	l.Logger.Log(level, msg, args...)
}

func (l *Logger) Warn(msg string, args ...any)  { l.Log(hclog.Warn, msg, args...) }
func (l *Logger) Error(msg string, args ...any) { l.Log(hclog.Error, msg, args...) }

func (l *Logger) With(args ...any) hclog.Logger       { return l.derive(l.Logger.With(args...)) }
func (l *Logger) Named(name string) hclog.Logger      { return l.derive(l.Logger.Named(name)) }
func (l *Logger) ResetNamed(name string) hclog.Logger { return l.derive(l.Logger.ResetNamed(name)) }
