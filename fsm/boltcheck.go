package fsm

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"os"
)

// checkPageGraph walks the page tree of the bbolt file at path, as bbolt
// would, before bbolt itself reads it, and fails on what bbolt would not
// survive: a page referenced twice (a cycle has bbolt's cursor descend
// forever, growing its stack until the process runs out of memory, which
// no recover() catches), a page past the file or the database's high-water
// mark, a high-water mark past the file, a page whose header names another
// page, a branch page with no children, an element outside its page, more
// elements than the file can hold (they overlap). bbolt has no checksums on its data
// pages and trusts them; raft's snapshot store and backups check a whole
// file's checksum first, so this guards against what gets past those (a
// bad disk between the check and the read, a bug, a crafted file), and
// keeps "a damaged snapshot is an error, never a crash" true.
//
// It reads bbolt's on-disk format (go.etcd.io/bbolt v1, format version 2,
// in the machine's byte order, as bbolt writes it) and nothing else: what
// it accepts, bbolt still checks as before. Buckets nested more than
// boltMaxBucketDepth deep are refused too (a snapshot has one level).
func checkPageGraph(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	c := &pageChecker{f: f, size: fi.Size(), seen: map[uint64]bool{}}
	m, err := c.meta()
	if err != nil {
		return err
	}
	c.pageSize, c.hwm = int64(m.pageSize), m.pgid
	return c.bucket(m.root, nil, 0)
}

const (
	boltMagic          = 0xED0CDAED
	boltVersion        = 2
	boltPageHeader     = 16 // id u64, flags u16, count u16, overflow u32
	boltElement        = 16 // a branch or leaf element
	boltBranchPage     = 0x01
	boltLeafPage       = 0x02
	boltBucketLeaf     = 0x01 // a leaf element whose value is a bucket
	boltBucketHeader   = 16   // root pgid u64, sequence u64
	boltMaxBucketDepth = 64   // nested buckets (the snapshot has one level)
)

var nativeEndian = binary.NativeEndian

type boltMeta struct {
	pageSize uint32
	root     uint64 // the root bucket's page
	pgid     uint64 // the high-water mark: pages at or past it are not in use
	txid     uint64
}

type pageChecker struct {
	f        *os.File
	size     int64
	pageSize int64
	hwm      uint64
	seen     map[uint64]bool
	// elems counts the elements read, across every page and inline
	// bucket: in a sound file each element's 16 bytes are its own, so there
	// are at most size/16. Elements that overlap (an inline bucket whose
	// elements all point at the same inline bucket, nested) could
	// otherwise make the walk exponential.
	elems int64
}

// element counts one more element, failing past what the file can hold.
func (c *pageChecker) element(id uint64) error {
	c.elems++
	if c.elems > c.size/boltElement+16 {
		return fmt.Errorf("page %d: more elements than a file of %d bytes can hold (elements overlap)", id, c.size)
	}
	return nil
}

// meta finds the page size and the meta page as bbolt does (db.go,
// getPageSize and meta): a meta is valid by magic, version and checksum
// alone; the page size is meta 0's when meta 0 is valid, else that of the
// first valid meta at 1 KiB << i; the metas are then read at 0 and at that
// page size, and the valid one with the higher transaction id is used.
// Pages are addressed by that page size whatever the chosen meta says, as
// bbolt's mapping does. A high-water mark past the file is refused here
// (bbolt would refuse it at its size check): it also keeps every offset
// below the file's size.
func (c *pageChecker) meta() (boltMeta, error) {
	var ps int64
	m0, ok0 := c.readMeta(0)
	if ok0 {
		ps = int64(m0.pageSize)
	} else {
		for i := 0; i <= 14; i++ {
			pos := int64(1024) << i
			if pos >= c.size-1024 {
				break
			}
			if m, ok := c.readMeta(pos); ok {
				ps = int64(m.pageSize)
				break
			}
		}
	}
	if ps == 0 {
		return boltMeta{}, fmt.Errorf("no valid meta page")
	}
	if ps < 512 || ps > 1<<24 || ps&(ps-1) != 0 {
		return boltMeta{}, fmt.Errorf("page size %d", ps)
	}
	m1, ok1 := c.readMeta(ps)
	var m boltMeta
	switch {
	case ok0 && ok1 && m1.txid > m0.txid, !ok0 && ok1:
		m = m1
	case ok0:
		m = m0
	default:
		return boltMeta{}, fmt.Errorf("no valid meta page")
	}
	m.pageSize = uint32(ps) // bbolt addresses pages by this size, whatever m says
	if m.pgid > uint64(c.size/ps) {
		return boltMeta{}, fmt.Errorf("high-water mark %d pages past the file (%d bytes)", m.pgid, c.size)
	}
	return m, nil
}

