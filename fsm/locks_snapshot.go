package fsm

import (
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// loadLocks reads the locks and their holds of a format-3 snapshot into st,
// whose namespaces and leases are loaded. Every record is checked: names
// valid and in order, each hold's lease a live lock lease of its
// namespace, no lease holding a lock twice, no two conflicting holds, each
// held lock with a record and each record with a hold, counters within the
// snapshot's.
func loadLocks(tx *bolt.Tx, st *state) error {
	if tx.Bucket(bucketLocks) == nil || tx.Bucket(bucketLockHolds) == nil {
		return fmt.Errorf("bucket %q or %q missing", bucketLocks, bucketLockHolds)
	}
	recs := map[LockKey]lockRec{}
	var prev lockRec
	first := true
	if err := eachRecord(tx, bucketLocks, func(rec []byte) error {
		d := dec{b: rec}
		r := lockRec{ns: d.str(), name: d.str(), lockedAt: d.varint(), lastActivity: d.varint()}
		if err := d.end(); err != nil {
			return fmt.Errorf("lock record: %w", err)
		}
		if err := ValidateLockName("lock name", r.name); err != nil {
			return fmt.Errorf("lock record %q: %w", r.ns, err)
		}
		ns, ok := st.getNS(r.ns)
		if !ok {
			return fmt.Errorf("lock %q in missing namespace %q", r.name, r.ns)
		}
		r.ns = ns.name
		if !first && !lessLock(prev, r) {
			return fmt.Errorf("lock %q/%q out of order", r.ns, r.name)
		}
		first, prev = false, r
		recs[LockKey{r.ns, r.name}] = r
		return nil
	}); err != nil {
		return err
	}
	var last *lockHold
	// The fencing tokens of the current lock's holds (shared holds of one
	// lock must not share a token).
	var tokens tokenSet
	endTokens := func() error {
		if tok, dup := tokens.duplicate(); dup {
			return fmt.Errorf("lock %q: two holds with fencing token %d", last.ns+"/"+last.name, tok)
		}
		return nil
	}
	if err := eachRecord(tx, bucketLockHolds, func(rec []byte) error {
		d := dec{b: rec}
		nsName, name, seq, leaseID := d.str(), d.str(), d.uvarint(), d.bytes()
		excl, lockedAt, token, md := d.uvarint(), d.varint(), d.uvarint(), d.md()
		if err := d.end(); err != nil {
			return fmt.Errorf("lock hold record: %w", err)
		}
		r, ok := recs[LockKey{nsName, name}]
		if !ok {
			return fmt.Errorf("hold %d of lock %q/%q, which has no lock record", seq, nsName, name)
		}
		if excl > 1 {
			return fmt.Errorf("hold %d of lock %q/%q: bad exclusive flag %d", seq, nsName, name, excl)
		}
		h := &lockHold{ns: r.ns, name: r.name, seq: seq, excl: excl == 1, lockedAt: lockedAt, token: token, md: md}
		if last != nil && !lessLockHold(last, h) {
			return fmt.Errorf("hold %d of lock %q/%q out of order", seq, nsName, name)
		}
		if last != nil && (last.ns != h.ns || last.name != h.name) {
			if err := endTokens(); err != nil {
				return err
			}
			tokens.reset()
		}
		tokens.add(token)
		last = h
		li := st.leaseIdx.get(r.ns, string(leaseID))
		if li == nil || !IsLockLeaseID(li.id) {
			return fmt.Errorf("hold %d of lock %q/%q: no lock lease %q", seq, nsName, name, leaseID)
		}
		h.lease = li
		if err := checkHoldFields(seq, token, st.holdSeq, st.lastToken, md); err != nil {
			return fmt.Errorf("lock %q: hold %d: %w", nsName+"/"+name, seq, err)
		}
		if li.lockOf(h.name) != nil {
			return fmt.Errorf("lease %q holds lock %q/%q twice", li.id, nsName, name)
		}
		if live := st.lockLiveOf(h.ns, h.name); live != nil {
			for _, o := range live.holders {
				if o.excl || h.excl {
					return fmt.Errorf("lock %q/%q: conflicting holds of leases %q and %q", nsName, name, o.lease.id, li.id)
				}
			}
		}
		q := lockAsk{ns: h.ns, name: h.name, lease: li.id, li: li, excl: h.excl}
		if r, _ := st.conflict(q, nil, false); r != 0 {
			return fmt.Errorf("lock %q/%q: hold of lease %q conflicts with a hold of another lease (%v)", nsName, name, li.id, r)
		}
		st.putLockHold(h, r)
		return nil
	}); err != nil {
		return err
	}
	if last != nil {
		if err := endTokens(); err != nil {
			return err
		}
	}
	for k := range recs {
		if st.lockLiveOf(k.Namespace, k.Lock) == nil {
			return fmt.Errorf("lock %q/%q has a record but no hold", k.Namespace, k.Lock)
		}
	}
	return nil
}
