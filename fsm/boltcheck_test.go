package fsm

import (
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// boltBytes writes a bbolt file of pageSize (0: bbolt's default), one
// transaction per update, and returns its bytes.
func boltBytes(tb testing.TB, pageSize int, updates ...func(*bolt.Tx) error) []byte {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "b.db")
	db, err := bolt.Open(path, 0o600, &bolt.Options{PageSize: pageSize})
	if err != nil {
		tb.Fatal(err)
	}
	for _, u := range updates {
		if err := db.Update(u); err != nil {
			tb.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		tb.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	return data
}

// writeTemp writes data to a file of its own and returns its path.
func writeTemp(tb testing.TB, data []byte) string {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "c.db")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		tb.Fatal(err)
	}
	return path
}

// branchyDB writes a bbolt file with one bucket big enough for a branch
// page, and returns its bytes, its page size, and the id of a branch page.
func branchyDB(t *testing.T) (data []byte, pageSize int, branch uint64) {
	t.Helper()
	data = boltBytes(t, 0, func(tx *bolt.Tx) error {
		b, err := tx.CreateBucket([]byte("t"))
		if err != nil {
			return err
		}
		for i := 0; i < 3000; i++ {
			if err := b.Put([]byte{byte(i >> 8), byte(i)}, make([]byte, 40)); err != nil {
				return err
			}
		}
		return nil
	})
	pageSize = int(nativeEndian.Uint32(data[boltPageHeader+8:])) // meta 0's
	for id := 2; (id+1)*pageSize <= len(data); id++ {
		p := data[id*pageSize:]
		if nativeEndian.Uint64(p) == uint64(id) && nativeEndian.Uint16(p[8:]) == boltBranchPage {
			return data, pageSize, uint64(id)
		}
	}
	t.Fatal("no branch page in a bucket of 3,000 keys")
	return nil, 0, 0
}

func checkBytes(t *testing.T, data []byte) error {
	t.Helper()
	return checkPageGraph(writeTemp(t, data))
}

// TestPageGraphAcceptsWhatBboltWrote: a sound file, and a real snapshot,
// pass the check.
func TestPageGraphAcceptsWhatBboltWrote(t *testing.T) {
	data, _, _ := branchyDB(t)
	if err := checkBytes(t, data); err != nil {
		t.Fatalf("a file bbolt wrote: %v", err)
	}
	if err := checkBytes(t, snapshotBytes(t, bigState(t))); err != nil {
		t.Fatalf("a snapshot: %v", err)
	}
}

// TestPageGraphRefusesACycle: a branch page that names itself as a child
// would have bbolt's cursor descend until the process runs out of memory
// (random damage did that in TestRestoreRandomDamage, about one run in
// twenty-five). The check refuses it, and so does Restore, with the state
// kept.
func TestPageGraphRefusesACycle(t *testing.T) {
	data, pageSize, branch := branchyDB(t)
	off := int(branch)*pageSize + boltPageHeader
	nativeEndian.PutUint64(data[off+8:], branch) // element 0's child: the page itself
	if err := checkBytes(t, data); err == nil || !strings.Contains(err.Error(), "referenced twice") {
		t.Fatalf("a self-referencing branch page: %v, want an error naming the page referenced twice", err)
	}

	snap := snapshotBytes(t, bigState(t))
	f := New(Options{TempDir: t.TempDir()})
	f.ApplyCommand(1, cNS("kept"))
	before := dumpState(f)
	// The snapshot's root bucket page holds the tables: make its first
	// table's root the root page itself.
	sf, err := os.Open(writeTemp(t, snap))
	if err != nil {
		t.Fatal(err)
	}
	defer sf.Close()
	m, err := (&pageChecker{f: sf, size: int64(len(snap))}).meta()
	if err != nil {
		t.Fatal(err)
	}
	root := snap[int(m.root)*int(m.pageSize):]
	e := root[boltPageHeader:]
	pos, ksize := int(nativeEndian.Uint32(e[4:])), int(nativeEndian.Uint32(e[8:]))
	if nativeEndian.Uint32(e[0:])&boltBucketLeaf == 0 {
		t.Fatal("the root page's first element is not a bucket")
	}
	nativeEndian.PutUint64(e[pos+ksize:], m.root)
	err = restoreBytes(f, snap)
	if err == nil || !strings.Contains(err.Error(), "referenced twice") {
		t.Fatalf("restore of a snapshot whose table is its own root: %v, want an error naming the page referenced twice", err)
	}
	if dumpState(f) != before {
		t.Fatal("a refused restore changed the state")
	}
}

