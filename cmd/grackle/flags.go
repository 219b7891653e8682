package main

import (
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// durationValue is every duration flag of grackle: a Go duration ("30s",
// "1m30s", "250ms") or a bare number, read as seconds ("60", "1.5"), so
// that scripts written for the older whole-second flags keep working. It
// keeps the text given, so that an error names the value as typed.
type durationValue struct {
	p   *time.Duration
	raw string
}

func (d *durationValue) Set(s string) error {
	v, err := parseDuration(s)
	if err != nil {
		return err
	}
	*d.p, d.raw = v, s
	return nil
}

func (d *durationValue) Type() string   { return "duration" }
func (d *durationValue) String() string { return d.p.String() }

// parseDuration reads a Go duration or a number of seconds.
func parseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		if f > float64(1<<62)/float64(time.Second) || f < -float64(1<<62)/float64(time.Second) {
			return 0, errors.New("out of range")
		}
		return time.Duration(f * float64(time.Second)), nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, errors.New("want a duration like 30s, 1m or 250ms (a bare number is seconds)")
	}
	return d, nil
}

// durationVar registers a duration flag (see durationValue).
func durationVar(fs *pflag.FlagSet, p *time.Duration, name string, def time.Duration, usage string) {
	*p = def
	fs.Var(&durationValue{p: p}, name, usage)
}

// wholeSeconds converts the duration flag name of cmd to the API's whole
// seconds, rounding up (a wait or TTL is never shortened); the error names
// the flag and its value.
func wholeSeconds(cmd *cobra.Command, name string, d time.Duration, min int64) (int64, error) {
	if d < 0 {
		return 0, flagError(cmd, name, "must not be negative")
	}
	secs := int64((d + time.Second - 1) / time.Second)
	if secs < min {
		return 0, flagError(cmd, name, "must be at least %s", time.Duration(min)*time.Second)
	}
	return secs, nil
}
