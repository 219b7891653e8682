package fsm

import (
	"fmt"

	"github.com/grackle-coord/grackle/internal/btree"
)

// The state quota (Limits.MaxStateBytes) bounds an accounted size of the
// state, not the heap: every replica must decide a write the same way, and
// the heap differs between a replica that replayed the log and one that
// restored a snapshot. The accounted size is a pure function of the records
// in the twelve persisted tables: each table keeps the sum of recordSize
// over its records, adjusted by every insert, replace and delete (table's
// methods), and recounted when a restore fills a table in bulk. Two states
// with the same records have the same size, however they got there.
//
// Derived indexes (lease, semaphore, token and lock lookups, the by-process
// and expiry trees, timers, arrival sets, counts) are not counted on their
// own: recordOverhead covers them roughly.

const (
	// recordOverhead is charged once per stored record, for its fixed-size
	// fields, its tree slot and its entries in the derived indexes. 160
	// makes a semaphore lease with one hold account about the 375 bytes of
	// heap BenchmarkHeapPerLease measures for it, every index included.
	recordOverhead = 160
	// metadataEntryOverhead is charged per metadata entry besides its key
	// and value bytes (a map slot: two string headers).
	metadataEntryOverhead = 32
)

// ReasonStateQuota marks a write refused because the state reached its
// quota (the same string as apierr.StateQuota).
const ReasonStateQuota = "STATE_QUOTA"

func metadataSize(md map[string]string) int64 {
	n := int64(0)
	for k, v := range md { // a sum: the order does not matter
		n += int64(len(k)+len(v)) + metadataEntryOverhead
	}
	return n
}

func strSize(ss ...string) int64 {
	n := int64(0)
	for _, s := range ss {
		n += int64(len(s))
	}
	return n
}

// The size of one record of each table. Each reads only what the record
// stores (for a lease and a hold, the immutable fields of the lease's
// ident), so a record's size never changes while it is stored.
func nsSize(x nsRec) int64 {
	return recordOverhead + strSize(x.name, x.desc) + metadataSize(x.md)
}

func semSize(x semRec) int64 {
	return recordOverhead + strSize(x.ns, x.name, x.desc) + metadataSize(x.md)
}

func holderSize(x *holderRec) int64 {
	return recordOverhead + strSize(x.ns, x.sem) + metadataSize(x.md)
}

func leaseSize(x leaseRec) int64 {
	return recordOverhead + strSize(x.ns, x.id, x.proc) + metadataSize(x.md)
}

func memberSize(x memberRec) int64 {
	return recordOverhead + strSize(x.id, x.raftAddr, x.grpcAddr)
}

func tokenSize(x tokenRec) int64 {
	return recordOverhead + strSize(x.id, x.hash, x.role, x.ns, x.desc)
}

func lockSize(x lockRec) int64 { return recordOverhead + strSize(x.ns, x.name) }

func lockHoldSize(x *lockHold) int64 {
	return recordOverhead + strSize(x.ns, x.name) + metadataSize(x.md)
}

func wgSize(x wgRec) int64 {
	return recordOverhead + strSize(x.ns, x.name, x.desc) + metadataSize(x.md)
}

func jobSize(x jobRec) int64 {
	return recordOverhead + strSize(x.ns, x.wg, x.id) + metadataSize(x.md)
}

func barSize(x barRec) int64 {
	return recordOverhead + strSize(x.ns, x.name, x.desc) + metadataSize(x.md)
}

func arrivalSize(x arrivalRec) int64 {
	return recordOverhead + strSize(x.ns, x.bar, x.proc) + metadataSize(x.md)
}

// table is a persisted table: a B-tree that keeps the accounted size of its
// records. Its mutating methods shadow the tree's, so every change through
// them is counted; reads are the tree's own.
type table[T any] struct {
	*btree.BTreeG[T]
	size  func(T) int64
	bytes int64
}

func newTable[T any](less btree.LessFunc[T], size func(T) int64) *table[T] {
	return &table[T]{BTreeG: btree.NewG(btreeDegree, less), size: size}
}

func (t *table[T]) ReplaceOrInsert(x T) (T, bool) {
	old, had := t.BTreeG.ReplaceOrInsert(x)
	if had {
		t.bytes -= t.size(old)
	}
	t.bytes += t.size(x)
	return old, had
}

