package server

import (
	"math"
	"testing"
)

// --max-state-bytes: auto is half the memory limit in force, or 2 GiB
// without one; 0, negative numbers and off are no bound; sizes are read
// as --memory-limit reads them; anything else is refused naming the flag.
func TestResolveMaxStateBytes(t *testing.T) {
	for _, c := range []struct {
		spec     string
		memLimit int64
		want     int64
	}{
		{"", math.MaxInt64, 2 << 30},
		{"auto", math.MaxInt64, 2 << 30},
		{"AUTO", 1 << 30, 512 << 20},
		{"auto", 900 << 20, 450 << 20},
		{"off", 1 << 30, 0},
		{"0", 1 << 30, 0},
		{"-1", 1 << 30, 0},
		{"512MiB", math.MaxInt64, 512 << 20},
		{"1048576", 1 << 30, 1 << 20},
	} {
		got, err := resolveMaxStateBytes(c.spec, c.memLimit)
		if err != nil || got != c.want {
			t.Errorf("%q with a memory limit of %d: %d, %v; want %d", c.spec, c.memLimit, got, err, c.want)
		}
	}
	for _, bad := range []string{"lots", "1.5GiB", "10%", "GiB"} {
		if _, err := resolveMaxStateBytes(bad, math.MaxInt64); err == nil {
			t.Errorf("%q accepted", bad)
		} else if CheckMaxStateBytes(bad) == nil {
			t.Errorf("CheckMaxStateBytes(%q) accepted it", bad)
		}
	}
}