// TestPageGraphRefusesPagesOutOfRange: a child past the high-water mark,
// a page header naming another page, and a branch page with no children.
func TestPageGraphRefusesPagesOutOfRange(t *testing.T) {
	for _, c := range []struct {
		name, want string
		damage     func(data []byte, pageSize int, branch uint64)
	}{
		{"child past the end", "outside the database's pages", func(d []byte, ps int, br uint64) {
			nativeEndian.PutUint64(d[int(br)*ps+boltPageHeader+8:], 1<<40)
		}},
		{"header names another page", "says it is page", func(d []byte, ps int, br uint64) {
			nativeEndian.PutUint64(d[int(br)*ps:], br+1)
		}},
		{"branch without children", "has no children", func(d []byte, ps int, br uint64) {
			nativeEndian.PutUint16(d[int(br)*ps+10:], 0)
		}},
	} {
		data, pageSize, branch := branchyDB(t)
		c.damage(data, pageSize, branch)
		if err := checkBytes(t, data); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error containing %q", c.name, err, c.want)
		}
	}
}

// TestPageGraphAcceptsManyShapes: whatever bbolt writes passes, at every
// page size: nested, inline and empty buckets, values over several pages,
// pages freed by later transactions; and a file whose meta 0 is torn, when
// bbolt still reads it through meta 1.
func TestPageGraphAcceptsManyShapes(t *testing.T) {
	for _, ps := range []int{1024, 2048, 4096, 65536} {
		var rounds []func(*bolt.Tx) error
		for round := 0; round < 5; round++ {
			rounds = append(rounds, func(tx *bolt.Tx) error {
				top, err := tx.CreateBucketIfNotExists([]byte("top"))
				if err != nil {
					return err
				}
				if _, err := tx.CreateBucketIfNotExists([]byte("empty")); err != nil {
					return err
				}
				inl, err := tx.CreateBucketIfNotExists([]byte("inline"))
				if err != nil {
					return err
				}
				if err := inl.Put([]byte("k"), []byte("v")); err != nil {
					return err
				}
				cur := top
				for d := 0; d < 10; d++ {
					if cur, err = cur.CreateBucketIfNotExists([]byte(fmt.Sprint("n", d))); err != nil {
						return err
					}
					if _, err := cur.CreateBucketIfNotExists([]byte("inl")); err != nil {
						return err
					}
					for i := 0; i < 300; i++ {
						if err := cur.Put([]byte(fmt.Sprint(round, i)), make([]byte, 50+i%7)); err != nil {
							return err
						}
					}
				}
				big, err := tx.CreateBucketIfNotExists([]byte("big"))
				if err != nil {
					return err
				}
				if err := big.Put([]byte(fmt.Sprint("v", round)), make([]byte, 5*ps+17)); err != nil {
					return err
				}
				if round > 0 {
					return big.Delete([]byte(fmt.Sprint("v", round-1)))
				}
				return nil
			})
		}
		data := boltBytes(t, ps, rounds...)
		if err := checkBytes(t, data); err != nil {
			t.Errorf("page size %d: %v", ps, err)
		}
		data[boltPageHeader+50] ^= 0xff // meta 0's transaction id: its checksum fails
		if err := checkBytes(t, data); err != nil {
			t.Errorf("page size %d, meta 0 torn (bbolt reads meta 1): %v", ps, err)
		}
	}
}

// TestPageGraphReadsPagesAtBboltsPageSize: a newer meta 1 that states
// another page size than meta 0 must not move the check's pages: bbolt
// addresses pages by meta 0's page size whatever meta 1 says, so a file
// with an empty leaf at meta 1's page size and a self-referencing branch
// at meta 0's (a stack overflow in bbolt) is refused.
func TestPageGraphReadsPagesAtBboltsPageSize(t *testing.T) {
	data, ps, _ := branchyDB(t)
	if ps != 4096 {
		t.Skipf("this file's page size is %d, the test assumes 4096", ps)
	}
	s := uint64(len(data) / ps)
	data = append(data, make([]byte, int(s+2)*ps)...) // 2s+2 pages of 4 KiB
	// At 4 KiB (bbolt's view), page s is a branch whose only child is itself.
	b := data[int(s)*ps:]
	nativeEndian.PutUint64(b[0:], s)
	nativeEndian.PutUint16(b[8:], boltBranchPage)
	nativeEndian.PutUint16(b[10:], 1)
	nativeEndian.PutUint32(b[16:], 16) // the key's position
	nativeEndian.PutUint32(b[20:], 1)  // its size
	nativeEndian.PutUint64(b[24:], s)  // the child: itself
	// At 8 KiB, page s (at 2s * 4 KiB) is an empty leaf.
	l := data[int(2*s)*ps:]
	nativeEndian.PutUint64(l[0:], s)
	nativeEndian.PutUint16(l[8:], boltLeafPage)
	// Meta 1: meta 0 with page size 8 KiB, root s, a newer transaction.
	m0, m1 := data[0:ps], data[ps:2*ps]
	copy(m1, m0)
	nativeEndian.PutUint64(m1[0:], 1)
	m := m1[boltPageHeader:]
	nativeEndian.PutUint32(m[8:], 8192)
	nativeEndian.PutUint64(m[16:], s)
	nativeEndian.PutUint64(m[40:], s+1)
	nativeEndian.PutUint64(m[48:], nativeEndian.Uint64(m0[boltPageHeader+48:])+1)
	h := fnv.New64a()
	h.Write(m[:56])
	nativeEndian.PutUint64(m[56:], h.Sum64())
	if err := checkBytes(t, data); err == nil {
		t.Fatal("a file whose pages differ at meta 1's page size passed the check")
	}
}

