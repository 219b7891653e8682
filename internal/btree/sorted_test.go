package btree

import (
	"errors"
	"math/rand"
	"slices"
	"testing"
)

// checkShape verifies the B-tree invariants BuildFromSorted promises: items
// strictly increasing in order, every leaf at the same depth, every node but
// the root within [minItems, maxItems] items, children = items + 1 above
// the leaves, and Len matching.
func checkShape[T any](t *testing.T, tr *BTreeG[T]) {
	t.Helper()
	less := tr.cow.less
	count, leafDepth := 0, -1
	var prev *T
	var walk func(n *node[T], depth int)
	walk = func(n *node[T], depth int) {
		if n != tr.root && (len(n.items) < tr.minItems() || len(n.items) > tr.maxItems()) {
			t.Fatalf("node at depth %d has %d items, want %d..%d", depth, len(n.items), tr.minItems(), tr.maxItems())
		}
		if n.cow != tr.cow {
			t.Fatal("node not owned by the tree's write context")
		}
		if len(n.children) == 0 {
			if leafDepth == -1 {
				leafDepth = depth
			} else if leafDepth != depth {
				t.Fatalf("leaves at depths %d and %d", leafDepth, depth)
			}
		} else if len(n.children) != len(n.items)+1 {
			t.Fatalf("%d children for %d items", len(n.children), len(n.items))
		}
		for i := range n.items {
			if len(n.children) > 0 {
				walk(n.children[i], depth+1)
			}
			if prev != nil && !less(*prev, n.items[i]) {
				t.Fatal("items out of order")
			}
			prev = &n.items[i]
			count++
		}
		if len(n.children) > 0 {
			walk(n.children[len(n.items)], depth+1)
		}
	}
	if tr.root != nil {
		walk(tr.root, 0)
	}
	if count != tr.Len() {
		t.Fatalf("%d items walked, Len %d", count, tr.Len())
	}
}

func TestBuildFromSortedShape(t *testing.T) {
	sizes := []int{}
	for n := 0; n <= 300; n++ {
		sizes = append(sizes, n)
	}
	sizes = append(sizes, 4095, 4096, 4097, 65535, 65536, 100_000, 262_143, 262_144, 262_145)
	for _, degree := range []int{2, 3, 4, 32} {
		for _, n := range sizes {
			if degree == 2 && n > 70_000 {
				continue
			}
			items := make([]int, n)
			for i := range items {
				items[i] = 2 * i
			}
			tr := NewOrderedG[int](degree)
			if err := tr.BuildFromSorted(items); err != nil {
				t.Fatal(err)
			}
			checkShape(t, tr)
			if got := intAll(tr); !slices.Equal(got, items) && !(n == 0 && got == nil) {
				t.Fatalf("degree %d, %d items: ascend gives other items", degree, n)
			}
		}
	}
}

// A built tree behaves like one built by inserts under later inserts,
// deletes and clones (the clone keeps its point-in-time view).
func TestBuildFromSortedThenMutate(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	for _, n := range []int{0, 1, 62, 63, 64, 1000, 20_000} {
		items := make([]int, n)
		for i := range items {
			items[i] = 2 * i
		}
		built := NewOrderedG[int](32)
		if err := built.BuildFromSorted(items); err != nil {
			t.Fatal(err)
		}
		ref := NewOrderedG[int](32)
		for _, x := range items {
			ref.ReplaceOrInsert(x)
		}
		snap := built.Clone()
		for i := 0; i < 5000; i++ {
			x := r.Intn(2*n + 10)
			if r.Intn(2) == 0 {
				_, a := built.ReplaceOrInsert(x)
				_, b := ref.ReplaceOrInsert(x)
				if a != b {
					t.Fatalf("insert %d: replaced %v, reference %v", x, a, b)
				}
			} else {
				_, a := built.Delete(x)
				_, b := ref.Delete(x)
				if a != b {
					t.Fatalf("delete %d: found %v, reference %v", x, a, b)
				}
			}
		}
		checkShape(t, built)
		if !slices.Equal(intAll(built), intAll(ref)) {
			t.Fatalf("%d items: built tree and reference differ after mutations", n)
		}
		if got := intAll(snap); !slices.Equal(got, items) && !(n == 0 && got == nil) {
			t.Fatalf("%d items: the clone taken before the mutations changed", n)
		}
	}
}

func TestBuildFromSortedRefuses(t *testing.T) {
	for _, items := range [][]int{{1, 1}, {2, 1}, {1, 2, 3, 3, 4}, {1, 2, 3, 0}} {
		tr := NewOrderedG[int](4)
		if err := tr.BuildFromSorted(items); !errors.Is(err, ErrNotSorted) {
			t.Fatalf("%v: err %v, want ErrNotSorted", items, err)
		}
		if tr.Len() != 0 || tr.root != nil {
			t.Fatalf("%v: a refused build left items", items)
		}
	}
	tr := NewOrderedG[int](4)
	tr.ReplaceOrInsert(7)
	if err := tr.BuildFromSorted([]int{1, 2}); err == nil {
		t.Fatal("build into a non-empty tree succeeded")
	}
}
