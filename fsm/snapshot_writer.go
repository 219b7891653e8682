package fsm

import (
	"encoding/binary"
	"fmt"
	"io"
	"os"

	"github.com/hashicorp/raft"
	bolt "go.etcd.io/bbolt"
	"google.golang.org/protobuf/proto"

	fsmpb "github.com/grackle-coord/grackle/proto/grackle/fsm/v1"
)

// The snapshot writer: a point-in-time clone written as a bbolt file in
// table order (the format is described in snapshot_codec.go).

// txnBytes bounds the data (and so the dirty pages) one bbolt transaction
// keeps in memory: the records handed to bbolt (copies in the arena) and, at
// commit, the pages bbolt builds from them are live together, and whatever
// is live when the collector runs is doubled by the next collection's goal.
// At 32 MiB a snapshot being written held about 160 MiB beside the state
// (BenchmarkSnapshot1M, live-over-state); 4 MiB costs a few more commits
// (no fsync: NoSync) and no measurable time.
const txnBytes = 4 << 20

// snapshotMmapSize is the mapping reserved for writing a snapshot file.
const snapshotMmapSize = 1 << 30

type snapshot struct {
	st     *state
	tmpDir string
}

// Snapshot implements raft.FSM: an O(1) copy-on-write copy under the lock.
// The write lock: copying a tree gives the tree a new identity (so that its
// next writes copy the nodes they touch), which is a write to it.
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.Lock()
	c := f.st.persistView()
	f.mu.Unlock()
	return &snapshot{st: c, tmpDir: f.tmpDir}, nil
}

// Persist writes the snapshot as a bbolt file and streams it into sink.
func (sn *snapshot) Persist(sink raft.SnapshotSink) error {
	if err := sn.writeTo(sink); err != nil {
		_ = sink.Cancel()
		return fmt.Errorf("fsm: persist snapshot: %w", err)
	}
	return sink.Close()
}

func (sn *snapshot) Release() {}

// WriteSnapshot writes the current state as snapshot bytes (tests, tools).
func (f *FSM) WriteSnapshot(w io.Writer) error {
	s, _ := f.Snapshot()
	return s.(*snapshot).writeTo(w)
}

