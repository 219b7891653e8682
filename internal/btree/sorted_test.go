package btree

import (
	"errors"
	"math/rand"
	"slices"
	"testing"
)

func lessInt(a, b int) bool { return a < b }

// BuildFromSorted fills an empty tree with every item, in order, and
// refuses items out of order or repeated (leaving the tree empty) and a
// tree that already holds items.
func TestBuildFromSorted(t *testing.T) {
	for _, n := range []int{0, 1, 2, 31, 32, 63, 64, 1000, 20_000} {
		items := make([]int, n)
		for i := range items {
			items[i] = 2 * i
		}
		tr := NewG(32, lessInt)
		if err := BuildFromSorted(tr, lessInt, items); err != nil {
			t.Fatal(err)
		}
		var got []int
		tr.Ascend(func(x int) bool { got = append(got, x); return true })
		if tr.Len() != n || !slices.Equal(got, items) {
			t.Fatalf("n=%d: len %d, items differ", n, tr.Len())
		}
		// The tree takes writes afterwards like any other.
		tr.ReplaceOrInsert(1)
		if _, ok := tr.Get(1); !ok || tr.Len() != n+1 {
			t.Fatalf("n=%d: insert after build", n)
		}
	}
	for _, bad := range [][]int{{1, 1}, {2, 1}, {1, 3, 2, 4}} {
		tr := NewG(32, lessInt)
		if err := BuildFromSorted(tr, lessInt, bad); !errors.Is(err, ErrNotSorted) || tr.Len() != 0 {
			t.Fatalf("%v: %v, len %d", bad, err, tr.Len())
		}
	}
	tr := NewG(32, lessInt)
	tr.ReplaceOrInsert(rand.Int())
	if err := BuildFromSorted(tr, lessInt, []int{1}); err == nil {
		t.Fatal("a non-empty tree was filled")
	}
}
