package raftnode

import (
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"github.com/hashicorp/raft-wal/metadb"
	"github.com/hashicorp/raft-wal/types"
)

func startFormat(dir, format string) (*Node, error) {
	return New(Config{NodeID: "n1", DataDir: dir, BindAddr: "127.0.0.1:0", Bootstrap: true, LogStore: format,
		FSM: &raft.MockFSM{}, Logger: hclog.NewNullLogger()})
}

// A new data dir gets the WAL unless told otherwise; a data dir keeps the
// format it was made with whatever the setting says.
func TestLogStoreFormatIsTheDataDirs(t *testing.T) {
	for _, tc := range []struct{ first, second, want string }{
		{"", "", LogStoreWAL},
		{LogStoreBolt, "", LogStoreBolt},
		{LogStoreBolt, LogStoreWAL, LogStoreBolt},
		{LogStoreWAL, LogStoreBolt, LogStoreWAL},
	} {
		dir := t.TempDir()
		for i, f := range []string{tc.first, tc.second} {
			n, err := startFormat(dir, f)
			if err != nil {
				t.Fatalf("start %d (%q): %v", i, f, err)
			}
			if n.LogFormat != tc.want {
				t.Errorf("made with %q, started with %q: format %q, want %q", tc.first, f, n.LogFormat, tc.want)
			}
			must(t, n.Close())
		}
		if _, err := os.Stat(filepath.Join(dir, map[string]string{LogStoreWAL: "raft.db", LogStoreBolt: "wal"}[tc.want])); err == nil {
			t.Errorf("a %s data dir also holds the other format's files", tc.want)
		}
	}
}

func TestLogStoreRefusesUnknownAndMixed(t *testing.T) {
	if _, err := startFormat(t.TempDir(), "rocks"); !errors.Is(err, ErrLogStore) || !strings.Contains(err.Error(), `"wal" or "bolt"`) {
		t.Errorf("unknown format: %v", err)
	}
	dir := t.TempDir()
	n, err := startFormat(dir, LogStoreWAL)
	must(t, err)
	must(t, n.Close())
	must(t, os.WriteFile(filepath.Join(dir, "raft.db"), nil, 0o600))
	if _, err := startFormat(dir, ""); !errors.Is(err, ErrDamagedDataDir) || !strings.Contains(err.Error(), "holds both") {
		t.Errorf("both formats: %v", err)
	}
}

// Two nodes never share a WAL: the second fails, naming the lock, instead
// of hanging on raft-wal's metadata file.
func TestWALDataDirIsLocked(t *testing.T) {
	dir := t.TempDir()
	n, err := startFormat(dir, LogStoreWAL)
	must(t, err)
	defer n.Close()
	if _, err := startFormat(dir, LogStoreWAL); err == nil || !strings.Contains(err.Error(), "another node using this data dir") {
		t.Fatalf("second node on the same dir: %v", err)
	}
}

// A tail segment shorter than its preallocation that holds no commit is
// what a rotation into a full disk leaves: the restart starts it again,
// preallocated, instead of calling the data dir damaged.
func TestWALEmptyShortTailStartsAgain(t *testing.T) {
	dir := t.TempDir()
	n, err := New(Config{NodeID: "n1", DataDir: dir, BindAddr: "127.0.0.1:0", FSM: &raft.MockFSM{}, Logger: hclog.NewNullLogger(), WALSegmentSize: 64 << 10})
	must(t, err)
	must(t, n.Close())
	segs := walFiles(t, dir)
	if len(segs) != 1 {
		t.Fatalf("segments %v, want one", segs)
	}
	must(t, os.Truncate(segs[0], 0))
	n, err = startFormat(dir, "")
	if err != nil {
		t.Fatalf("restart after a failed preallocation: %v", err)
	}
	defer n.Close()
	segs = walFiles(t, dir)
	if len(segs) != 1 {
		t.Fatalf("segments after the restart %v, want one", segs)
	}
	if fi, err := os.Stat(segs[0]); err != nil || fi.Size() < 64<<10 {
		t.Fatalf("the tail was not preallocated again: %v %v", fi.Size(), err)
	}
}

