package fsm

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	bolt "go.etcd.io/bbolt"
	"google.golang.org/protobuf/proto"

	fsmpb "github.com/grackle-coord/grackle/proto/grackle/fsm/v1"
)

// genLog makes a random but plausible log of n commands (the generator of
// model_test.go, steered by a model), each stamped with a leader clock.
func genLog(seed int64, n int) []*fsmpb.Command {
	r := rand.New(rand.NewSource(seed))
	m := newModel()
	g := &gen{r: r, m: m}
	clock := epoch
	log := []*fsmpb.Command{cNS("a"), cNS("b"), cSem("a", "s", 4), cSem("a", "t", 3), cSem("b", "s", 5)}
	for i := 0; i < n; i++ {
		var c *fsmpb.Command
		if i < len(log) {
			c = log[i]
		} else {
			c = g.command()
			log = append(log, c)
		}
		if r.Intn(10) == 0 {
			clock += int64(r.Intn(3000)) * int64(time.Millisecond)
		}
		c.Now = clock
		m.apply(uint64(i+1), c)
	}
	return log[:n]
}

func encodeLog(t testing.TB, log []*fsmpb.Command) [][]byte {
	out := make([][]byte, len(log))
	for i, c := range log {
		out[i] = mustEncode(t, c)
	}
	return out
}

// Two FSMs fed the same log, one entry at a time and in raft batches of
// random sizes, give the same results and byte-identical snapshots.
func TestDeterminism(t *testing.T) {
	seed := seedFromEnv(t)
	n := 3000
	if testing.Short() {
		n = 800
	}
	t.Logf("GRACKLE_FSM_SEED=%d", seed)
	r := rand.New(rand.NewSource(seed))
	log := genLog(seed, n)
	data := encodeLog(t, log)
	a := New(Options{TempDir: t.TempDir()})
	b := New(Options{TempDir: t.TempDir()})
	for i := 0; i < n; {
		k := 1 + r.Intn(64)
		if i+k > n {
			k = n - i
		}
		logs := make([]*raft.Log, k)
		for j := range logs {
			logs[j] = &raft.Log{Index: uint64(i + j + 1), Type: raft.LogCommand, Data: data[i+j]}
		}
		outs := b.ApplyBatch(logs)
		for j := 0; j < k; j++ {
			ra := a.ApplyBytes(uint64(i+j+1), data[i+j])
			if resultString(ra) != resultString(outs[j].(*Result)) {
				t.Fatalf("seed %d, entry %d: results differ:\n%s\n%s", seed, i+j+1, resultString(ra), resultString(outs[j].(*Result)))
			}
		}
		i += k
		if r.Intn(8) == 0 || i == n {
			sa, sb := snapshotBytes(t, a), snapshotBytes(t, b)
			if !bytes.Equal(sa, sb) {
				t.Fatalf("seed %d: snapshots differ after entry %d", seed, i)
			}
		}
	}
	if err := a.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
	// The same state written twice gives the same bytes.
	if !bytes.Equal(snapshotBytes(t, a), snapshotBytes(t, a)) {
		t.Fatal("two snapshots of one state differ")
	}
}

// Snapshot at a random point, restore into a fresh FSM, continue both with
// the same commands: identical results and identical snapshots.
func TestSnapshotRestoreContinue(t *testing.T) {
	seed := seedFromEnv(t)
	rounds := 6
	if testing.Short() {
		rounds = 2
	}
	for round := 0; round < rounds; round++ {
		seed := seed + int64(round)
		r := rand.New(rand.NewSource(seed))
		n := 600
		log := genLog(seed, n)
		data := encodeLog(t, log)
		a := New(Options{TempDir: t.TempDir()})
		cut := r.Intn(n)
		for i := 0; i < cut; i++ {
			a.ApplyBytes(uint64(i+1), data[i])
		}
		snap := snapshotBytes(t, a)
		c := New(Options{TempDir: t.TempDir()})
		// c has a state of its own before the restore: it must be replaced.
		c.ApplyCommand(1, cNS("zzz"))
		if err := restoreBytes(c, snap); err != nil {
			t.Fatalf("seed %d: restore: %v", seed, err)
		}
		if dumpState(a) != dumpState(c) || a.AppliedIndex() != c.AppliedIndex() || a.LastNow() != c.LastNow() {
			t.Fatalf("seed %d: restored state differs", seed)
		}
		if !bytes.Equal(snap, snapshotBytes(t, c)) {
			t.Fatalf("seed %d: a restored state snapshots differently", seed)
		}
		for i := cut; i < n; i++ {
			ra, rc := a.ApplyBytes(uint64(i+1), data[i]), c.ApplyBytes(uint64(i+1), data[i])
			if resultString(ra) != resultString(rc) {
				t.Fatalf("seed %d, entry %d after a restore at %d:\n%s\n%s", seed, i+1, cut, resultString(ra), resultString(rc))
			}
		}
		if !bytes.Equal(snapshotBytes(t, a), snapshotBytes(t, c)) {
			t.Fatalf("seed %d: snapshots differ after continuing", seed)
		}
		if err := c.CheckInvariants(); err != nil {
			t.Fatal(err)
		}
	}
}

