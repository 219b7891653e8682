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

	bolt "go.etcd.io/bbolt"
	"google.golang.org/protobuf/proto"

	fsmpb "github.com/grackle-coord/grackle/proto/grackle/fsm/v1"
)

// The snapshot reader: Restore decodes a snapshot (format in
// snapshot_codec.go) straight into a new state, then checks it.

// eachRecord calls fn for every record of a table, in order. Chunks must
// be numbered 0, 1, 2, ... with no gap.
func eachRecord(tx *bolt.Tx, bucket []byte, fn func(rec []byte) error) error {
	return eachChunk(tx, bucket, func(chunk []byte) error { return splitChunk(chunk, fn) })
}

// eachChunk calls fn for every chunk of a table (the records of a chunk
// are split by splitChunk), in order.
func eachChunk(tx *bolt.Tx, bucket []byte, fn func(chunk []byte) error) error {
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
		if err := fn(v); err != nil {
			return fmt.Errorf("bucket %q chunk %d: %w", bucket, no, err)
		}
		no++
		return nil
	})
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
	f.published()
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
	// A page graph bbolt would walk for ever (a cycle) is refused first:
	// that is an endless loop growing memory, which no recover() catches.
	if err := checkPageGraph(tmp.Name()); err != nil {
		return nil, fmt.Errorf("corrupt snapshot database: %w", err)
	}
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
	return st, nil
}

// slab hands out the elements of arrays of slabSize values: a restore
// makes one allocation per slabSize leases (or holders) instead of one
// each, and the garbage collector marks one object instead of slabSize.
// The price: an array is freed only once every element in it is
// unreferenced, so leases removed after a restore free their memory only
// when the other leases of their slab are gone too. What slabs can hold
// back is bounded by the restored state's size (only Restore allocates
// from them); slabSize keeps it small in practice, a lease pinning at most
// slabSize-1 others' records.
type slab[T any] struct{ free []T }

const slabSize = 128 // 128 idents (96 B) and 128 holders (80 B) are exact size classes

// take returns n (at most slabSize) zero values, capacity n.
func (s *slab[T]) take(n int) []T {
	if len(s.free) < n {
		s.free = make([]T, max(slabSize, n))
	}
	x := s.free[:n:n]
	s.free = s.free[n:]
	return x
}

