package fsm

import (
	"encoding/binary"
	"fmt"

	bolt "go.etcd.io/bbolt"

	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
)

// Format 4 adds four tables, each in key order:
//
//   - "waitgroups": ns, name, description, metadata, counter, completed,
//     status, expires_at, delete_after_finished_seconds, finished_at,
//     version, created_at, updated_at, last_activity_at;
//   - "jobs": ns, wait group, job id, completed_at, metadata;
//   - "barriers": ns, name, description, metadata, expected, arrived,
//     generation, delete_inactive_after_seconds, version, created_at,
//     updated_at, last_activity_at;
//   - "arrivals": ns, barrier, generation, seq, process id, arrived_at,
//     metadata.
var (
	bucketWaitGroups = []byte("waitgroups")
	bucketJobs       = []byte("jobs")
	bucketBarriers   = []byte("barriers")
	bucketArrivals   = []byte("arrivals")
)

func appendWG(b []byte, w wgRec) []byte {
	b = appendStr(appendStr(appendStr(b, w.ns), w.name), w.desc)
	b = appendMD(b, w.md)
	for _, v := range []int64{w.counter, w.completed, int64(w.status), w.expiresAt, w.deleteAfter, w.finishedAt,
		w.version, w.createdAt, w.updatedAt, w.lastActivity} {
		b = binary.AppendVarint(b, v)
	}
	return b
}

func appendJob(b []byte, j jobRec) []byte {
	b = appendStr(appendStr(appendStr(b, j.ns), j.wg), j.id)
	b = binary.AppendVarint(b, j.completedAt)
	return appendMD(b, j.md)
}

func appendBar(b []byte, x barRec) []byte {
	b = appendStr(appendStr(appendStr(b, x.ns), x.name), x.desc)
	b = appendMD(b, x.md)
	for _, v := range []int64{x.expected, x.arrived, x.generation, x.deleteInactive, x.version, x.createdAt, x.updatedAt, x.lastActivity} {
		b = binary.AppendVarint(b, v)
	}
	return b
}

func appendArrival(b []byte, r arrivalRec) []byte {
	b = appendStr(appendStr(b, r.ns), r.bar)
	b = binary.AppendVarint(b, r.gen)
	b = binary.AppendVarint(b, r.seq)
	b = appendStr(b, r.proc)
	b = binary.AppendVarint(b, r.arrivedAt)
	return appendMD(b, r.md)
}

// writeWaits writes the four tables (snapshot_writer.go's fill).
func (s *state) writeWaits(t *tableWriter, table func([]byte), w *batchWriter) {
	table(bucketWaitGroups)
	s.waitGroups.Scan(func(x wgRec) bool {
		t.rec = appendWG(t.rec[:0], x)
		t.add()
		return w.err == nil
	})
	table(bucketJobs)
	s.jobs.Scan(func(x jobRec) bool {
		t.rec = appendJob(t.rec[:0], x)
		t.add()
		return w.err == nil
	})
	table(bucketBarriers)
	s.barriers.Scan(func(x barRec) bool {
		t.rec = appendBar(t.rec[:0], x)
		t.add()
		return w.err == nil
	})
	table(bucketArrivals)
	s.arrivals.Scan(func(x arrivalRec) bool {
		t.rec = appendArrival(t.rec[:0], x)
		t.add()
		return w.err == nil
	})
}