type memSink struct {
	bytes.Buffer
	closed, cancelled bool
}

func (s *memSink) ID() string    { return "mem" }
func (s *memSink) Cancel() error { s.cancelled = true; return nil }
func (s *memSink) Close() error  { s.closed = true; return nil }

var _ raft.SnapshotSink = (*memSink)(nil)

// raft's Snapshot is a point-in-time copy: commands applied after it do
// not leak into what Persist writes later.
func TestSnapshotIsPointInTime(t *testing.T) {
	log := genLog(42, 800)
	f := New(Options{TempDir: t.TempDir()})
	for i, c := range log[:400] {
		f.ApplyCommand(uint64(i+1), c)
	}
	want := snapshotBytes(t, f)
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range log[400:] {
		f.ApplyCommand(uint64(i+401), c)
	}
	var sink memSink
	if err := snap.Persist(&sink); err != nil {
		t.Fatal(err)
	}
	snap.Release()
	if !sink.closed || sink.cancelled {
		t.Fatalf("sink closed=%v cancelled=%v", sink.closed, sink.cancelled)
	}
	if !bytes.Equal(sink.Bytes(), want) {
		t.Fatal("Persist wrote a state other than the one at Snapshot time")
	}
	if bytes.Equal(want, snapshotBytes(t, f)) {
		t.Fatal("test is vacuous: the later commands changed nothing")
	}
	// A failing persist cancels the sink.
	g := New(Options{TempDir: filepath.Join(t.TempDir(), "missing-dir")})
	snap, _ = g.Snapshot()
	var bad memSink
	if err := snap.Persist(&bad); err == nil || !bad.cancelled {
		t.Fatalf("persist into a missing temp dir: %v, cancelled=%v", err, bad.cancelled)
	}
}

