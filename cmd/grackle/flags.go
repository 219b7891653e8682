package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
)

// durationValue is every duration flag of grackle: a Go duration ("30s",
// "1m30s", "250ms") or a bare number, read as seconds ("60", "1.5"), so
// that scripts written for the older whole-second flags keep working.
type durationValue time.Duration

func (d *durationValue) Set(s string) error {
	v, err := parseDuration(s)
	if err != nil {
		return err
	}
	*d = durationValue(v)
	return nil
}

func (d *durationValue) Type() string   { return "duration" }
func (d *durationValue) String() string { return time.Duration(*d).String() }

// parseDuration reads a Go duration or a number of seconds.
func parseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		if f > float64(1<<62)/float64(time.Second) || f < -float64(1<<62)/float64(time.Second) {
			return 0, fmt.Errorf("%q: out of range", s)
		}
		return time.Duration(f * float64(time.Second)), nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%q: want a duration like 30s, 1m or 250ms (a bare number is seconds)", s)
	}
	return d, nil
}

// durationVar registers a duration flag (see durationValue).
func durationVar(fs *pflag.FlagSet, p *time.Duration, name string, def time.Duration, usage string) {
	*p = def
	fs.Var((*durationValue)(p), name, usage)
}

// wholeSeconds converts a duration flag to the API's whole seconds,
// rounding up (a wait or TTL is never shortened); the error names the flag.
func wholeSeconds(flag string, d time.Duration, min int64) (int64, error) {
	if d < 0 {
		return 0, usagef("%s: must not be negative, got %s", flag, d)
	}
	secs := int64((d + time.Second - 1) / time.Second)
	if secs < min {
		return 0, usagef("%s: must be at least %ds, got %s", flag, min, d)
	}
	return secs, nil
}
