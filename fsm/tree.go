package fsm

import (
	"errors"

	"github.com/tidwall/btree"
)

// The ordered tables are github.com/tidwall/btree's generic B-tree: ordered
// iteration from a pivot, an O(1) copy-on-write Copy, and Load, which
// appends items given in increasing order to the right edge of the tree
// without searching it (what a restore needs: every table arrives sorted).

// btreeDegree is the trees' branching: nodes of up to 2*32-1 items.
const btreeDegree = 32

// newTree is an empty tree ordered by less. It has no lock of its own: the
// FSM's lock guards every tree. Copy changes the identity of the tree it
// copies, so it is a write to that tree and runs under the write lock.
func newTree[T any](degree int, less func(a, b T) bool) *btree.BTreeG[T] {
	return btree.NewBTreeGOptions(less, btree.Options{Degree: degree, NoLocks: true})
}

// errNotSorted is returned by loadSorted for items that are not strictly
// increasing.
var errNotSorted = errors.New("records not in strictly increasing key order")

// loadSorted fills the empty tree t with items, which must be strictly
// increasing under less: a snapshot whose records are out of order or
// repeated is refused (errNotSorted, the tree left empty) instead of being
// silently merged.
func loadSorted[T any](t *btree.BTreeG[T], less func(a, b T) bool, items []T) error {
	if t.Len() != 0 {
		return errors.New("loading sorted records into a non-empty tree")
	}
	for i, it := range items {
		if i > 0 && !less(items[i-1], it) {
			t.Clear()
			return errNotSorted
		}
		t.Load(it)
	}
	return nil
}