func (t *table[T]) Delete(x T) (T, bool) {
	old, had := t.BTreeG.Delete(x)
	if had {
		t.bytes -= t.size(old)
	}
	return old, had
}

func (t *table[T]) DeleteMin() (T, bool) {
	old, had := t.BTreeG.DeleteMin()
	if had {
		t.bytes -= t.size(old)
	}
	return old, had
}

func (t *table[T]) DeleteMax() (T, bool) {
	old, had := t.BTreeG.DeleteMax()
	if had {
		t.bytes -= t.size(old)
	}
	return old, had
}

func (t *table[T]) Clear(addNodesToFreelist bool) {
	t.BTreeG.Clear(addNodesToFreelist)
	t.bytes = 0
}

// Clone is the tree's copy-on-write clone with the same size.
func (t *table[T]) Clone() *table[T] {
	return &table[T]{BTreeG: t.BTreeG.Clone(), size: t.size, bytes: t.bytes}
}

// Bytes is the accounted size of the table's records.
func (t *table[T]) Bytes() int64 { return t.bytes }

// buildFromSorted fills the empty table from records in strictly increasing
// order (btree.BuildFromSorted) and counts them.
func (t *table[T]) buildFromSorted(less btree.LessFunc[T], items []T) error {
	if err := btree.BuildFromSorted(t.BTreeG, less, items); err != nil {
		return err
	}
	t.bytes = 0
	for _, x := range items {
		t.bytes += t.size(x)
	}
	return nil
}

// count is the size of the table's records, summed afresh.
func (t *table[T]) count() int64 {
	n := int64(0)
	t.BTreeG.Ascend(func(x T) bool {
		n += t.size(x)
		return true
	})
	return n
}

// checkSizes verifies that every table's running total is the size of its
// records (part of check).
func (s *state) checkSizes() error {
	for _, c := range []struct {
		table       string
		kept, count int64
	}{
		{"namespaces", s.namespaces.bytes, s.namespaces.count()}, {"semaphores", s.semaphores.bytes, s.semaphores.count()},
		{"holders", s.holders.bytes, s.holders.count()}, {"leases", s.leases.bytes, s.leases.count()},
		{"members", s.members.bytes, s.members.count()}, {"tokens", s.tokens.bytes, s.tokens.count()},
		{"locks", s.locks.bytes, s.locks.count()}, {"lock holds", s.lockHolds.bytes, s.lockHolds.count()},
		{"wait groups", s.waitGroups.bytes, s.waitGroups.count()}, {"jobs", s.jobs.bytes, s.jobs.count()},
		{"barriers", s.barriers.bytes, s.barriers.count()}, {"arrivals", s.arrivals.bytes, s.arrivals.count()},
	} {
		if c.kept != c.count {
			return fmt.Errorf("state size: the %s table keeps %d bytes, its records account %d", c.table, c.kept, c.count)
		}
	}
	return nil
}

// stateBytes is the accounted size of the state: the sum of its tables'.
func (s *state) stateBytes() int64 {
	return s.namespaces.bytes + s.semaphores.bytes + s.holders.bytes + s.leases.bytes +
		s.members.bytes + s.tokens.bytes + s.locks.bytes + s.lockHolds.bytes +
		s.waitGroups.bytes + s.jobs.bytes + s.barriers.bytes + s.arrivals.bytes
}

// overQuota refuses a write that grows the state once the state has reached
// MaxStateBytes (0 or negative: no bound). The decision reads only
// replicated values (the records and the limits), so every replica makes
// it alike. Writes that shrink the state or keep it the same never call it.
func (s *state) overQuota() *Error {
	max := s.limits.MaxStateBytes
	if max <= 0 {
		return nil
	}
	if used := s.stateBytes(); used >= max {
		e := errf(CodeResourceExhausted, "state quota: the state holds %d bytes, at or over the limit of %d (max_state_bytes); free some with deletes, releases or revokes", used, max)
		e.Reason = ReasonStateQuota
		return e
	}
	return nil
}

// growsOverQuota is overQuota for a write that replaces a record of size
// oldSize with one of size newSize: only growth is refused.
func (s *state) growsOverQuota(oldSize, newSize int64) *Error {
	if newSize <= oldSize {
		return nil
	}
	return s.overQuota()
}
