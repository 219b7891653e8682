package fsm

import (
	"bytes"
	"encoding/binary"
	"errors"

	fsmpb "github.com/grackle-coord/grackle/proto/grackle/fsm/v1"
)

// The snapshot format and the record codec. The writer is in
// snapshot_writer.go, the reader in snapshot_reader.go.
//
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
// Records are in table order; Restore refuses anything else. The tokens
// table's records are TokenRecord protobufs (deterministic marshaling);
// a snapshot without the table has no tokens.
//
// Format 3 (locks): a lease record ends with its metadata (a lock lease's;
// count 0 for a semaphore lease), and two more tables hold the held locks
// ("locks": ns, name, locked_at, last_activity_at) and their holds
// ("lockholds": ns, name, seq, lease id, exclusive 0/1, locked_at, fencing
// token, metadata), in (ns, name) and (ns, name, seq) order. Restore reads
// formats 2 and 3; it writes 3.

// Format 4 (wait groups and barriers): four more tables, see
// waits_snapshot.go. Restore reads formats 2 to 4; it writes 4.
const snapshotFormat = 4

// minSnapshotFormat is the oldest format Restore reads.
const minSnapshotFormat = 2

var (
	bucketMeta       = []byte("meta")
	bucketNamespaces = []byte("namespaces")
	bucketSemaphores = []byte("semaphores")
	bucketLeases     = []byte("leases")
	bucketHolders    = []byte("holders")
	bucketMembers    = []byte("members")
	bucketTokens     = []byte("tokens")    // absent in snapshots older than access control
	bucketLocks      = []byte("locks")     // format 3
	bucketLockHolds  = []byte("lockholds") // format 3

	keyMeta = []byte("meta")
)

// chunkRecords is the number of records in one bbolt value.
const chunkRecords = 1024

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
	b = binary.AppendVarint(b, l.expiresAt)
	return appendMD(b, l.md)
}

func appendLock(b []byte, r lockRec) []byte {
	b = appendStr(appendStr(b, r.ns), r.name)
	b = binary.AppendVarint(b, r.lockedAt)
	return binary.AppendVarint(b, r.lastActivity)
}

func appendLockHold(b []byte, h *lockHold) []byte {
	b = appendStr(appendStr(b, h.ns), h.name)
	b = binary.AppendUvarint(b, h.seq)
	b = appendStr(b, h.lease.id)
	excl := uint64(0)
	if h.excl {
		excl = 1
	}
	b = binary.AppendUvarint(b, excl)
	b = binary.AppendVarint(b, h.lockedAt)
	b = binary.AppendUvarint(b, h.token)
	return appendMD(b, h.md)
}

func appendHolder(b []byte, h holderRec) []byte {
	b = appendStr(appendStr(b, h.ns), h.sem)
	b = binary.AppendUvarint(b, h.seq)
	b = appendStr(b, h.lease.id)
	b = binary.AppendVarint(b, h.weight)
	b = binary.AppendVarint(b, h.lockedAt)
	b = binary.AppendUvarint(b, h.token)
	return appendMD(b, h.md)
}

// appendMember: id, addresses, then a 1 only for a member to be promoted
// (so the records of other members read as they did before the flag).
func appendMember(b []byte, m memberRec) []byte {
	b = appendStr(appendStr(appendStr(b, m.id), m.raftAddr), m.grpcAddr)
	if m.voter {
		b = binary.AppendUvarint(b, 1)
	}
	return b
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
	h := holderRec{ns: d.str(), sem: d.str(), seq: d.uvarint(), lease: &leaseIdent{id: d.str()}, weight: d.varint(),
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

func limitsProto(l Limits) *fsmpb.SetLimits {
	return LimitsCommand(l)
}
