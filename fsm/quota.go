package fsm

import (
	"fmt"

	"github.com/tidwall/btree"
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
// records. The tree is not embedded: every change goes through the methods
// below, which keep the count, and reads through the few that forward.
type table[T any] struct {
	tree  *btree.BTreeG[T]
	size  func(T) int64
	bytes int64
}

func newTable[T any](less func(a, b T) bool, size func(T) int64) *table[T] {
	return &table[T]{tree: newTree(btreeDegree, less), size: size}
}

// Set stores x, replacing an equal record; it returns the replaced one.
func (t *table[T]) Set(x T) (T, bool) {
	old, had := t.tree.Set(x)
	if had {
		t.bytes -= t.size(old)
	}
	t.bytes += t.size(x)
	return old, had
}

// Delete removes the record equal to x and returns it.
func (t *table[T]) Delete(x T) (T, bool) {
	old, had := t.tree.Delete(x)
	if had {
		t.bytes -= t.size(old)
	}
	return old, had
}

// Clear empties the table.
func (t *table[T]) Clear() {
	t.tree.Clear()
	t.bytes = 0
}

// Copy is the tree's copy-on-write copy with the same size. It changes the
// tree's identity (btree.BTreeG.Copy), so it is a write: callers hold the
// FSM's write lock.
func (t *table[T]) Copy() *table[T] {
	return &table[T]{tree: t.tree.Copy(), size: t.size, bytes: t.bytes}
}

// Bytes is the accounted size of the table's records.
func (t *table[T]) Bytes() int64 { return t.bytes }

// Get finds the record equal to key.
func (t *table[T]) Get(key T) (T, bool) { return t.tree.Get(key) }

// Len is the number of records.
func (t *table[T]) Len() int { return t.tree.Len() }

// Min is the first record.
func (t *table[T]) Min() (T, bool) { return t.tree.Min() }

// Scan visits every record in order until iter returns false.
func (t *table[T]) Scan(iter func(T) bool) { t.tree.Scan(iter) }

// Ascend visits the records from pivot on, in order, until iter returns
// false.
func (t *table[T]) Ascend(pivot T, iter func(T) bool) { t.tree.Ascend(pivot, iter) }

// Descend visits the records from pivot back, in reverse order, until iter
// returns false.
func (t *table[T]) Descend(pivot T, iter func(T) bool) { t.tree.Descend(pivot, iter) }

// buildFromSorted fills the empty table from records in strictly increasing
// order (loadSorted) and counts them.
func (t *table[T]) buildFromSorted(less func(a, b T) bool, items []T) error {
	if err := loadSorted(t.tree, less, items); err != nil {
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
	t.tree.Scan(func(x T) bool {
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