// Entries removed from the head of the log (compaction after a snapshot)
// are not returned any more, even from within the segment that holds the
// new first entry: raft must send a lagging member a snapshot, not replay
// what it compacted.
func TestWALHeadTruncationHidesRemovedEntries(t *testing.T) {
	dir := t.TempDir()
	s, err := openLogStore(dir, LogStoreWAL, 0, hclog.NewNullLogger())
	must(t, err)
	defer s.Close()
	var logs []*raft.Log
	for i := uint64(1); i <= 100; i++ {
		logs = append(logs, &raft.Log{Index: i, Term: 1, Type: raft.LogCommand, Data: []byte("x")})
	}
	must(t, s.StoreLogs(logs))
	must(t, s.DeleteRange(1, 60))
	if first, err := s.FirstIndex(); err != nil || first != 61 {
		t.Fatalf("first index %d (%v), want 61", first, err)
	}
	var l raft.Log
	if err := s.GetLog(30, &l); !errors.Is(err, raft.ErrLogNotFound) {
		t.Fatalf("GetLog of a removed entry: %v (index %d), want ErrLogNotFound", err, l.Index)
	}
	if err := s.GetLog(61, &l); err != nil || l.Index != 61 {
		t.Fatalf("GetLog(61): %v, index %d", err, l.Index)
	}
}

// A WAL whose metadata is gone but whose segments are there (no snapshot
// yet) is refused: raft-wal would delete the segments as unlisted.
func TestWALMissingMetadataBesideSegmentsIsDamaged(t *testing.T) {
	dir := t.TempDir()
	n, err := startFormat(dir, LogStoreWAL)
	must(t, err)
	must(t, n.Close())
	must(t, os.Remove(filepath.Join(dir, "wal", "wal-meta.db")))
	if _, err := startFormat(dir, ""); !errors.Is(err, ErrDamagedDataDir) || !strings.Contains(err.Error(), "segment file") {
		t.Fatalf("restart without wal-meta.db: %v", err)
	}
}

// A follower drops a conflicting suffix of its log (raft's "clearing log
// suffix") and appends the new leader's entries, then restarts: the start
// check accepts the log, and every entry reads back. raft-wal v0.4.0 marked
// the truncated tail sealed without writing its index, so after a restart
// every read from that segment failed ("sealed segment has no index
// block") and raft could not start; v0.4.1 seals it properly (ForceSeal).
func TestWALTailTruncationSurvivesARestart(t *testing.T) {
	dir := t.TempDir()
	open := func() logStore {
		t.Helper()
		s, err := openLogStore(dir, LogStoreWAL, 0, hclog.NewNullLogger())
		must(t, err)
		return s
	}
	store := func(s logStore, from, to, term uint64) {
		t.Helper()
		var logs []*raft.Log
		for i := from; i <= to; i++ {
			logs = append(logs, &raft.Log{Index: i, Term: term, Type: raft.LogCommand, Data: []byte{byte(term), byte(i)}})
		}
		must(t, s.StoreLogs(logs))
	}
	s := open()
	store(s, 1, 10, 1)
	must(t, s.DeleteRange(8, 10))
	store(s, 8, 9, 2)
	must(t, s.Close())
	if err := checkDataDir(dir, nil); err != nil {
		t.Fatalf("the start check refused a log with a truncated tail: %v", err)
	}
	s = open()
	defer s.Close()
	for i := uint64(1); i <= 9; i++ {
		var l raft.Log
		if err := s.GetLog(i, &l); err != nil {
			t.Fatalf("GetLog(%d) after the restart: %v", i, err)
		}
		if want := map[bool]uint64{true: 2, false: 1}[i >= 8]; l.Term != want || l.Data[1] != byte(i) {
			t.Fatalf("entry %d after the restart: term %d, data %v; want term %d", i, l.Term, l.Data, want)
		}
	}
	if last, err := s.LastIndex(); err != nil || last != 9 {
		t.Fatalf("last index %d (%v), want 9", last, err)
	}
	store(s, 10, 12, 2) // and it appends on
}