// readMeta reads the meta page at off; valid means magic, version and
// checksum (FNV-64a of the fields before it) hold, as bbolt's Validate.
func (c *pageChecker) readMeta(off int64) (boltMeta, bool) {
	buf := make([]byte, boltPageHeader+64)
	if _, err := c.f.ReadAt(buf, off); err != nil {
		return boltMeta{}, false
	}
	b := buf[boltPageHeader:]
	if nativeEndian.Uint32(b[0:]) != boltMagic || nativeEndian.Uint32(b[4:]) != boltVersion {
		return boltMeta{}, false
	}
	h := fnv.New64a()
	h.Write(b[:56])
	if h.Sum64() != nativeEndian.Uint64(b[56:]) {
		return boltMeta{}, false
	}
	return boltMeta{pageSize: nativeEndian.Uint32(b[8:]), root: nativeEndian.Uint64(b[16:]),
		pgid: nativeEndian.Uint64(b[40:]), txid: nativeEndian.Uint64(b[48:])}, true
}

// page reads page id with its overflow pages, after checking that it is
// in use, inside the file, not seen before, and names itself.
func (c *pageChecker) page(id uint64) ([]byte, error) {
	if id < 2 || id >= c.hwm {
		return nil, fmt.Errorf("page %d is outside the database's pages (2 to below %d)", id, c.hwm)
	}
	if c.seen[id] {
		return nil, fmt.Errorf("page %d is referenced twice (a cycle or a shared page)", id)
	}
	c.seen[id] = true
	off := int64(id) * c.pageSize
	if off+c.pageSize > c.size {
		return nil, fmt.Errorf("page %d ends past the end of the file (%d bytes)", id, c.size)
	}
	// One read for the page itself; its overflow pages, if any, in a second.
	p := make([]byte, c.pageSize)
	if _, err := c.f.ReadAt(p, off); err != nil {
		return nil, fmt.Errorf("page %d: %w", id, err)
	}
	if got := nativeEndian.Uint64(p); got != id {
		return nil, fmt.Errorf("page %d says it is page %d", id, got)
	}
	overflow := uint64(nativeEndian.Uint32(p[12:]))
	if overflow == 0 {
		return p, nil
	}
	if id+overflow >= c.hwm {
		return nil, fmt.Errorf("page %d overflows past the database's pages (%d more)", id, overflow)
	}
	n := int64(overflow+1) * c.pageSize
	if off+n > c.size {
		return nil, fmt.Errorf("page %d (%d bytes) ends past the end of the file (%d bytes)", id, n, c.size)
	}
	for k := uint64(1); k <= overflow; k++ {
		if c.seen[id+k] {
			return nil, fmt.Errorf("page %d overlaps page %d", id, id+k)
		}
		c.seen[id+k] = true
	}
	whole := make([]byte, n)
	copy(whole, p)
	if _, err := c.f.ReadAt(whole[c.pageSize:], off+c.pageSize); err != nil {
		return nil, fmt.Errorf("page %d: %w", id, err)
	}
	return whole, nil
}

