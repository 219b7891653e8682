package fsm

import (
	"cmp"
	"encoding/binary"
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

const snapshotFormat = 1

var (
	bucketMeta       = []byte("meta")
	bucketNamespaces = []byte("namespaces")
	bucketSemaphores = []byte("semaphores")
	bucketLeases     = []byte("leases")
	bucketHolders    = []byte("holders")
	bucketMembers    = []byte("members")
	keyMeta          = []byte("meta")
)

// putsPerTxn bounds the dirty pages one bbolt transaction keeps in memory.
const putsPerTxn = 250_000

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

// batchWriter spreads puts over transactions of putsPerTxn. bbolt keeps
// the key and value slices of a put until the transaction commits, so they
// are carved out of arena chunks that are dropped at each commit (instead
// of two allocations per record).
type batchWriter struct {
	db      *bolt.DB
	tx      *bolt.Tx
	buckets map[string]*bolt.Bucket
	arena   []byte
	puts    int
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

var (
	marshalDet    = proto.MarshalOptions{Deterministic: true}
	marshalCached = proto.MarshalOptions{Deterministic: true, UseCachedSize: true} // right after Size
)

func (b *batchWriter) put(bucket, k []byte, m proto.Message) {
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
	v := b.grab(marshalDet.Size(m))
	v, err := marshalCached.MarshalAppend(v[:0], m)
	if err != nil {
		b.err = err
		return
	}
	if b.err = bk.Put(kk, v); b.err != nil {
		return
	}
	if b.puts++; b.puts >= putsPerTxn {
		b.commit()
	}
}

func (b *batchWriter) commit() {
	if b.tx != nil && b.err == nil {
		b.err = b.tx.Commit()
	} else if b.tx != nil {
		_ = b.tx.Rollback()
	}
	b.tx, b.puts, b.buckets, b.arena = nil, 0, nil, nil
}

func key(parts ...string) []byte {
	n := 0
	for _, p := range parts {
		n += len(p) + 1
	}
	k := make([]byte, 0, n+8)
	for i, p := range parts {
		if i > 0 {
			k = append(k, 0)
		}
		k = append(k, p...)
	}
	return k
}

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
	w.put(bucketMeta, keyMeta, &fsmpb.SnapshotMeta{Format: snapshotFormat, LastNow: s.lastNow, LastToken: s.lastToken,
		HoldSeq: s.holdSeq, LastIndex: s.lastIndex, Limits: limitsProto(s.limits)})
	s.namespaces.Ascend(func(n nsRec) bool {
		w.put(bucketNamespaces, key(n.name), &fsmpb.NamespaceRecord{Name: n.name, Description: n.desc, Metadata: n.md,
			Version: n.version, CreatedAt: n.createdAt, UpdatedAt: n.updatedAt})
		return w.err == nil
	})
	s.semaphores.Ascend(func(x semRec) bool {
		w.put(bucketSemaphores, key(x.ns, x.name), &fsmpb.SemaphoreRecord{NamespaceName: x.ns, Name: x.name, Description: x.desc,
			Permits: x.permits, Metadata: x.md, Version: x.version, CreatedAt: x.createdAt, UpdatedAt: x.updatedAt, LastActivityAt: x.lastActivity})
		return w.err == nil
	})
	s.leases.Ascend(func(l leaseRec) bool {
		w.put(bucketLeases, key(l.ns, l.id), &fsmpb.LeaseRecord{NamespaceName: l.ns, LeaseId: l.id, ProcessId: l.proc,
			TtlSeconds: l.ttl, CreatedAt: l.createdAt, ExpiresAt: l.expiresAt})
		return w.err == nil
	})
	s.holders.Ascend(func(h holderRec) bool {
		k := binary.BigEndian.AppendUint64(append(key(h.ns, h.sem), 0), h.seq)
		w.put(bucketHolders, k, &fsmpb.HolderRecord{NamespaceName: h.ns, SemaphoreName: h.sem, Seq: h.seq, LeaseId: h.leaseID,
			Weight: h.weight, LockedAt: h.lockedAt, FencingToken: h.token, Metadata: h.md})
		return w.err == nil
	})
	s.members.Ascend(func(m memberRec) bool {
		w.put(bucketMembers, key(m.id), &fsmpb.MemberRecord{NodeId: m.id, RaftAddress: m.raftAddr, GrpcAddress: m.grpcAddr})
		return w.err == nil
	})
	w.commit()
	return w.err
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

// eachRecord decodes every record of a bucket, in key order, into one
// reused message.
func eachRecord[M proto.Message](tx *bolt.Tx, bucket []byte, m M, fn func(M) error) error {
	b := tx.Bucket(bucket)
	if b == nil {
		return fmt.Errorf("bucket %q missing", bucket)
	}
	return b.ForEach(func(k, v []byte) error {
		proto.Reset(m)
		if err := proto.Unmarshal(v, m); err != nil {
			return fmt.Errorf("bucket %q key %q: %w", bucket, k, err)
		}
		return fn(m)
	})
}

type procSortKey struct {
	pfx uint64
	li  *leaseIdent
}

// prefix64 is the first 8 bytes of s, big-endian, zero-padded: a < b for
// prefixes implies s < t, and equal prefixes say nothing.
func prefix64(s string) uint64 {
	var b [8]byte
	copy(b[:], s)
	return binary.BigEndian.Uint64(b[:])
}

// loadState fills an empty state from a snapshot. Records are taken as
// they come; the derived counts and indexes are built here, and what does
// not add up is left for check (which Restore runs next) to refuse.
// Strings shared by records (a namespace's name, a semaphore's name, a
// lease id) are stored once: records point at the owner's copy.
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
		return fmt.Errorf("snapshot format %d, this server reads %d", meta.Format, snapshotFormat)
	}
	st.lastNow, st.lastToken, st.holdSeq, st.lastIndex = meta.LastNow, meta.LastToken, meta.HoldSeq, meta.LastIndex
	if lm := meta.Limits; lm != nil {
		st.limits = Limits{lm.MaxNamespaces, lm.MaxSemaphoresPerNamespace, lm.MaxLeasesPerNamespace,
			lm.MaxHoldersPerSemaphore, lm.MaxPermits, lm.MaxTtlSeconds}
	}
	var nss []nsRec
	nsPos := map[string]int{}
	if err := eachRecord(tx, bucketNamespaces, &fsmpb.NamespaceRecord{}, func(r *fsmpb.NamespaceRecord) error {
		nsPos[r.Name] = len(nss)
		nss = append(nss, nsRec{name: r.Name, desc: r.Description, md: copyMetadata(r.Metadata), version: r.Version,
			createdAt: r.CreatedAt, updatedAt: r.UpdatedAt})
		return nil
	}); err != nil {
		return err
	}
	nsOf := func(name string) (*nsRec, bool) {
		i, ok := nsPos[name]
		if !ok {
			return nil, false
		}
		return &nss[i], true
	}
	var semKeys []SemKey
	if err := eachRecord(tx, bucketSemaphores, &fsmpb.SemaphoreRecord{}, func(r *fsmpb.SemaphoreRecord) error {
		ns, ok := nsOf(r.NamespaceName)
		if !ok {
			return fmt.Errorf("semaphore %q in missing namespace %q", r.Name, r.NamespaceName)
		}
		ns.semCount++
		x := semRec{ns: ns.name, name: r.Name, desc: r.Description, md: copyMetadata(r.Metadata),
			permits: r.Permits, version: r.Version, createdAt: r.CreatedAt, updatedAt: r.UpdatedAt, lastActivity: r.LastActivityAt}
		k := SemKey{x.ns, x.name}
		st.semIdx[k] = x
		semKeys = append(semKeys, k)
		return nil
	}); err != nil {
		return err
	}
	// The process index is filled last, from keys sorted first (with an
	// inline prefix of the process id, so that most comparisons touch no
	// other memory): inserting in order is much cheaper than at random.
	var procs []procSortKey
	if err := eachRecord(tx, bucketLeases, &fsmpb.LeaseRecord{}, func(r *fsmpb.LeaseRecord) error {
		ns, ok := nsOf(r.NamespaceName)
		if !ok {
			return fmt.Errorf("lease %q in missing namespace %q", r.LeaseId, r.NamespaceName)
		}
		ns.leaseCount++
		li := &leaseIdent{ns: ns.name, id: r.LeaseId, proc: r.ProcessId,
			liveTTL: r.TtlSeconds, liveCreated: r.CreatedAt, liveExp: r.ExpiresAt}
		st.leaseIdx[nsLeaseKey{li.ns, li.id}] = li
		st.leases.ReplaceOrInsert(leaseRec{leaseIdent: li, ttl: r.TtlSeconds, createdAt: r.CreatedAt, expiresAt: r.ExpiresAt})
		st.expiry.ReplaceOrInsert(expiryKey{at: r.ExpiresAt, leaseIdent: li})
		procs = append(procs, procSortKey{pfx: prefix64(li.proc), li: li})
		return nil
	}); err != nil {
		return err
	}
	slices.SortFunc(procs, func(a, b procSortKey) int {
		if c := strings.Compare(a.li.ns, b.li.ns); c != 0 {
			return c
		}
		if a.pfx != b.pfx {
			return cmp.Compare(a.pfx, b.pfx)
		}
		if c := strings.Compare(a.li.proc, b.li.proc); c != 0 {
			return c
		}
		return strings.Compare(a.li.id, b.li.id)
	})
	for _, p := range procs {
		st.byProc.ReplaceOrInsert(procKey{p.li})
	}
	procs = nil
	if err := eachRecord(tx, bucketHolders, &fsmpb.HolderRecord{}, func(r *fsmpb.HolderRecord) error {
		k := SemKey{r.NamespaceName, r.SemaphoreName}
		sem, ok := st.semIdx[k]
		if !ok {
			return fmt.Errorf("holder of missing semaphore %q/%q", r.NamespaceName, r.SemaphoreName)
		}
		li := st.identOf(r.NamespaceName, r.LeaseId)
		if li == nil {
			return fmt.Errorf("holder of missing lease %q", r.LeaseId)
		}
		sem.holds += r.Weight
		sem.holders++
		st.semIdx[k] = sem
		st.addHolder(holderRec{ns: sem.ns, sem: sem.name, seq: r.Seq, leaseID: li.id,
			weight: r.Weight, lockedAt: r.LockedAt, token: r.FencingToken, md: copyMetadata(r.Metadata)}, li)
		return nil
	}); err != nil {
		return err
	}
	for _, n := range nss {
		st.namespaces.ReplaceOrInsert(n)
	}
	for _, k := range semKeys {
		st.semaphores.ReplaceOrInsert(st.semIdx[k])
	}
	return eachRecord(tx, bucketMembers, &fsmpb.MemberRecord{}, func(r *fsmpb.MemberRecord) error {
		st.members.ReplaceOrInsert(memberRec{id: r.NodeId, raftAddr: r.RaftAddress, grpcAddr: r.GrpcAddress})
		return nil
	})
}