// A tail segment whose preallocation stopped part-way (a full disk; ext4
// raises the file's size as it allocates) and that holds nothing: the
// start check removes it, raft-wal starts it again preallocated, and the
// log is accepted at the next start too, once entries are in it.
func TestWALPartlyPreallocatedTailStartsAgain(t *testing.T) {
	dir := t.TempDir()
	open := func() logStore { return checkedOpen(t, dir, 0) }
	s := open()
	must(t, s.Close())
	segs := walFiles(t, dir)
	if len(segs) != 1 {
		t.Fatalf("segments %v, want one", segs)
	}
	must(t, os.Truncate(segs[0], 4096))
	s = open()
	must(t, s.StoreLogs([]*raft.Log{{Index: 1, Term: 1, Type: raft.LogCommand, Data: []byte("a")}}))
	must(t, s.Close())
	if fi, err := os.Stat(segs[0]); err != nil || fi.Size() <= 4096 {
		t.Fatalf("the tail was not preallocated again: %v %v", fi.Size(), err)
	}
	s = open()
	defer s.Close()
	var l raft.Log
	must(t, s.GetLog(1, &l))
}

// A batch torn by a crash (its entries on disk, its commit frame not) is
// dropped at the next start, raft-wal writes a shorter batch where it was,
// and the node stops cleanly: the start after that accepts the log. The
// check clears the torn bytes, which raft-wal leaves beyond what it
// writes; read as records after the shorter batch they looked like damage.
func TestWALTornBatchOverwrittenByAShorterOne(t *testing.T) {
	dir := t.TempDir()
	open := func() logStore { return checkedOpen(t, dir, 0) }
	store := func(s logStore, from, to uint64, data []byte) { storeRange(t, s, from, to, 1, data) }
	s := open()
	store(s, 1, 5, []byte("a"))
	store(s, 6, 8, []byte(strings.Repeat("B", 1000)))
	must(t, s.Close())
	// Tear the last batch: zero its commit frame, the last non-zero frame.
	segs := walFiles(t, dir)
	b, err := os.ReadFile(segs[0])
	must(t, err)
	last := len(b) - 1
	for last >= 0 && b[last] == 0 {
		last--
	}
	commit := int64(last &^ 7)
	if b[commit] != frameCommit {
		t.Fatalf("no commit frame at %d", commit)
	}
	f, err := os.OpenFile(segs[0], os.O_RDWR, 0)
	must(t, err)
	_, err = f.WriteAt(make([]byte, walFrameLen), commit)
	must(t, err)
	must(t, f.Close())

	s = open() // accepted: the torn batch was never acknowledged
	if last, err := s.LastIndex(); err != nil || last != 5 {
		t.Fatalf("last index %d (%v) after the torn batch, want 5", last, err)
	}
	store(s, 6, 6, []byte("c"))
	must(t, s.Close())
	s = open()
	defer s.Close()
	var l raft.Log
	if err := s.GetLog(6, &l); err != nil || string(l.Data) != "c" {
		t.Fatalf("entry 6: %q (%v), want the shorter batch's", l.Data, err)
	}
}

