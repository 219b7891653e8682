package fsm

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"slices"
	"strings"

	"github.com/hashicorp/raft"
	bolt "go.etcd.io/bbolt"
	"google.golang.org/protobuf/proto"

	fsmpb "github.com/grackle-coord/grackle/proto/grackle/fsm/v1"
)

// A snapshot is a bbolt database, one bucket per table, written in key
// order from a point-in-time clone. Derived indexes and counts are not
// stored: Restore rebuilds them, so a snapshot cannot disagree with itself.
// The same state always gives the same bytes (same inserts in the same
// order, in the same number of transactions, into a fresh file).
//
// Format 2: the meta bucket holds one SnapshotMeta (protobuf) under "meta".
// Every table bucket holds the table's records in chunks of chunkRecords
// consecutive records (the last chunk may be shorter), keyed by the chunk's
// number (0, 1, 2, ..., 8 bytes big-endian). A chunk's value is its
// records, each a uvarint length followed by the record, in the compact
// encoding of the append* functions below (uvarints, zigzag varints and
// length-prefixed strings; metadata as a count and its pairs sorted by key).
// Records are in table order; Restore refuses anything else.

const snapshotFormat = 2

var (
	bucketMeta       = []byte("meta")
	bucketNamespaces = []byte("namespaces")
	bucketSemaphores = []byte("semaphores")
	bucketLeases     = []byte("leases")
	bucketHolders    = []byte("holders")
	bucketMembers    = []byte("members")
	keyMeta          = []byte("meta")
)

const (
	// chunkRecords is the number of records in one bbolt value.
	chunkRecords = 1024
	// txnBytes bounds the data (and so the dirty pages) one bbolt
	// transaction keeps in memory.
	txnBytes = 32 << 20
)

type snapshot struct {
	st     *state
	tmpDir string
}

// Snapshot implements raft.FSM: an O(1) copy-on-write clone under the lock.
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.RLock()
	c := f.st.persistView()
	f.mu.RUnlock()
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
	db, err := bolt.Open(path, 0o600, &bolt.Options{NoSync: true, NoFreelistSync: false})
	if err != nil {
		return err
	}
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
// so they are carved out of arena chunks that are dropped at each commit.
type batchWriter struct {
	db      *bolt.DB
	tx      *bolt.Tx
	buckets map[string]*bolt.Bucket
	arena   []byte
	bytes   int
	err     error
}

const arenaChunk = 4 << 20

// grab returns n bytes of arena, valid until the next commit.
func (b *batchWriter) grab(n int) []byte {
	if cap(b.arena)-len(b.arena) < n {
		b.arena = make([]byte, 0, max(arenaChunk, n))
	}
	s := b.arena[len(b.arena) : len(b.arena)+n : len(b.arena)+n]
	b.arena = b.arena[:len(b.arena)+n]
	return s
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
	b.tx, b.bytes, b.buckets, b.arena = nil, 0, nil, nil
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
		for _, b := range [][]byte{bucketMeta, bucketNamespaces, bucketSemaphores, bucketLeases, bucketHolders, bucketMembers} {
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
		HoldSeq: s.holdSeq, LastIndex: s.lastIndex, Limits: limitsProto(s.limits)})
	if err != nil {
		return err
	}
	w.put(bucketMeta, keyMeta, meta)
	t := &tableWriter{w: w, bucket: bucketNamespaces, chunk: make([]byte, 0, 128<<10)}
	table := func(bucket []byte) {
		t.flush()
		t.bucket, t.no = bucket, 0
	}
	s.namespaces.Ascend(func(n nsRec) bool {
		t.rec = appendNS(t.rec[:0], n)
		t.add()
		return w.err == nil
	})
	table(bucketSemaphores)
	s.semaphores.Ascend(func(x semRec) bool {
		t.rec = appendSem(t.rec[:0], x)
		t.add()
		return w.err == nil
	})
	table(bucketLeases)
	s.leases.Ascend(func(l leaseRec) bool {
		t.rec = appendLease(t.rec[:0], l)
		t.add()
		return w.err == nil
	})
	table(bucketHolders)
	s.holders.Ascend(func(h holderRec) bool {
		t.rec = appendHolder(t.rec[:0], h)
		t.add()
		return w.err == nil
	})
	table(bucketMembers)
	s.members.Ascend(func(m memberRec) bool {
		t.rec = appendMember(t.rec[:0], m)
		t.add()
		return w.err == nil
	})
	t.flush()
	w.commit()
	return w.err
}

// ---- record encoding ----

