// Package btree is the state machine's ordered tables: the generic B-tree of
// github.com/google/btree (a module dependency), under this package's names,
// and BuildFromSorted, which fills an empty tree from records a snapshot
// delivers in key order, checking that they are.
package btree

import (
	"errors"

	gbtree "github.com/google/btree"
)

// BTreeG is github.com/google/btree's generic B-tree: copy-on-write Clone,
// ordered iteration from a pivot.
type BTreeG[T any] = gbtree.BTreeG[T]

// LessFunc orders a tree's items.
type LessFunc[T any] = gbtree.LessFunc[T]

// NewG makes an empty tree of the given degree ordered by less.
func NewG[T any](degree int, less LessFunc[T]) *BTreeG[T] { return gbtree.NewG(degree, less) }

// ErrNotSorted is returned by BuildFromSorted for items that are not
// strictly increasing.
var ErrNotSorted = errors.New("btree: items not strictly increasing")

// BuildFromSorted fills the empty tree t with items, which must be strictly
// increasing under less (checked first: the tree is left empty and
// ErrNotSorted returned otherwise, so a snapshot whose records are out of
// order is refused instead of silently merged). The upstream tree has no
// bulk load, so the items are inserted in order: each insert descends the
// right edge of the tree.
func BuildFromSorted[T any](t *BTreeG[T], less LessFunc[T], items []T) error {
	if t.Len() != 0 {
		return errors.New("btree: BuildFromSorted on a non-empty tree")
	}
	for i := 1; i < len(items); i++ {
		if !less(items[i-1], items[i]) {
			return ErrNotSorted
		}
	}
	for _, it := range items {
		t.ReplaceOrInsert(it)
	}
	return nil
}