func (s *slab[T]) next() *T { return &s.take(1)[0] }

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
// increasing); the derived counts and indexes are built here from the
// records, so they agree with the tables by construction, and every
// invariant of the records themselves (what check verifies that the
// construction does not give) is checked as they are read: a record that
// breaks one is refused with an error naming it. Restore does not run the
// whole check again: on a 1M-lease state it was 4 million hash lookups,
// half the CPU of a restore. (TestRestoreRandomDamage checks that every
// snapshot restored passes check.)
// Strings shared by records (a namespace's name, a semaphore's name, a
// lease id) are stored once: records point at the owner's copy, found from
// the record's bytes without allocating. Leases and holders are allocated
// in slabs (see slab).
func loadState(tx *bolt.Tx, st *state) error {
	mb := tx.Bucket(bucketMeta)
	if mb == nil {
		return fmt.Errorf("bucket %q missing", bucketMeta)
	}
	var meta fsmpb.SnapshotMeta
	if err := proto.Unmarshal(mb.Get(keyMeta), &meta); err != nil {
		return fmt.Errorf("meta: %w", err)
	}
	if meta.Format < minSnapshotFormat || meta.Format > snapshotFormat {
		return fmt.Errorf("snapshot format %d, this server reads formats %d..%d", meta.Format, minSnapshotFormat, snapshotFormat)
	}
	withLocks := meta.Format >= 3
	st.lastNow, st.lastToken, st.holdSeq, st.lastIndex = meta.LastNow, meta.LastToken, meta.HoldSeq, meta.LastIndex
	st.aclBootstrapped = meta.AclBootstrapped
	if err := loadTokens(tx, st); err != nil {
		return err
	}
	if lm := meta.Limits; lm != nil {
		st.limits = limitsFrom(lm)
		if err := st.limits.Validate(); err != nil {
			return fmt.Errorf("meta: limits: %s", err.(*Error).Msg)
		}
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
		if err := checkNSRecord(n); err != nil {
			return err
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
		if err := checkSemRecord(x); err != nil {
			return err
		}
		if len(sems) > 0 && !lessSem(sems[len(sems)-1], x) {
			return fmt.Errorf("semaphore %q/%q out of order", x.ns, x.name)
		}
		ns.semCount++
		sems = append(sems, x)
		return nil
	}); err != nil {
		return err
	}

	// Leases, in (ns, id) order: the idents here, then the lookup index and
	// the trees (by buildLeaseTrees) from procs, which also carries an inline
	// prefix of the process id for sorting the process index.
	nLeases := recordsBound(tx, bucketLeases)
	procs := make([]procSortKey, 0, nLeases)
	var prev *leaseIdent
	var idents slab[leaseIdent]
	// The ids and process ids of a chunk's leases share one string: the
	// chunk's records are decoded into pending (their strings as offsets
	// into text), then text becomes one string that they slice.
	type pendingLease struct {
		ns                *nsRec
		idEnd, procEnd    int
		ttl, created, exp int64
		md                map[string]string
	}
	var pending []pendingLease
	var text []byte
	flush := func() error {
		if len(pending) == 0 {
			return nil
		}
		all := string(text)
		start := 0
		for _, p := range pending {
			li := idents.next()
			*li = leaseIdent{ns: p.ns.name, id: all[start:p.idEnd], proc: all[p.idEnd:p.procEnd],
				liveTTL: p.ttl, liveCreated: p.created, liveExp: p.exp, md: p.md}
			start = p.procEnd
			if prev != nil && (prev.ns > li.ns || prev.ns == li.ns && prev.id >= li.id) {
				return fmt.Errorf("lease %q/%q out of order", li.ns, li.id)
			}
			if err := checkLeaseRecord(li.ns, li.id, li.proc, p.ttl, p.created, p.exp, p.md); err != nil {
				return err
			}
			if IsLockLeaseID(li.id) {
				p.ns.lockLeaseCount++
			} else {
				p.ns.leaseCount++
			}
			p0, p1 := prefix128(li.proc)
			procs = append(procs, procSortKey{p0: p0, p1: p1, li: li})
			prev = li
		}
		pending, text = pending[:0], text[:0]
		return nil
	}
	if err := eachChunk(tx, bucketLeases, func(chunk []byte) error {
		if err := splitChunk(chunk, func(rec []byte) error {
			d := dec{b: rec}
			nsName := d.bytes()
			ns, ok := nsOf(nsName)
			if d.err == nil && !ok {
				return fmt.Errorf("lease in missing namespace %q", nsName)
			}
			id, proc := d.bytes(), d.bytes()
			ttl, created, exp := d.varint(), d.varint(), d.varint()
			var md map[string]string
			if withLocks {
				md = d.md()
			}
			if err := d.end(); err != nil {
				return fmt.Errorf("lease record: %w", err)
			}
			text = append(text, id...)
			idEnd := len(text)
			text = append(text, proc...)
			pending = append(pending, pendingLease{ns: ns, idEnd: idEnd, procEnd: len(text), ttl: ttl, created: created, exp: exp, md: md})
			return nil
		}); err != nil {
			return err
		}
		return flush()
	}); err != nil {
		return err
	}
	pending, text = nil, nil
	// The lookup index, one map per namespace, each sized exactly (procs
	// is grouped by namespace).
	for i := 0; i < len(procs); {
		j := i + 1
		for j < len(procs) && procs[j].li.ns == procs[i].li.ns {
			j++
		}
		for _, p := range procs[i:j] {
			st.leaseIdx.put(p.li, j-i)
		}
		i = j
	}
	// The lease trees are built on another core while the holders are read
	// below. That goroutine reads only the idents' immutable fields and
	// live record mirror; the holders loop writes only their holds.
	var leaseErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		leaseErr = buildLeaseTrees(st, procs)
	}()
	defer func() { <-done }()

	// Holders, in (ns, sem, seq) order: a merge walk over the semaphores
	// (also in (ns, name) order) finds each holder's semaphore.
	si := 0
	holders := make([]*holderRec, 0, recordsBound(tx, bucketHolders))
	var holderSlab slab[holderRec]
	var holdSlab slab[leaseHold]
	// The fencing tokens of the current semaphore's holders (a token used
	// twice on one semaphore would fence nothing).
	var tokens tokenSet
	var tokensOf *semRec
	endTokens := func() error {
		if tok, dup := tokens.duplicate(); dup {
			return fmt.Errorf("semaphore %s: two holders with fencing token %d", semLabel(tokensOf.ns, tokensOf.name), tok)
		}
		return nil
	}
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
		if n := len(holders); n > 0 && holders[n-1].ns == sem.ns && holders[n-1].sem == sem.name && holders[n-1].seq >= seq {
			return fmt.Errorf("holder %d of %q/%q out of order", seq, sem.ns, sem.name)
		}
		li := st.leaseIdx.get(sem.ns, string(leaseID))
		if li == nil {
			return fmt.Errorf("holder of missing lease %q", leaseID)
		}
		if err := checkHoldFields(seq, token, st.holdSeq, st.lastToken, md); err != nil {
			return fmt.Errorf("semaphore %s: holder %d: %w", semLabel(sem.ns, sem.name), seq, err)
		}
		if _, dup := li.findHold(sem.name); dup {
			return fmt.Errorf("lease %q holds %q/%q twice", li.id, sem.ns, sem.name)
		}
		if IsLockLeaseID(li.id) {
			return fmt.Errorf("semaphore %s: held by lock lease %q", semLabel(sem.ns, sem.name), li.id)
		}
		holds, err := holdSum(*sem, sem.holds, weight)
		if err != nil {
			return err
		}
		sem.holds = holds
		sem.holders++
		if tokensOf != sem {
			if tokensOf != nil {
				if err := endTokens(); err != nil {
					return err
				}
			}
			tokens.reset()
			tokensOf = sem
		}
		tokens.add(token)
		h := holderSlab.next()
		*h = holderRec{ns: sem.ns, sem: sem.name, seq: seq, lease: li, weight: weight, lockedAt: lockedAt, token: token, md: md}
		holders = append(holders, h)
		if li.holds == nil {
			// Most leases hold one semaphore: their holds slice is one
			// slot of a slab (capacity 1, so a second hold reallocates).
			hs := holdSlab.take(1)
			hs[0] = h
			li.holds = hs
		} else {
			li.setHold(h)
		}
		return nil
	}); err != nil {
		return err
	}
	if tokensOf != nil {
		if err := endTokens(); err != nil {
			return err
		}
	}
	// The tables are loaded from their records, which are in order
	// (checked above, and again by loadSorted).
	if err := st.holders.buildFromSorted(lessHolder, holders); err != nil {
		return fmt.Errorf("holders: %w", err)
	}
	holders = nil
	if err := st.namespaces.buildFromSorted(lessNS, nss); err != nil {
		return fmt.Errorf("namespaces: %w", err)
	}
	if err := st.semaphores.buildFromSorted(lessSem, sems); err != nil {
		return fmt.Errorf("semaphores: %w", err)
	}
	st.semIdx = make(map[SemKey]semRec, len(sems))
	for _, x := range sems {
		st.semIdx[SemKey{x.ns, x.name}] = x
	}
	<-done
	if leaseErr != nil {
		return leaseErr
	}
	if withLocks {
		if err := loadLocks(tx, st); err != nil {
			return err
		}
	}
	if meta.Format >= 4 {
		if err := loadWaits(tx, st); err != nil {
			return err
		}
	}
	var lastM string
	return eachRecord(tx, bucketMembers, func(rec []byte) error {
		d := dec{b: rec}
		m := memberRec{id: d.str(), raftAddr: d.str(), grpcAddr: d.str()}
		if d.err == nil && len(d.b) > 0 {
			if d.uvarint() != 1 {
				return fmt.Errorf("member %q: bad voter flag", m.id)
			}
			m.voter = true
		}
		if err := d.end(); err != nil {
			return fmt.Errorf("member record: %w", err)
		}
		if err := checkMemberRecord(m); err != nil {
			return err
		}
		if st.members.Len() > 0 && lastM >= m.id {
			return fmt.Errorf("member %q out of order", m.id)
		}
		lastM = m.id
		st.members.Set(m)
		return nil
	})
}

