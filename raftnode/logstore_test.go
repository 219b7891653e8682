package raftnode

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
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
	segs, err := filepath.Glob(filepath.Join(dir, "wal", "*.wal"))
	must(t, err)
	if len(segs) != 1 {
		t.Fatalf("segments %v, want one", segs)
	}
	must(t, os.Truncate(segs[0], 0))
	n, err = startFormat(dir, "")
	if err != nil {
		t.Fatalf("restart after a failed preallocation: %v", err)
	}
	defer n.Close()
	segs, _ = filepath.Glob(filepath.Join(dir, "wal", "*.wal"))
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
