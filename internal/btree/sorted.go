package btree

import "errors"

// ErrNotSorted is returned by BuildFromSorted for items that are not
// strictly increasing.
var ErrNotSorted = errors.New("btree: items not strictly increasing")

// BuildFromSorted fills the empty tree t with items, which must be strictly
// increasing under t's less function (it is checked: the tree is left
// empty and ErrNotSorted returned otherwise). The tree is built bottom-up
// in O(len(items)): each level is cut into as few nodes as its items need,
// spread evenly, so every node but the root holds between minItems and
// maxItems items, and every leaf is at the same depth: the same invariants
// as a tree built by ReplaceOrInsert, with fuller nodes. items is copied
// (each node gets its own slices), so the caller may reuse it.
func (t *BTreeG[T]) BuildFromSorted(items []T) error {
	if t.length != 0 || t.root != nil {
		return errors.New("btree: BuildFromSorted on a non-empty tree")
	}
	less := t.cow.less
	for i := 1; i < len(items); i++ {
		if !less(items[i-1], items[i]) {
			return ErrNotSorted
		}
	}
	if len(items) == 0 {
		return nil
	}
	// One level: its items and, above the leaves, its children (one more
	// than the items). Cutting the level into P nodes promotes P-1 items
	// (separators) to the level above, whose children are these nodes.
	level := items
	var children []*node[T]
	width := t.maxItems() + 1
	for {
		n := len(level)
		p := (n + width) / width // ceil((n+1) / width) nodes
		if p <= 1 {
			t.root = t.newBuiltNode(level, children)
			break
		}
		// p >= 2 gives n+1 > width*(p-1), so each node gets at least
		// floor((n+1)/p) - 1 >= width/2 - 1 = minItems items, and at most
		// ceil((n+1)/p) - 1 <= maxItems.
		m := n - (p - 1)
		q, r := m/p, m%p
		nodes := make([]*node[T], p)
		seps := make([]T, p-1)
		pos, cpos := 0, 0
		for i := range nodes {
			sz := q
			if i < r {
				sz++
			}
			var kids []*node[T]
			if children != nil {
				kids = children[cpos : cpos+sz+1]
				cpos += sz + 1
			}
			nodes[i] = t.newBuiltNode(level[pos:pos+sz], kids)
			pos += sz
			if i < p-1 {
				seps[i] = level[pos]
				pos++
			}
		}
		level, children = seps, nodes
	}
	t.length = len(items)
	return nil
}

// newBuiltNode makes a node of t's write context with its own copies of
// items and children.
func (t *BTreeG[T]) newBuiltNode(items []T, children []*node[T]) *node[T] {
	n := t.cow.newNode()
	n.items = append(make([]T, 0, len(items)), items...)
	if children != nil {
		n.children = append(make([]*node[T], 0, len(children)), children...)
	}
	return n
}