// bucket checks the tree of a bucket: its root page, or the inline page
// carried in its value (root 0).
func (c *pageChecker) bucket(root uint64, inline []byte, depth int) error {
	if depth > boltMaxBucketDepth {
		return fmt.Errorf("buckets nested more than %d deep", boltMaxBucketDepth)
	}
	if root == 0 {
		return c.elements(0, inline, depth)
	}
	stack := []uint64{root}
	for len(stack) > 0 {
		id := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		p, err := c.page(id)
		if err != nil {
			return err
		}
		children, err := c.branchChildren(id, p)
		if err != nil {
			return err
		}
		if children == nil {
			if err := c.elements(id, p, depth); err != nil {
				return err
			}
			continue
		}
		stack = append(stack, children...)
	}
	return nil
}

// branchChildren returns a branch page's child pages, or nil for a leaf
// page.
func (c *pageChecker) branchChildren(id uint64, p []byte) ([]uint64, error) {
	flags, count := nativeEndian.Uint16(p[8:]), int(nativeEndian.Uint16(p[10:]))
	switch flags {
	case boltLeafPage:
		return nil, nil
	case boltBranchPage:
	default:
		return nil, fmt.Errorf("page %d: flags %#x, want a branch or a leaf page", id, flags)
	}
	if count == 0 {
		return nil, fmt.Errorf("branch page %d has no children", id)
	}
	if boltPageHeader+count*boltElement > len(p) {
		return nil, fmt.Errorf("branch page %d: %d elements do not fit in %d bytes", id, count, len(p))
	}
	kids := make([]uint64, count)
	for i := range kids {
		if err := c.element(id); err != nil {
			return nil, err
		}
		e := p[boltPageHeader+i*boltElement:]
		pos, ksize := int(nativeEndian.Uint32(e[0:])), int(nativeEndian.Uint32(e[4:]))
		if at := boltPageHeader + i*boltElement + pos; pos < 0 || ksize < 0 || at+ksize > len(p) {
			return nil, fmt.Errorf("branch page %d element %d: key outside the page", id, i)
		}
		kids[i] = nativeEndian.Uint64(e[8:])
	}
	return kids, nil
}

// elements checks a leaf page's elements (p is the whole page, header
// first), and the trees of the buckets among them.
func (c *pageChecker) elements(id uint64, p []byte, depth int) error {
	if len(p) < boltPageHeader {
		return fmt.Errorf("page %d: an inline bucket of %d bytes", id, len(p))
	}
	if flags := nativeEndian.Uint16(p[8:]); flags != boltLeafPage {
		return fmt.Errorf("page %d: flags %#x, want a leaf page", id, flags)
	}
	count := int(nativeEndian.Uint16(p[10:]))
	if boltPageHeader+count*boltElement > len(p) {
		return fmt.Errorf("leaf page %d: %d elements do not fit in %d bytes", id, count, len(p))
	}
	for i := 0; i < count; i++ {
		if err := c.element(id); err != nil {
			return err
		}
		base := boltPageHeader + i*boltElement
		e := p[base:]
		flags := nativeEndian.Uint32(e[0:])
		pos, ksize, vsize := int64(nativeEndian.Uint32(e[4:])), int64(nativeEndian.Uint32(e[8:])), int64(nativeEndian.Uint32(e[12:]))
		start := int64(base) + pos
		if start+ksize+vsize > int64(len(p)) {
			return fmt.Errorf("leaf page %d element %d: key and value outside the page", id, i)
		}
		if flags&boltBucketLeaf == 0 {
			continue
		}
		v := p[start+ksize : start+ksize+vsize]
		if len(v) < boltBucketHeader {
			return fmt.Errorf("leaf page %d element %d: a bucket value of %d bytes", id, i, len(v))
		}
		if err := c.bucket(nativeEndian.Uint64(v), v[boltBucketHeader:], depth+1); err != nil {
			return err
		}
	}
	return nil
}