// loadWaits reads the wait groups, jobs, barriers and arrivals of a
// format-4 snapshot into st (whose namespaces are loaded), checking every
// record, and rebuilds the derived indexes (timers, arrivals by process,
// counts per namespace).
func loadWaits(tx *bolt.Tx, st *state) error {
	for _, b := range [][]byte{bucketWaitGroups, bucketJobs, bucketBarriers, bucketArrivals} {
		if tx.Bucket(b) == nil {
			return fmt.Errorf("bucket %q missing", b)
		}
	}
	nsOf := func(what, ns, name string) (string, error) {
		n, ok := st.getNS(ns)
		if !ok {
			return "", fmt.Errorf("%s %q in missing namespace %q", what, name, ns)
		}
		if err := ValidateName(what+" name", name); err != nil {
			return "", fmt.Errorf("%s in namespace %q: %w", what, ns, err)
		}
		return n.name, nil
	}
	var prevW wgRec
	first := true
	if err := eachRecord(tx, bucketWaitGroups, func(rec []byte) error {
		d := dec{b: rec}
		w := wgRec{ns: d.str(), name: d.str(), desc: d.str(), md: d.md()}
		var status int64
		w.counter, w.completed, status, w.expiresAt, w.deleteAfter, w.finishedAt = d.varint(), d.varint(), d.varint(), d.varint(), d.varint(), d.varint()
		w.version, w.createdAt, w.updatedAt, w.lastActivity = d.varint(), d.varint(), d.varint(), d.varint()
		if err := d.end(); err != nil {
			return fmt.Errorf("wait group record: %w", err)
		}
		ns, err := nsOf("wait group", w.ns, w.name)
		if err != nil {
			return err
		}
		w.ns, w.status = ns, pb.WaitGroupStatus(status)
		active := w.status == pb.WaitGroupStatus_WAIT_GROUP_STATUS_ACTIVE
		switch {
		case w.counter < 1 || w.completed < 0 || w.completed > w.counter:
			return fmt.Errorf("wait group %q/%q: %d jobs completed of counter %d", w.ns, w.name, w.completed, w.counter)
		case status < 1 || status > 3:
			return fmt.Errorf("wait group %q/%q: bad status %d", w.ns, w.name, status)
		case (w.status == pb.WaitGroupStatus_WAIT_GROUP_STATUS_COMPLETED) != (w.completed == w.counter):
			return fmt.Errorf("wait group %q/%q: status %v with %d of %d jobs", w.ns, w.name, w.status, w.completed, w.counter)
		case active != (w.finishedAt == 0):
			return fmt.Errorf("wait group %q/%q: status %v with finished_at %d", w.ns, w.name, w.status, w.finishedAt)
		case w.status == pb.WaitGroupStatus_WAIT_GROUP_STATUS_EXPIRED && (w.expiresAt == 0 || w.finishedAt != w.expiresAt):
			// A group expires at its expires_at (ExpireTimers stores that).
			return fmt.Errorf("wait group %q/%q: expired at %d with expires_at %d", w.ns, w.name, w.finishedAt, w.expiresAt)
		case w.expiresAt < 0 || w.deleteAfter < 0 || w.deleteAfter > MaxKeepSeconds || w.version < 1:
			return fmt.Errorf("wait group %q/%q: expires_at, delete_after_finished_seconds or version out of range", w.ns, w.name)
		case ValidateDescription("description", w.desc) != nil || ValidateMetadata("metadata", w.md) != nil:
			return fmt.Errorf("wait group %q/%q: description or metadata out of bounds", w.ns, w.name)
		}
		if !first && !lessWG(prevW, w) {
			return fmt.Errorf("wait group %q/%q out of order", w.ns, w.name)
		}
		first, prevW = false, w
		st.putWG(w)
		return nil
	}); err != nil {
		return err
	}
	var prevJ jobRec
	jobCount := map[barKey]int64{}
	first = true
	if err := eachRecord(tx, bucketJobs, func(rec []byte) error {
		d := dec{b: rec}
		j := jobRec{ns: d.str(), wg: d.str(), id: d.str(), completedAt: d.varint(), md: d.md()}
		if err := d.end(); err != nil {
			return fmt.Errorf("job record: %w", err)
		}
		if !first && !lessJob(prevJ, j) {
			return fmt.Errorf("job %q of wait group %q/%q out of order", j.id, j.ns, j.wg)
		}
		first, prevJ = false, j
		w, ok := st.getWG(j.ns, j.wg)
		if !ok {
			return fmt.Errorf("job %q of missing wait group %q/%q", j.id, j.ns, j.wg)
		}
		if err := firstErr(ValidateJobID("job_id", j.id), ValidateMetadata("metadata", j.md)); err != nil {
			return fmt.Errorf("job of wait group %q/%q: %w", j.ns, j.wg, err)
		}
		j.ns, j.wg = w.ns, w.name
		jobCount[barKey{w.ns, w.name}]++
		st.jobs.Set(j)
		return nil
	}); err != nil {
		return err
	}
	var bad error
	st.waitGroups.Scan(func(w wgRec) bool {
		if n := jobCount[barKey{w.ns, w.name}]; n != w.completed {
			bad = fmt.Errorf("wait group %q/%q: %d job records for %d completed jobs", w.ns, w.name, n, w.completed)
			return false
		}
		return true
	})
	if bad != nil {
		return bad
	}

	var prevB barRec
	first = true
	if err := eachRecord(tx, bucketBarriers, func(rec []byte) error {
		d := dec{b: rec}
		b := barRec{ns: d.str(), name: d.str(), desc: d.str(), md: d.md()}
		b.expected, b.arrived, b.generation, b.deleteInactive = d.varint(), d.varint(), d.varint(), d.varint()
		b.version, b.createdAt, b.updatedAt, b.lastActivity = d.varint(), d.varint(), d.varint(), d.varint()
		if err := d.end(); err != nil {
			return fmt.Errorf("barrier record: %w", err)
		}
		ns, err := nsOf("barrier", b.ns, b.name)
		if err != nil {
			return err
		}
		b.ns = ns
		switch {
		case b.expected < 1 || b.arrived < 0 || b.arrived >= b.expected:
			return fmt.Errorf("barrier %q/%q: %d arrived of %d expected", b.ns, b.name, b.arrived, b.expected)
		case b.generation < 1 || b.deleteInactive < 0 || b.deleteInactive > MaxKeepSeconds || b.version < 1:
			return fmt.Errorf("barrier %q/%q: generation, delete_inactive_after_seconds or version out of range", b.ns, b.name)
		case ValidateDescription("description", b.desc) != nil || ValidateMetadata("metadata", b.md) != nil:
			return fmt.Errorf("barrier %q/%q: description or metadata out of bounds", b.ns, b.name)
		}
		if !first && !lessBar(prevB, b) {
			return fmt.Errorf("barrier %q/%q out of order", b.ns, b.name)
		}
		first, prevB = false, b
		st.putBar(b)
		return nil
	}); err != nil {
		return err
	}
	var prevA arrivalRec
	var lastSeq int64
	current := map[barKey]int64{} // arrivals at each barrier's current generation
	first = true
	if err := eachRecord(tx, bucketArrivals, func(rec []byte) error {
		d := dec{b: rec}
		r := arrivalRec{ns: d.str(), bar: d.str(), gen: d.varint(), seq: d.varint(), proc: d.str(), arrivedAt: d.varint(), md: d.md()}
		if err := d.end(); err != nil {
			return fmt.Errorf("arrival record: %w", err)
		}
		if !first && !lessArrival(prevA, r) {
			return fmt.Errorf("arrival %d of barrier %q/%q out of order", r.seq, r.ns, r.bar)
		}
		samePrefix := !first && prevA.ns == r.ns && prevA.bar == r.bar && prevA.gen == r.gen
		first, prevA = false, r
		b, ok := st.getBar(r.ns, r.bar)
		if !ok {
			return fmt.Errorf("arrival of %q at missing barrier %q/%q", r.proc, r.ns, r.bar)
		}
		if r.gen < 1 || (r.gen != b.generation && r.gen != b.generation-1) {
			return fmt.Errorf("barrier %q/%q at generation %d: arrival at generation %d", r.ns, r.bar, b.generation, r.gen)
		}
		want := int64(1)
		if samePrefix {
			want = lastSeq + 1
		}
		if r.seq != want {
			return fmt.Errorf("barrier %q/%q generation %d: arrival %d where %d was due", r.ns, r.bar, r.gen, r.seq, want)
		}
		lastSeq = r.seq
		if err := firstErr(ValidateProcessID("process_id", r.proc), ValidateMetadata("metadata", r.md)); err != nil {
			return fmt.Errorf("arrival at barrier %q/%q: %w", r.ns, r.bar, err)
		}
		k := arrivalKey{ns: b.ns, bar: b.name, proc: r.proc, gen: r.gen}
		if _, dup := st.arrived[k]; dup {
			return fmt.Errorf("barrier %q/%q generation %d: process %q arrived twice", r.ns, r.bar, r.gen, r.proc)
		}
		r.ns, r.bar = b.ns, b.name
		if r.gen == b.generation {
			current[barKey{b.ns, b.name}]++
		}
		st.arrived[k] = struct{}{}
		st.arrivals.Set(r)
		return nil
	}); err != nil {
		return err
	}
	st.barriers.Scan(func(b barRec) bool {
		if current[barKey{b.ns, b.name}] != b.arrived {
			bad = fmt.Errorf("barrier %q/%q: %d arrived but %d arrival records at generation %d", b.ns, b.name, b.arrived, current[barKey{b.ns, b.name}], b.generation)
			return false
		}
		return true
	})
	return bad
}

type barKey struct{ ns, name string }
