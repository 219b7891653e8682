package leader

import (
	"strings"
	"testing"

	"github.com/grackle-coord/grackle/fsm"
)

// TestNewLeaseID: the format the state machine validates, and every base62
// character drawn about equally often (a modulo bias would favour the
// first 8 characters by about 1/31).
func TestNewLeaseID(t *testing.T) {
	var counts [62]int
	const ids = 20000
	seen := map[string]bool{}
	for i := 0; i < ids; i++ {
		id := NewLeaseID()
		if len(id) != 27 || !strings.HasPrefix(id, "ls_") {
			t.Fatalf("id %q: want ls_ and 24 characters", id)
		}
		if err := fsm.ValidateLeaseID("lease_id", id); err != nil {
			t.Fatalf("id %q: %v", id, err)
		}
		if seen[id] {
			t.Fatalf("id %q drawn twice", id)
		}
		seen[id] = true
		for _, c := range id[3:] {
			counts[strings.IndexRune(base62, c)]++
		}
	}
	// 480,000 characters, 7,742 expected each; the standard deviation is
	// about 87, so 5 % (387) is more than 4 of them.
	want := float64(ids*24) / 62
	for i, n := range counts {
		if d := float64(n) - want; d > 0.05*want || d < -0.05*want {
			t.Errorf("character %q drawn %d times, want about %.0f", base62[i], n, want)
		}
	}
}

func BenchmarkNewLeaseID(b *testing.B) {
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		_ = NewLeaseID()
	}
}