func appendStr(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

// appendMD writes metadata as a count and its pairs sorted by key.
func appendMD(b []byte, m map[string]string) []byte {
	b = binary.AppendUvarint(b, uint64(len(m)))
	if len(m) == 0 {
		return b
	}
	for _, k := range sortedKeys(m) {
		b = appendStr(appendStr(b, k), m[k])
	}
	return b
}

func appendNS(b []byte, n nsRec) []byte {
	b = appendStr(appendStr(b, n.name), n.desc)
	b = appendMD(b, n.md)
	b = binary.AppendVarint(b, n.version)
	b = binary.AppendVarint(b, n.createdAt)
	return binary.AppendVarint(b, n.updatedAt)
}

func appendSem(b []byte, x semRec) []byte {
	b = appendStr(appendStr(appendStr(b, x.ns), x.name), x.desc)
	b = binary.AppendVarint(b, x.permits)
	b = appendMD(b, x.md)
	b = binary.AppendVarint(b, x.version)
	b = binary.AppendVarint(b, x.createdAt)
	b = binary.AppendVarint(b, x.updatedAt)
	return binary.AppendVarint(b, x.lastActivity)
}

func appendLease(b []byte, l leaseRec) []byte {
	b = appendStr(appendStr(appendStr(b, l.ns), l.id), l.proc)
	b = binary.AppendVarint(b, l.ttl)
	b = binary.AppendVarint(b, l.createdAt)
	return binary.AppendVarint(b, l.expiresAt)
}

func appendHolder(b []byte, h holderRec) []byte {
	b = appendStr(appendStr(b, h.ns), h.sem)
	b = binary.AppendUvarint(b, h.seq)
	b = appendStr(b, h.leaseID)
	b = binary.AppendVarint(b, h.weight)
	b = binary.AppendVarint(b, h.lockedAt)
	b = binary.AppendUvarint(b, h.token)
	return appendMD(b, h.md)
}

func appendMember(b []byte, m memberRec) []byte {
	return appendStr(appendStr(appendStr(b, m.id), m.raftAddr), m.grpcAddr)
}

var errShort = errors.New("record truncated or malformed")

// dec reads one record; the first error sticks (and every read after it
// returns zero values).
type dec struct {
	b   []byte
	err error
}

func (d *dec) fail() {
	if d.err == nil {
		d.err = errShort
	}
	d.b = nil
}

func (d *dec) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *dec) varint() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.b = d.b[n:]
	return v
}

// bytes returns a length-prefixed string's bytes, not copied.
func (d *dec) bytes() []byte {
	n := d.uvarint()
	if n > uint64(len(d.b)) {
		d.fail()
		return nil
	}
	s := d.b[:n:n]
	d.b = d.b[n:]
	return s
}

func (d *dec) str() string { return string(d.bytes()) }

func (d *dec) md() map[string]string {
	n := d.uvarint()
	if n == 0 || d.err != nil {
		return nil
	}
	if n > uint64(len(d.b))/2 { // each pair takes at least two bytes
		d.fail()
		return nil
	}
	m := make(map[string]string, n)
	var last []byte
	for i := uint64(0); i < n && d.err == nil; i++ {
		k := d.bytes()
		if i > 0 && bytes.Compare(last, k) >= 0 {
			d.err = errors.New("metadata keys out of order")
			return nil
		}
		last = k
		m[string(k)] = d.str()
	}
	if d.err != nil {
		return nil
	}
	return m
}

// end reports the record's error, or an error if bytes are left over.
func (d *dec) end() error {
	if d.err == nil && len(d.b) != 0 {
		d.err = errors.New("trailing bytes in record")
	}
	return d.err
}

// decodeHolder decodes a holder record with fresh strings (tests).
func decodeHolder(rec []byte) (holderRec, error) {
	d := dec{b: rec}
	h := holderRec{ns: d.str(), sem: d.str(), seq: d.uvarint(), leaseID: d.str(), weight: d.varint(),
		lockedAt: d.varint(), token: d.uvarint(), md: d.md()}
	return h, d.end()
}

// splitChunk calls fn for every record of a chunk value.
func splitChunk(v []byte, fn func(rec []byte) error) error {
	if len(v) == 0 {
		return errors.New("empty chunk")
	}
	for len(v) > 0 {
		n, k := binary.Uvarint(v)
		if k <= 0 || n > uint64(len(v)-k) {
			return errShort
		}
		if err := fn(v[k : k+int(n) : k+int(n)]); err != nil {
			return err
		}
		v = v[k+int(n):]
	}
	return nil
}

