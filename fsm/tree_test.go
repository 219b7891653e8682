package fsm

import (
	"errors"
	"slices"
	"testing"
)

// loadSorted fills an empty tree with every item in order, across node
// splits (degree 32: 63 items a node) and at any size, and the tree takes
// ordinary writes afterwards; it refuses items out of order or repeated,
// leaving the tree empty, and a tree that already holds items.
func TestLoadSorted(t *testing.T) {
	less := func(a, b int) bool { return a < b }
	for _, n := range []int{0, 1, 2, 62, 63, 64, 127, 4032, 20_000} {
		items := make([]int, n)
		for i := range items {
			items[i] = 2 * i
		}
		tr := newTree(btreeDegree, less)
		if err := loadSorted(tr, less, items); err != nil {
			t.Fatalf("n=%d: %v", n, err)
		}
		var got []int
		tr.Scan(func(x int) bool { got = append(got, x); return true })
		if tr.Len() != n || !slices.Equal(got, items) {
			t.Fatalf("n=%d: len %d, items differ", n, tr.Len())
		}
		// Odd numbers land between loaded items, in every leaf.
		for i := 1; i < 2*n; i += 6 {
			tr.Set(i)
		}
		for i := 1; i < 2*n; i += 6 {
			if _, ok := tr.Get(i); !ok {
				t.Fatalf("n=%d: %d set after the load is missing", n, i)
			}
			if _, ok := tr.Delete(i); !ok {
				t.Fatalf("n=%d: %d not deleted", n, i)
			}
		}
		got = got[:0]
		tr.Scan(func(x int) bool { got = append(got, x); return true })
		if !slices.Equal(got, items) {
			t.Fatalf("n=%d: items differ after writes", n)
		}
	}
	// The last bad case fails after the load has split nodes.
	long := make([]int, 200)
	for i := range long {
		long[i] = i
	}
	long[199] = 198
	for _, bad := range [][]int{{1, 1}, {2, 1}, {1, 3, 2, 4}, long} {
		tr := newTree(btreeDegree, less)
		if err := loadSorted(tr, less, bad); !errors.Is(err, errNotSorted) || tr.Len() != 0 {
			t.Fatalf("%v: %v, len %d", bad, err, tr.Len())
		}
	}
	tr := newTree(btreeDegree, less)
	tr.Set(5)
	if err := loadSorted(tr, less, []int{1}); err == nil || tr.Len() != 1 {
		t.Fatalf("a non-empty tree was filled: %v, len %d", err, tr.Len())
	}
}

// A copy is a point-in-time view: writes to the source after Copy (which
// copy the nodes they touch) leave the copy as it was, and the other way
// round.
func TestTableCopyIsolated(t *testing.T) {
	tb := newTable(func(a, b int) bool { return a < b }, func(int) int64 { return 10 })
	for i := range 1000 {
		tb.Set(i)
	}
	cp := tb.Copy()
	for i := 0; i < 1000; i += 2 {
		tb.Delete(i)
	}
	tb.Set(5000)
	cp.Set(-1)
	if cp.Len() != 1001 || cp.Bytes() != 10010 || tb.Len() != 501 || tb.Bytes() != 5010 {
		t.Fatalf("copy %d items %d bytes, source %d items %d bytes", cp.Len(), cp.Bytes(), tb.Len(), tb.Bytes())
	}
	if _, ok := cp.Get(0); !ok {
		t.Fatal("a delete from the source reached the copy")
	}
	if _, ok := tb.Get(-1); ok {
		t.Fatal("a write to the copy reached the source")
	}
}
