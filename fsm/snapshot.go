package fsm

import (
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"runtime/debug"

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
const putsPerTxn = 100_000

type snapshot struct {
	st     *state
	tmpDir string
}

// Snapshot implements raft.FSM: an O(1) copy-on-write clone under the lock.
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.RLock()
	c := f.st.clone()
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

// batchWriter spreads puts over transactions of putsPerTxn.
type batchWriter struct {
	db   *bolt.DB
	tx   *bolt.Tx
	puts int
	err  error
}

func (b *batchWriter) put(bucket, k []byte, m proto.Message) {
	if b.err != nil {
		return
	}
	if b.tx == nil {
		if b.tx, b.err = b.db.Begin(true); b.err != nil {
			return
		}
	}
	v, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		b.err = err
		return
	}
	bk := b.tx.Bucket(bucket)
	bk.FillPercent = 0.95 // keys arrive in order: pack pages
	if b.err = bk.Put(k, v); b.err != nil {
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
	b.tx, b.puts = nil, 0
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

func eachRecord(tx *bolt.Tx, bucket []byte, newMsg func() proto.Message, fn func(proto.Message) error) error {
	b := tx.Bucket(bucket)
	if b == nil {
		return fmt.Errorf("bucket %q missing", bucket)
	}
	return b.ForEach(func(k, v []byte) error {
		m := newMsg()
		if err := proto.Unmarshal(v, m); err != nil {
			return fmt.Errorf("bucket %q key %q: %w", bucket, k, err)
		}
		return fn(m)
	})
}

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
	if err := eachRecord(tx, bucketNamespaces, func() proto.Message { return &fsmpb.NamespaceRecord{} }, func(m proto.Message) error {
		r := m.(*fsmpb.NamespaceRecord)
		st.namespaces.ReplaceOrInsert(nsRec{name: r.Name, desc: r.Description, md: copyMetadata(r.Metadata), version: r.Version,
			createdAt: r.CreatedAt, updatedAt: r.UpdatedAt})
		return nil
	}); err != nil {
		return err
	}
	if err := eachRecord(tx, bucketSemaphores, func() proto.Message { return &fsmpb.SemaphoreRecord{} }, func(m proto.Message) error {
		r := m.(*fsmpb.SemaphoreRecord)
		ns, ok := st.getNS(r.NamespaceName)
		if !ok {
			return fmt.Errorf("semaphore %q in missing namespace %q", r.Name, r.NamespaceName)
		}
		ns.semCount++
		st.namespaces.ReplaceOrInsert(ns)
		st.semaphores.ReplaceOrInsert(semRec{ns: r.NamespaceName, name: r.Name, desc: r.Description, md: copyMetadata(r.Metadata),
			permits: r.Permits, version: r.Version, createdAt: r.CreatedAt, updatedAt: r.UpdatedAt, lastActivity: r.LastActivityAt})
		return nil
	}); err != nil {
		return err
	}
	if err := eachRecord(tx, bucketLeases, func() proto.Message { return &fsmpb.LeaseRecord{} }, func(m proto.Message) error {
		r := m.(*fsmpb.LeaseRecord)
		ns, ok := st.getNS(r.NamespaceName)
		if !ok {
			return fmt.Errorf("lease %q in missing namespace %q", r.LeaseId, r.NamespaceName)
		}
		ns.leaseCount++
		st.namespaces.ReplaceOrInsert(ns)
		st.putLease(leaseRec{ns: r.NamespaceName, id: r.LeaseId, proc: r.ProcessId, ttl: r.TtlSeconds, createdAt: r.CreatedAt, expiresAt: r.ExpiresAt})
		return nil
	}); err != nil {
		return err
	}
	if err := eachRecord(tx, bucketHolders, func() proto.Message { return &fsmpb.HolderRecord{} }, func(m proto.Message) error {
		r := m.(*fsmpb.HolderRecord)
		sem, ok := st.getSem(r.NamespaceName, r.SemaphoreName)
		if !ok {
			return fmt.Errorf("holder of missing semaphore %q/%q", r.NamespaceName, r.SemaphoreName)
		}
		if _, ok := st.getLease(r.NamespaceName, r.LeaseId); !ok {
			return fmt.Errorf("holder of missing lease %q", r.LeaseId)
		}
		sem.holds += r.Weight
		sem.holders++
		st.semaphores.ReplaceOrInsert(sem)
		st.holders.ReplaceOrInsert(holderRec{ns: r.NamespaceName, sem: r.SemaphoreName, seq: r.Seq, leaseID: r.LeaseId,
			weight: r.Weight, lockedAt: r.LockedAt, token: r.FencingToken, md: copyMetadata(r.Metadata)})
		st.leaseHolds.ReplaceOrInsert(leaseHoldKey{ns: r.NamespaceName, leaseID: r.LeaseId, sem: r.SemaphoreName, seq: r.Seq})
		return nil
	}); err != nil {
		return err
	}
	return eachRecord(tx, bucketMembers, func() proto.Message { return &fsmpb.MemberRecord{} }, func(m proto.Message) error {
		r := m.(*fsmpb.MemberRecord)
		st.members.ReplaceOrInsert(memberRec{id: r.NodeId, raftAddr: r.RaftAddress, grpcAddr: r.GrpcAddress})
		return nil
	})
}