// eachRecord calls fn for every record of a table, in order. Chunks must
// be numbered 0, 1, 2, ... with no gap.
func eachRecord(tx *bolt.Tx, bucket []byte, fn func(rec []byte) error) error {
	b := tx.Bucket(bucket)
	if b == nil {
		return fmt.Errorf("bucket %q missing", bucket)
	}
	var no uint64
	return b.ForEach(func(k, v []byte) error {
		if len(k) != 8 || binary.BigEndian.Uint64(k) != no {
			return fmt.Errorf("bucket %q: chunk key %x, want chunk %d", bucket, k, no)
		}
		if v == nil {
			return fmt.Errorf("bucket %q: chunk %d is a bucket", bucket, no)
		}
		if err := splitChunk(v, fn); err != nil {
			return fmt.Errorf("bucket %q chunk %d: %w", bucket, no, err)
		}
		no++
		return nil
	})
}

func limitsProto(l Limits) *fsmpb.SetLimits {
	return &fsmpb.SetLimits{MaxNamespaces: l.MaxNamespaces, MaxSemaphoresPerNamespace: l.MaxSemaphoresPerNamespace,
		MaxLeasesPerNamespace: l.MaxLeasesPerNamespace, MaxHoldersPerSemaphore: l.MaxHoldersPerSemaphore,
		MaxPermits: l.MaxPermits, MaxTtlSeconds: l.MaxTTLSeconds}
}

// Restore implements raft.FSM: it reads a snapshot into a new state and
// swaps it in under the lock. On any error the current state is kept.
func (f *FSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	st, err := readSnapshot(rc, f.tmpDir)
	if err != nil {
		return fmt.Errorf("fsm: restore snapshot: %w", err)
	}
	f.mu.Lock()
	f.st = st
	f.mu.Unlock()
	return nil
}

func readSnapshot(r io.Reader, tmpDir string) (st *state, err error) {
	tmp, err := os.CreateTemp(tmpDir, "grackle-restore-*.db")
	if err != nil {
		return nil, err
	}
	defer os.Remove(tmp.Name())
	size, err := io.Copy(tmp, r)
	if err != nil {
		tmp.Close()
		return nil, err
	}
	if err := tmp.Close(); err != nil {
		return nil, err
	}
	// bbolt trusts its file: a corrupt page fails one of its assertions
	// (a panic) and a page past the end of a truncated file faults on the
	// mmap. Either must be an error here, never a crash of the node.
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if p := recover(); p != nil {
			st, err = nil, fmt.Errorf("corrupt snapshot database: %v", p)
		}
	}()
	db, err := bolt.Open(tmp.Name(), 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("not a snapshot database: %w", err)
	}
	defer db.Close()
	st = newState()
	err = db.View(func(tx *bolt.Tx) error {
		if tx.Size() > size {
			return fmt.Errorf("truncated snapshot: %d bytes, the database needs %d", size, tx.Size())
		}
		return loadState(tx, st)
	})
	if err != nil {
		return nil, err
	}
	if err := st.check(); err != nil {
		return nil, fmt.Errorf("snapshot is inconsistent: %w", err)
	}
	return st, nil
}

type procSortKey struct {
	p0, p1 uint64 // prefix128 of li.proc
	li     *leaseIdent
}

// prefix128 is the first 16 bytes of s, big-endian, zero-padded: a < b
// for prefixes implies s < t, and equal prefixes say nothing.
func prefix128(s string) (uint64, uint64) {
	var b [16]byte
	copy(b[:], s)
	return binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:])
}

// recordsBound estimates the number of records of a table from above (for
// presizing): chunks hold at most chunkRecords records. It is also capped
// at 1/32 of the file, so that a corrupt chunk key cannot make it huge (an
// estimate too small only costs some map growth).
func recordsBound(tx *bolt.Tx, bucket []byte) int {
	b := tx.Bucket(bucket)
	if b == nil {
		return 0
	}
	k, _ := b.Cursor().Last()
	if len(k) != 8 {
		return 0
	}
	n := binary.BigEndian.Uint64(k)
	if n >= uint64(tx.Size()) {
		return 0
	}
	return int(min((n+1)*chunkRecords, uint64(tx.Size())/32))
}