// A crash between the append that sealed a full segment and the metadata
// commit of the rotation (raft-wal records the seal, and the next segment,
// after the append returned): the tail is sealed on disk, unsealed in the
// metadata, and raft-wal refused every append on it, on every start. The
// start check records the rotation, and the log appends on.
func TestWALRotationCutShortByACrash(t *testing.T) {
	const seg = 64 << 10
	entry := func(i uint64) []*raft.Log {
		return []*raft.Log{{Index: i, Term: 1, Type: raft.LogCommand, Data: []byte(strings.Repeat("x", 1000))}}
	}
	open := func(dir string) logStore { return checkedOpen(t, dir, seg) }
	files := func(dir string) []string { return walFiles(t, dir) }

	// Which append seals the first segment (entries of one size: the same
	// one every time).
	probe := t.TempDir()
	s := open(probe)
	for i := uint64(1); len(files(probe)) < 2; i++ {
		if i > 1000 {
			t.Fatal("no rotation after 1,000 appends")
		}
		must(t, s.StoreLogs(entry(i)))
	}
	must(t, s.Close())
	var sealing uint64
	editWALMeta(t, probe, func(st *types.PersistentState) { sealing = st.Segments[0].MaxIndex })

	// Exactly that many appends, then the rotation's metadata undone (if
	// Close did not already skip it): the sealed segment an unsealed tail
	// again, the new segment gone (its file is created after the commit).
	dir := t.TempDir()
	s = open(dir)
	for i := uint64(1); i <= sealing; i++ {
		must(t, s.StoreLogs(entry(i)))
	}
	must(t, s.Close())
	editWALMeta(t, dir, func(st *types.PersistentState) {
		if len(st.Segments) == 2 {
			st.Segments = st.Segments[:1]
			st.Segments[0].SealTime, st.Segments[0].MaxIndex, st.Segments[0].IndexStart = time.Time{}, 0, 0
			st.NextSegmentID--
		}
	})
	if fs := files(dir); len(fs) == 2 {
		must(t, os.Remove(fs[1]))
	}

	s = open(dir)
	for i := uint64(1); i <= sealing; i++ {
		var l raft.Log
		if err := s.GetLog(i, &l); err != nil {
			t.Fatalf("GetLog(%d): %v", i, err)
		}
	}
	after := []*raft.Log{{Index: sealing + 1, Term: 1, Type: raft.LogCommand, Data: []byte("after")}}
	must(t, s.StoreLogs(after))
	must(t, s.Close())
	s = open(dir)
	defer s.Close()
	var l raft.Log
	if err := s.GetLog(sealing+1, &l); err != nil || string(l.Data) != "after" {
		t.Fatalf("the entry after the recorded rotation: %q (%v)", l.Data, err)
	}
}

// checkedOpen opens a data dir's WAL as a node does: the start check, then
// the store (segSize 0: the default).
func checkedOpen(t *testing.T, dir string, segSize int) logStore {
	t.Helper()
	must(t, checkDataDir(dir, nil))
	s, err := openLogStore(dir, LogStoreWAL, segSize, hclog.NewNullLogger())
	must(t, err)
	return s
}

// editWALMeta rewrites raft-wal's segment list in a closed data dir,
// through raft-wal's own metadata store.
func editWALMeta(t *testing.T, dir string, edit func(*types.PersistentState)) {
	t.Helper()
	db := &metadb.BoltMetaDB{}
	defer db.Close()
	st, err := db.Load(filepath.Join(dir, walDir))
	must(t, err)
	edit(&st)
	must(t, db.CommitState(st))
}

// walFiles lists the WAL's segment files, oldest first.
func walFiles(t *testing.T, dir string) []string {
	t.Helper()
	fs, err := filepath.Glob(filepath.Join(dir, walDir, "*.wal"))
	must(t, err)
	sort.Strings(fs)
	return fs
}

// storeRange appends entries from..to of one term and one payload, in one
// batch.
func storeRange(t *testing.T, s logStore, from, to, term uint64, data []byte) {
	t.Helper()
	var logs []*raft.Log
	for i := from; i <= to; i++ {
		logs = append(logs, &raft.Log{Index: i, Term: term, Type: raft.LogCommand, Data: data})
	}
	must(t, s.StoreLogs(logs))
}