// FuzzCheckPageGraph: whatever the bytes, the check ends without a panic,
// and a file it accepts is one bbolt reads to the end (every bucket, every
// key, nested buckets too) without descending for ever: bbolt may still
// refuse it (its panics and faults are errors, as in Restore), but it must
// finish. `make fuzz-snapshot` runs it for 60 s; `go test` runs the seeds
// (small databases of 1 and 4 KiB pages: nested, empty and multi-page values).
func FuzzCheckPageGraph(f *testing.F) {
	for _, ps := range []int{1024, 4096} {
		f.Add(boltBytes(f, ps, func(tx *bolt.Tx) error {
			top, err := tx.CreateBucket([]byte("top"))
			if err != nil {
				return err
			}
			sub, err := top.CreateBucket([]byte("sub"))
			if err != nil {
				return err
			}
			for i := 0; i < 200; i++ {
				if err := top.Put([]byte(fmt.Sprint("k", i)), make([]byte, 20)); err != nil {
					return err
				}
			}
			if err := sub.Put([]byte("big"), make([]byte, 3*ps)); err != nil {
				return err
			}
			_, err = tx.CreateBucket([]byte("empty"))
			return err
		}))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		path := writeTemp(t, data) // its own file: fuzz workers run in parallel
		if checkPageGraph(path) != nil {
			return
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			readAllOfBbolt(path)
		}()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Fatal("bbolt did not finish reading a file the check accepted")
		}
	})
}

// readAllOfBbolt reads every key of every bucket of the file, nested
// buckets included, as Restore would (faults and panics are errors there,
// so they end the read here too).
func readAllOfBbolt(path string) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() { _ = recover() }()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		return
	}
	defer db.Close()
	_ = db.View(func(tx *bolt.Tx) error {
		var walk func(b *bolt.Bucket, depth int) error
		walk = func(b *bolt.Bucket, depth int) error {
			if depth > boltMaxBucketDepth {
				return nil
			}
			return b.ForEach(func(k, v []byte) error {
				if v == nil {
					if sub := b.Bucket(k); sub != nil {
						return walk(sub, depth+1)
					}
				}
				return nil
			})
		}
		return tx.ForEach(func(_ []byte, b *bolt.Bucket) error { return walk(b, 0) })
	})
}

// TestPageGraphRefusesOverlappingElements: inline buckets whose elements
// all point at the same nested inline bucket, level after level, are a
// small file that a walk without a bound would visit k^depth times (here
// 6^9, about 10 million elements); the check refuses it once it has read
// more elements than the bytes can hold.
func TestPageGraphRefusesOverlappingElements(t *testing.T) {
	const k, depth = 6, 9
	page := make([]byte, boltPageHeader) // the innermost inline page: a leaf, empty
	nativeEndian.PutUint16(page[8:], boltLeafPage)
	for d := 0; d < depth; d++ {
		value := append(make([]byte, boltBucketHeader), page...) // root 0: inline
		outer := make([]byte, boltPageHeader+k*boltElement, boltPageHeader+k*boltElement+len(value))
		nativeEndian.PutUint16(outer[8:], boltLeafPage)
		nativeEndian.PutUint16(outer[10:], k)
		for i := 0; i < k; i++ {
			e := outer[boltPageHeader+i*boltElement:]
			nativeEndian.PutUint32(e[0:], boltBucketLeaf)
			nativeEndian.PutUint32(e[4:], uint32((k-i)*boltElement)) // every key (empty) and value at the shared value
			nativeEndian.PutUint32(e[12:], uint32(len(value)))
		}
		page = append(outer, value...)
	}
	c := &pageChecker{size: int64(len(page)), seen: map[uint64]bool{}}
	err := c.elements(0, page, 0)
	if err == nil || !strings.Contains(err.Error(), "elements overlap") {
		t.Fatalf("%d bytes of nested overlapping inline buckets: %v after %d elements, want an error naming the overlap", len(page), err, c.elems)
	}
}