// loadState fills an empty state from a snapshot. Records are taken as
// they come, and must come in table order (each table strictly
// increasing); the derived counts and indexes are built here, and what
// does not add up is left for check (which Restore runs next) to refuse.
// Strings shared by records (a namespace's name, a semaphore's name, a
// lease id) are stored once: records point at the owner's copy, found from
// the record's bytes without allocating.
func loadState(tx *bolt.Tx, st *state) error {
	mb := tx.Bucket(bucketMeta)
	if mb == nil {
		return fmt.Errorf("bucket %q missing", bucketMeta)
	}
	var meta fsmpb.SnapshotMeta
	if err := proto.Unmarshal(mb.Get(keyMeta), &meta); err != nil {
		return fmt.Errorf("meta: %w", err)
	}
	if meta.Format != snapshotFormat {
		return fmt.Errorf("snapshot format %d, this server reads only format %d", meta.Format, snapshotFormat)
	}
	st.lastNow, st.lastToken, st.holdSeq, st.lastIndex = meta.LastNow, meta.LastToken, meta.HoldSeq, meta.LastIndex
	if lm := meta.Limits; lm != nil {
		st.limits = Limits{lm.MaxNamespaces, lm.MaxSemaphoresPerNamespace, lm.MaxLeasesPerNamespace,
			lm.MaxHoldersPerSemaphore, lm.MaxPermits, lm.MaxTtlSeconds}
	}

	// Namespaces, in name order.
	var nss []nsRec
	nsPos := map[string]int{}
	if err := eachRecord(tx, bucketNamespaces, func(rec []byte) error {
		d := dec{b: rec}
		n := nsRec{name: d.str(), desc: d.str(), md: d.md(), version: d.varint(), createdAt: d.varint(), updatedAt: d.varint()}
		if err := d.end(); err != nil {
			return fmt.Errorf("namespace record: %w", err)
		}
		if len(nss) > 0 && nss[len(nss)-1].name >= n.name {
			return fmt.Errorf("namespace %q out of order", n.name)
		}
		nsPos[n.name] = len(nss)
		nss = append(nss, n)
		return nil
	}); err != nil {
		return err
	}
	// nsOf finds a namespace by name; records come grouped by namespace,
	// so the last one found is tried first.
	lastNS := -1
	nsOf := func(name []byte) (*nsRec, bool) {
		if lastNS >= 0 && nss[lastNS].name == string(name) {
			return &nss[lastNS], true
		}
		i, ok := nsPos[string(name)]
		if !ok {
			return nil, false
		}
		lastNS = i
		return &nss[i], true
	}

	// Semaphores, in (ns, name) order.
	sems := make([]semRec, 0, recordsBound(tx, bucketSemaphores))
	if err := eachRecord(tx, bucketSemaphores, func(rec []byte) error {
		d := dec{b: rec}
		nsName := d.bytes()
		ns, ok := nsOf(nsName)
		if d.err == nil && !ok {
			return fmt.Errorf("semaphore in missing namespace %q", nsName)
		}
		x := semRec{name: d.str(), desc: d.str(), permits: d.varint(), md: d.md(),
			version: d.varint(), createdAt: d.varint(), updatedAt: d.varint(), lastActivity: d.varint()}
		if err := d.end(); err != nil {
			return fmt.Errorf("semaphore record: %w", err)
		}
		x.ns = ns.name
		if len(sems) > 0 && !lessSem(sems[len(sems)-1], x) {
			return fmt.Errorf("semaphore %q/%q out of order", x.ns, x.name)
		}
		ns.semCount++
		sems = append(sems, x)
		return nil
	}); err != nil {
		return err
	}

	// Leases, in (ns, id) order: the idents and the lookup index here, the
	// trees (by buildLeaseTrees) from procs, which also carries an inline
	// prefix of the process id for sorting the process index.
	nLeases := recordsBound(tx, bucketLeases)
	st.leaseIdx = make(map[nsLeaseKey]*leaseIdent, nLeases)
	procs := make([]procSortKey, 0, nLeases)
	var prev *leaseIdent
	var scratch []byte
	if err := eachRecord(tx, bucketLeases, func(rec []byte) error {
		d := dec{b: rec}
		nsName := d.bytes()
		ns, ok := nsOf(nsName)
		if d.err == nil && !ok {
			return fmt.Errorf("lease in missing namespace %q", nsName)
		}
		id, proc := d.bytes(), d.bytes()
		ttl, created, exp := d.varint(), d.varint(), d.varint()
		if err := d.end(); err != nil {
			return fmt.Errorf("lease record: %w", err)
		}
		if prev != nil && (prev.ns > ns.name || prev.ns == ns.name && prev.id >= string(id)) {
			return fmt.Errorf("lease %q/%q out of order", ns.name, id)
		}
		// id and proc share one allocation (they live and die together).
		scratch = append(append(scratch[:0], id...), proc...)
		s := string(scratch)
		li := &leaseIdent{ns: ns.name, id: s[:len(id)], proc: s[len(id):], liveTTL: ttl, liveCreated: created, liveExp: exp}
		ns.leaseCount++
		st.leaseIdx[nsLeaseKey{li.ns, li.id}] = li
		p0, p1 := prefix128(li.proc)
		procs = append(procs, procSortKey{p0: p0, p1: p1, li: li})
		prev = li
		return nil
	}); err != nil {
		return err
	}
	// The lease trees are built on another core while the holders are read
	// below. That goroutine reads only the idents' immutable fields and
	// live record mirror; the holders loop writes only their holds.
	done := make(chan struct{})
	go func() {
		defer close(done)
		buildLeaseTrees(st, procs)
	}()
	defer func() { <-done }()

	// Holders, in (ns, sem, seq) order: a merge walk over the semaphores
	// (also in (ns, name) order) finds each holder's semaphore.
	si := 0
	var last *holderRec
	var lastH holderRec
	if err := eachRecord(tx, bucketHolders, func(rec []byte) error {
		d := dec{b: rec}
		nsName, semName, seq, leaseID := d.bytes(), d.bytes(), d.uvarint(), d.bytes()
		weight, lockedAt, token, md := d.varint(), d.varint(), d.uvarint(), d.md()
		if err := d.end(); err != nil {
			return fmt.Errorf("holder record: %w", err)
		}
		for si < len(sems) && (sems[si].ns < string(nsName) || sems[si].ns == string(nsName) && sems[si].name < string(semName)) {
			si++
		}
		if si == len(sems) || sems[si].ns != string(nsName) || sems[si].name != string(semName) {
			return fmt.Errorf("holder %d of missing semaphore %q/%q (or out of order)", seq, nsName, semName)
		}
		sem := &sems[si]
		if last != nil && last.ns == sem.ns && last.sem == sem.name && last.seq >= seq {
			return fmt.Errorf("holder %d of %q/%q out of order", seq, sem.ns, sem.name)
		}
		li := st.leaseIdx[nsLeaseKey{sem.ns, string(leaseID)}]
		if li == nil {
			return fmt.Errorf("holder of missing lease %q", leaseID)
		}
		sem.holds += weight
		sem.holders++
		lastH = holderRec{ns: sem.ns, sem: sem.name, seq: seq, leaseID: li.id, weight: weight, lockedAt: lockedAt, token: token, md: md}
		last = &lastH
		st.addHolder(lastH, li)
		return nil
	}); err != nil {
		return err
	}
	for _, n := range nss {
		st.namespaces.ReplaceOrInsert(n)
	}
	st.semIdx = make(map[SemKey]semRec, len(sems))
	for _, x := range sems {
		st.semIdx[SemKey{x.ns, x.name}] = x
		st.semaphores.ReplaceOrInsert(x)
	}
	var lastM string
	return eachRecord(tx, bucketMembers, func(rec []byte) error {
		d := dec{b: rec}
		m := memberRec{id: d.str(), raftAddr: d.str(), grpcAddr: d.str()}
		if err := d.end(); err != nil {
			return fmt.Errorf("member record: %w", err)
		}
		if st.members.Len() > 0 && lastM >= m.id {
			return fmt.Errorf("member %q out of order", m.id)
		}
		lastM = m.id
		st.members.ReplaceOrInsert(m)
		return nil
	})
}

