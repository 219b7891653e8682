// Package btree is github.com/google/btree v1.1.3 (its generic API,
// btree_generic.go and its tests, unchanged but for gofmt;
// LICENSE beside it) plus one addition in
// sorted.go: BuildFromSorted, which fills an empty tree from items already
// in order, bottom-up, in linear time.
//
// Why a copy: the state machine restores snapshots of millions of records
// that arrive in key order, and upstream has no bulk load; inserting them
// one by one costs a descent with a binary search per node for every
// record and leaves half-full nodes behind (a node split by appends at
// the right edge keeps half its items). The node type is unexported, so
// the builder has to live in the package. Keep btree_generic.go as upstream's
// (gofmt aside) so that it can be updated by copying.
package btree