// buildLeaseTrees loads the leases, expiry and process trees in order
// from procs (in lease order, grouped by namespace), which it sorts for
// the process index; the prefix keeps most comparisons from touching other
// memory.
func buildLeaseTrees(st *state, procs []procSortKey) error {
	leases := make([]leaseRec, len(procs))
	for i, p := range procs {
		li := p.li
		leases[i] = leaseRec{leaseIdent: li, ttl: li.liveTTL, createdAt: li.liveCreated, expiresAt: li.liveExp}
	}
	if err := st.leases.buildFromSorted(lessLease, leases); err != nil {
		return fmt.Errorf("leases: %w", err)
	}
	leases = nil
	// The expiry index is ordered by (expires_at, ns, id): a stable sort
	// by expires_at of the leases in (ns, id) order.
	exp := make([]expiryKey, len(procs))
	for i, p := range procs {
		exp[i] = expiryKey{at: p.li.liveExp, leaseIdent: p.li}
	}
	if !slices.IsSortedFunc(exp, func(a, b expiryKey) int { return cmp.Compare(a.at, b.at) }) {
		slices.SortStableFunc(exp, func(a, b expiryKey) int { return cmp.Compare(a.at, b.at) })
	}
	if err := loadSorted(st.expiry, lessExpiry, exp); err != nil {
		return fmt.Errorf("expiry index: %w", err)
	}
	exp = nil
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
	byProc := make([]procKey, len(procs))
	for i, p := range procs {
		byProc[i] = procKey{p.li}
	}
	if err := loadSorted(st.byProc, lessProc, byProc); err != nil {
		return fmt.Errorf("process index: %w", err)
	}
	return nil
}