// buildLeaseTrees fills the leases, expiry and process trees from procs
// (in lease order, grouped by namespace), which it sorts: inserting the
// process index in order is much cheaper than at random, and the prefix
// keeps most comparisons from touching other memory.
func buildLeaseTrees(st *state, procs []procSortKey) {
	for _, p := range procs {
		li := p.li
		st.leases.ReplaceOrInsert(leaseRec{leaseIdent: li, ttl: li.liveTTL, createdAt: li.liveCreated, expiresAt: li.liveExp})
		st.expiry.ReplaceOrInsert(expiryKey{at: li.liveExp, leaseIdent: li})
	}
	// procs is grouped by namespace already: sort each group by (proc, id).
	for i := 0; i < len(procs); {
		j := i + 1
		for j < len(procs) && procs[j].li.ns == procs[i].li.ns {
			j++
		}
		slices.SortFunc(procs[i:j], func(a, b procSortKey) int {
			if a.p0 != b.p0 {
				return cmp.Compare(a.p0, b.p0)
			}
			if a.p1 != b.p1 {
				return cmp.Compare(a.p1, b.p1)
			}
			if c := strings.Compare(a.li.proc, b.li.proc); c != 0 {
				return c
			}
			return strings.Compare(a.li.id, b.li.id)
		})
		i = j
	}
	for _, p := range procs {
		st.byProc.ReplaceOrInsert(procKey{p.li})
	}
}