// snapshotHWM is the size of the data a bbolt snapshot needs (its high
// water mark); bytes after it are free space.
func snapshotHWM(t *testing.T, b []byte) int64 {
	p := filepath.Join(t.TempDir(), "s.db")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	db, err := bolt.Open(p, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int64
	db.View(func(tx *bolt.Tx) error { n = tx.Size(); return nil })
	return n
}

// editSnapshot rewrites a valid snapshot through bbolt (to make one that
// is well-formed as a file but wrong as a state).
func editSnapshot(t *testing.T, b []byte, edit func(tx *bolt.Tx) error) []byte {
	p := filepath.Join(t.TempDir(), "s.db")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	db, err := bolt.Open(p, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(edit); err != nil {
		t.Fatal(err)
	}
	db.Close()
	out, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// bigState builds a state of a few hundred records of every kind.
func bigState(t testing.TB) *FSM {
	h := newHarness(t)
	h.check = false
	for _, ns := range []string{"a", "b", "c"} {
		h.ok(cNSFull(ns, "namespace "+ns, md("team", ns)))
		for i := 0; i < 40; i++ {
			h.ok(cSemFull(ns, fmt.Sprintf("sem-%03d", i), "d", 10, md("i", fmt.Sprint(i))))
		}
		for i := 0; i < 150; i++ {
			h.ok(cLease(ns, lid(i), fmt.Sprintf("host-%d", i%7), int64(10+i%50)))
			h.ok(cAcqFull(ns, fmt.Sprintf("sem-%03d", i%40), lid(i), 1+int64(i%2), false, md("job", fmt.Sprint(i))))
			h.ok(cAcq(ns, fmt.Sprintf("sem-%03d", (i*7)%40), lid(i), 1))
		}
	}
	if err := h.f.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
	return h.f
}

// chunkRecordsOf splits a chunk value into copies of its records.
func chunkRecordsOf(t *testing.T, v []byte) [][]byte {
	var recs [][]byte
	if err := splitChunk(v, func(rec []byte) error {
		recs = append(recs, append([]byte(nil), rec...))
		return nil
	}); err != nil || len(recs) < 2 {
		t.Fatalf("chunk of %d records: %v", len(recs), err)
	}
	return recs
}

// joinRecords is the chunk value of recs.
func joinRecords(recs [][]byte) []byte {
	var v []byte
	for _, r := range recs {
		v = append(binary.AppendUvarint(v, uint64(len(r))), r...)
	}
	return v
}

// A corrupt or truncated snapshot is an error, and the FSM keeps its state.
func TestRestoreCorrupt(t *testing.T) {
	src := bigState(t)
	good := snapshotBytes(t, src)
	hwm := snapshotHWM(t, good)
	if c := src.Counts(); c.Leases == 0 || c.Holders == 0 {
		t.Fatalf("source state too thin: %+v", c)
	}
	t.Logf("snapshot %d bytes, %d used", len(good), hwm)

	page := int64(os.Getpagesize())
	cases := map[string][]byte{
		"empty":       {},
		"garbage":     bytes.Repeat([]byte("not a bolt file"), 1000),
		"meta zeroed": append(make([]byte, 2*page), good[2*page:]...),
	}
	for _, n := range []int64{1, page, 2 * page, 2*page + 1, 3 * page, hwm / 2, hwm - page, hwm - 1} {
		cases[fmt.Sprint("truncated to ", n)] = good[:n]
	}
	// Every data page's header overwritten, one at a time.
	for p := int64(2); p*page < hwm; p++ {
		c := append([]byte(nil), good...)
		for i := int64(0); i < 16; i++ {
			c[p*page+i] = 0xa5
		}
		cases[fmt.Sprint("page ", p, " header")] = c
	}
	// Well-formed files that are not a valid state.
	cases["format unknown"] = editSnapshot(t, good, func(tx *bolt.Tx) error {
		raw, _ := proto.Marshal(&fsmpb.SnapshotMeta{Format: snapshotFormat + 1})
		return tx.Bucket(bucketMeta).Put(keyMeta, raw)
	})
	cases["format 1"] = editSnapshot(t, good, func(tx *bolt.Tx) error {
		raw, _ := proto.Marshal(&fsmpb.SnapshotMeta{Format: 1})
		return tx.Bucket(bucketMeta).Put(keyMeta, raw)
	})
	cases["bucket missing"] = editSnapshot(t, good, func(tx *bolt.Tx) error { return tx.DeleteBucket(bucketLeases) })
	cases["record not decodable"] = editSnapshot(t, good, func(tx *bolt.Tx) error {
		k, _ := tx.Bucket(bucketHolders).Cursor().First()
		return tx.Bucket(bucketHolders).Put(k, []byte{0xff, 0xff})
	})
	cases["holder of a missing lease"] = editSnapshot(t, good, func(tx *bolt.Tx) error {
		// Drop the first lease record from its chunk.
		b := tx.Bucket(bucketLeases)
		k, v := b.Cursor().First()
		recs := chunkRecordsOf(t, v)
		return b.Put(k, joinRecords(recs[1:]))
	})
	cases["holds above permits"] = editSnapshot(t, good, func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketHolders)
		k, v := b.Cursor().First()
		recs := chunkRecordsOf(t, v)
		h, err := decodeHolder(recs[0])
		if err != nil {
			return err
		}
		h.weight = 1 << 40
		recs[0] = appendHolder(nil, h)
		return b.Put(k, joinRecords(recs))
	})
	// Records that decode but break an invariant that Restore checks as it
	// reads (it does not run the whole check afterwards).
	editHolders := func(edit func(hs []holderRec)) []byte {
		return editSnapshot(t, good, func(tx *bolt.Tx) error {
			b := tx.Bucket(bucketHolders)
			k, v := b.Cursor().First()
			recs := chunkRecordsOf(t, v)
			hs := make([]holderRec, len(recs))
			for i, r := range recs {
				var err error
				if hs[i], err = decodeHolder(r); err != nil {
					return err
				}
			}
			if hs[0].ns != hs[1].ns || hs[0].sem != hs[1].sem {
				t.Fatal("the first two holders are not of one semaphore")
			}
			edit(hs)
			for i := range recs {
				recs[i] = appendHolder(nil, hs[i])
			}
			return b.Put(k, joinRecords(recs))
		})
	}
	cases["holder of weight 0"] = editHolders(func(hs []holderRec) { hs[0].weight = 0 })
	cases["fencing token beyond the counter"] = editHolders(func(hs []holderRec) { hs[0].token = 1 << 60 })
	cases["holder sequence beyond the counter"] = editHolders(func(hs []holderRec) { hs[1].seq = 1 << 60 })
	cases["a lease holding one semaphore twice"] = editHolders(func(hs []holderRec) { hs[1].lease = hs[0].lease })

	// The victim has a state of its own that must survive every failure.
	newVictim := func() *FSM {
		v := New(Options{TempDir: t.TempDir()})
		for i, c := range genLog(8, 300) {
			v.ApplyCommand(uint64(i+1), c)
		}
		return v
	}
	victim := newVictim()
	before, beforeSnap, idx := dumpState(victim), snapshotBytes(t, victim), victim.AppliedIndex()
	srcDump := dumpState(src)
	harmless := 0
	for name, b := range cases {
		if err := restoreBytes(victim, b); err == nil {
			// A page bbolt no longer uses (free space) may be damaged
			// without harm: then the state read back must be exact.
			if strings.HasSuffix(name, " header") && dumpState(victim) == srcDump {
				harmless++
				victim = newVictim()
				continue
			}
			t.Fatalf("%s: restore succeeded", name)
		}
		if dumpState(victim) != before || victim.AppliedIndex() != idx {
			t.Fatalf("%s: a failed restore changed the state", name)
		}
	}
	t.Logf("%d cases, %d of them damage to free pages", len(cases), harmless)
	if !bytes.Equal(beforeSnap, snapshotBytes(t, victim)) {
		t.Fatal("a failed restore changed the snapshot")
	}
	// Still a working state machine.
	if r := victim.ApplyCommand(idx+1, &fsmpb.Command{Now: victim.LastNow(), Op: &fsmpb.Command_CreateNamespace{CreateNamespace: &fsmpb.CreateNamespace{Name: "after"}}}); r.Err != nil {
		t.Fatal(r.Err)
	}
	// And the good snapshot still restores.
	if err := restoreBytes(victim, good); err != nil || dumpState(victim) != dumpState(src) {
		t.Fatalf("good snapshot: %v", err)
	}
}

// Random byte damage never crashes a restore: it is an error (state kept)
// or, when the damage hit free space or a value that is still valid, a
// consistent state. (bbolt has no checksums on data pages; raft's snapshot
// store checks the file's CRC before Restore is called.)
func TestRestoreRandomDamage(t *testing.T) {
	good := snapshotBytes(t, bigState(t))
	hwm := snapshotHWM(t, good)
	seed := seedFromEnv(t)
	r := rand.New(rand.NewSource(seed))
	n := 400
	if testing.Short() || raceEnabled {
		n = 120
	}
	victim := New(Options{TempDir: t.TempDir()})
	victim.ApplyCommand(1, cNS("victim"))
	before := dumpState(victim)
	var failed, ok int
	for i := 0; i < n; i++ {
		c := append([]byte(nil), good...)
		for k := 0; k <= r.Intn(4); k++ {
			c[r.Int63n(hwm)] ^= byte(1 + r.Intn(255))
		}
		g := New(Options{TempDir: t.TempDir()})
		if err := restoreBytes(g, c); err != nil {
			failed++
		} else {
			ok++
			if err := g.CheckInvariants(); err != nil {
				t.Fatalf("seed %d: restored an inconsistent state: %v", seed, err)
			}
		}
		if i%50 == 0 {
			if err := restoreBytes(victim, c); err != nil && dumpState(victim) != before {
				t.Fatalf("seed %d: a failed restore changed the state", seed)
			} else if err == nil {
				victim = New(Options{TempDir: t.TempDir()})
				victim.ApplyCommand(1, cNS("victim"))
			}
		}
	}
	t.Logf("seed %d: %d damaged snapshots refused, %d restored consistently", seed, failed, ok)
}

// A snapshot of several bbolt transactions (more than txnBytes of records,
// so the writer's arena is reused after each commit): restored, it is the
// same state, and it snapshots to the same bytes.
func TestSnapshotManyTransactions(t *testing.T) {
	a := New(Options{TempDir: t.TempDir()})
	benchState(t, a, 2_000, 60_000, true)
	snap := snapshotBytes(t, a)
	if len(snap) < 2*txnBytes {
		t.Fatalf("snapshot of %d bytes: want more than %d to span transactions", len(snap), 2*txnBytes)
	}
	c := New(Options{TempDir: t.TempDir()})
	if err := restoreBytes(c, snap); err != nil {
		t.Fatal(err)
	}
	if dumpState(a) != dumpState(c) {
		t.Fatal("restored state differs")
	}
	if !bytes.Equal(snap, snapshotBytes(t, c)) {
		t.Fatal("a restored state snapshots differently")
	}
	if err := c.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}