func (sn *snapshot) writeTo(w io.Writer) error {
	tmp, err := os.CreateTemp(sn.tmpDir, "grackle-snapshot-*.db")
	if err != nil {
		return err
	}
	path := tmp.Name()
	tmp.Close()
	os.Remove(path)
	defer os.Remove(path)
	// bbolt remaps its file each time the file outgrows the mapping
	// (doubling from 32 KiB), and before each remap copies every key and
	// value of the open transaction to the heap: for a 1M-lease state that
	// was 700 MB of garbage per snapshot. A mapping reserved up front (address
	// space only, as etcd's backend does) is never remapped below 1 GiB of
	// snapshot. The file then grows by AllocSize past what it holds, so that
	// is one page, not bbolt's 16 MiB.
	db, err := bolt.Open(path, 0o600, &bolt.Options{NoSync: true, NoFreelistSync: false, InitialMmapSize: snapshotMmapSize})
	if err != nil {
		return err
	}
	db.AllocSize = os.Getpagesize()
	if err := sn.fill(db); err != nil {
		db.Close()
		return err
	}
	if err := db.Close(); err != nil {
		return err
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(w, f)
	return err
}

// batchWriter spreads puts over transactions of about txnBytes. bbolt
// keeps the key and value slices of a put until the transaction commits,
// so they are carved out of arena chunks, which are reused once it has
// committed (bbolt has then copied them into its pages and forgotten
// them): a snapshot allocates about txnBytes of arena in all, not its
// size.
type batchWriter struct {
	db      *bolt.DB
	tx      *bolt.Tx
	buckets map[string]*bolt.Bucket
	chunks  [][]byte // the arena: chunks[:used] hold this transaction's copies
	used    int
	bytes   int
	err     error
}

const arenaChunk = 1 << 20

// grab returns n bytes of arena, valid until the next commit.
func (b *batchWriter) grab(n int) []byte {
	for {
		if b.used == len(b.chunks) {
			b.chunks = append(b.chunks, make([]byte, 0, max(arenaChunk, n)))
		}
		c := b.chunks[b.used]
		if cap(c)-len(c) >= n {
			s := c[len(c) : len(c)+n : len(c)+n]
			b.chunks[b.used] = c[:len(c)+n]
			return s
		}
		if len(c) == 0 { // an empty chunk too small for n: a bigger one
			b.chunks[b.used] = make([]byte, 0, n)
			continue
		}
		b.used++
	}
}

// put stores a copy of k and v.
func (b *batchWriter) put(bucket, k, v []byte) {
	if b.err != nil {
		return
	}
	if b.tx == nil {
		if b.tx, b.err = b.db.Begin(true); b.err != nil {
			return
		}
		b.buckets = map[string]*bolt.Bucket{}
	}
	bk := b.buckets[string(bucket)]
	if bk == nil {
		bk = b.tx.Bucket(bucket)
		bk.FillPercent = 0.95 // keys arrive in order: pack pages
		b.buckets[string(bucket)] = bk
	}
	kk := b.grab(len(k))
	copy(kk, k)
	vv := b.grab(len(v))
	copy(vv, v)
	if b.err = bk.Put(kk, vv); b.err != nil {
		return
	}
	if b.bytes += len(k) + len(v); b.bytes >= txnBytes {
		b.commit()
	}
}

func (b *batchWriter) commit() {
	if b.tx != nil && b.err == nil {
		b.err = b.tx.Commit()
	} else if b.tx != nil {
		_ = b.tx.Rollback()
	}
	b.tx, b.bytes, b.buckets = nil, 0, nil
	for i := range b.chunks {
		b.chunks[i] = b.chunks[i][:0]
	}
	b.used = 0
}

// tableWriter collects one table's records into chunks.
type tableWriter struct {
	w      *batchWriter
	bucket []byte
	chunk  []byte
	rec    []byte // the record being encoded (appendX(t.rec[:0], ...))
	n      int
	no     uint64
}

func (t *tableWriter) add() {
	t.chunk = binary.AppendUvarint(t.chunk, uint64(len(t.rec)))
	t.chunk = append(t.chunk, t.rec...)
	if t.n++; t.n == chunkRecords {
		t.flush()
	}
}

func (t *tableWriter) flush() {
	if t.n == 0 {
		return
	}
	var k [8]byte
	binary.BigEndian.PutUint64(k[:], t.no)
	t.w.put(t.bucket, k[:], t.chunk)
	t.chunk, t.n = t.chunk[:0], 0
	t.no++
}

var marshalDet = proto.MarshalOptions{Deterministic: true}

func (sn *snapshot) fill(db *bolt.DB) error {
	s := sn.st
	if err := db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketMeta, bucketNamespaces, bucketSemaphores, bucketLeases, bucketHolders, bucketMembers, bucketTokens, bucketLocks, bucketLockHolds,
			bucketWaitGroups, bucketJobs, bucketBarriers, bucketArrivals} {
			if _, err := tx.CreateBucket(b); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		return err
	}
	w := &batchWriter{db: db}
	meta, err := marshalDet.Marshal(&fsmpb.SnapshotMeta{Format: snapshotFormat, LastNow: s.lastNow, LastToken: s.lastToken,
		HoldSeq: s.holdSeq, LastIndex: s.lastIndex, Limits: limitsProto(s.limits), AclBootstrapped: s.aclBootstrapped})
	if err != nil {
		return err
	}
	// Each transaction writes into one bucket only: bbolt spills the
	// buckets a transaction touched in map order, so two in one
	// transaction would lay the file out differently from one write to the
	// next, and the same state would not always give the same bytes.
	w.put(bucketMeta, keyMeta, meta)
	w.commit()
	t := &tableWriter{w: w, bucket: bucketNamespaces, chunk: make([]byte, 0, 128<<10)}
	table := func(bucket []byte) {
		t.flush()
		w.commit()
		t.bucket, t.no = bucket, 0
	}
	s.namespaces.Scan(func(n nsRec) bool {
		t.rec = appendNS(t.rec[:0], n)
		t.add()
		return w.err == nil
	})
	table(bucketSemaphores)
	s.semaphores.Scan(func(x semRec) bool {
		t.rec = appendSem(t.rec[:0], x)
		t.add()
		return w.err == nil
	})
	table(bucketLeases)
	s.leases.Scan(func(l leaseRec) bool {
		t.rec = appendLease(t.rec[:0], l)
		t.add()
		return w.err == nil
	})
	table(bucketHolders)
	s.holders.Scan(func(h *holderRec) bool {
		t.rec = appendHolder(t.rec[:0], *h)
		t.add()
		return w.err == nil
	})
	table(bucketMembers)
	s.members.Scan(func(m memberRec) bool {
		t.rec = appendMember(t.rec[:0], m)
		t.add()
		return w.err == nil
	})
	table(bucketTokens)
	s.tokens.Scan(func(x tokenRec) bool {
		t.rec, err = appendToken(t.rec[:0], x)
		if err != nil {
			w.err = err
			return false
		}
		t.add()
		return w.err == nil
	})
	table(bucketLocks)
	s.locks.Scan(func(r lockRec) bool {
		t.rec = appendLock(t.rec[:0], r)
		t.add()
		return w.err == nil
	})
	table(bucketLockHolds)
	s.lockHolds.Scan(func(h *lockHold) bool {
		t.rec = appendLockHold(t.rec[:0], h)
		t.add()
		return w.err == nil
	})
	s.writeWaits(t, table, w)
	t.flush()
	w.commit()
	return w.err
}
