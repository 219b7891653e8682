package raftnode

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"github.com/hashicorp/raft-wal/types"
)

// seedDataDir runs a single node that applies entries, snapshots, applies
// more and stops: a data dir with a snapshot and log entries after it.
func seedDataDir(t *testing.T, format string) string {
	t.Helper()
	dir := t.TempDir()
	n, err := New(Config{NodeID: "n1", DataDir: dir, BindAddr: "127.0.0.1:0", Bootstrap: true, LogStore: format,
		// Small segments, so that the WAL's log spans sealed segments and a tail.
		WALSegmentSize:   64 << 10,
		HeartbeatTimeout: 100 * time.Millisecond, ElectionTimeout: 100 * time.Millisecond, LeaderLeaseTimeout: 50 * time.Millisecond,
		FSM: &raft.MockFSM{}, Logger: hclog.NewNullLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	deadline := time.Now().Add(20 * time.Second)
	for n.Raft.State() != raft.Leader {
		if time.Now().After(deadline) {
			t.Fatal("no leader")
		}
		time.Sleep(10 * time.Millisecond)
	}
	apply := func(k int) {
		for i := 0; i < k; i++ {
			if err := n.Raft.Apply([]byte(strings.Repeat("x", 512)), 10*time.Second).Error(); err != nil {
				t.Fatal(err)
			}
		}
	}
	apply(200)
	if err := n.Raft.Snapshot().Error(); err != nil {
		t.Fatal(err)
	}
	apply(50)
	return dir
}

func restart(dir string) error {
	n, err := New(Config{NodeID: "n1", DataDir: dir, BindAddr: "127.0.0.1:0", Bootstrap: true,
		FSM: &raft.MockFSM{}, Logger: hclog.NewNullLogger()})
	if err == nil {
		n.Close()
	}
	return err
}

func newestSnapshot(t *testing.T, dir string) string {
	t.Helper()
	snaps, err := checkSnapshots(filepath.Join(dir, "snapshots"))
	if err != nil || len(snaps) == 0 {
		t.Fatalf("snapshots: %v %v", snaps, err)
	}
	return filepath.Join(dir, "snapshots", snaps[0])
}

// A damaged data dir refuses to start with an error that names the file
// and what is wrong: never a panic, never a silent start on partial state.
func TestDamagedDataDirRefusesToStart(t *testing.T) {
	for _, format := range []string{LogStoreBolt, LogStoreWAL} {
		if err := restart(seedDataDir(t, format)); err != nil {
			t.Fatalf("an intact %s data dir: %v", format, err)
		}
	}
	for _, tc := range []struct {
		name   string
		format string
		damage func(t *testing.T, dir string) string // returns the file named
		want   string
	}{
		{"empty raft.db beside a snapshot", LogStoreBolt, func(t *testing.T, dir string) string {
			p := filepath.Join(dir, "raft.db")
			must(t, os.Truncate(p, 0))
			return p
		}, "empty beside snapshot"},
		{"raft.db removed beside a snapshot", LogStoreBolt, func(t *testing.T, dir string) string {
			must(t, os.Remove(filepath.Join(dir, "raft.db")))
			return dir
		}, "is missing beside snapshot"},
		{"truncated raft.db", LogStoreBolt, func(t *testing.T, dir string) string {
			p := filepath.Join(dir, "raft.db")
			fi, err := os.Stat(p)
			must(t, err)
			must(t, os.Truncate(p, fi.Size()/2))
			return p
		}, "raft.db"},
		{"raft.db overwritten with garbage pages", LogStoreBolt, func(t *testing.T, dir string) string {
			p := filepath.Join(dir, "raft.db")
			f, err := os.OpenFile(p, os.O_RDWR, 0)
			must(t, err)
			fi, _ := f.Stat()
			garbage := []byte(strings.Repeat("\xde\xad\xbe\xef", 1024))
			for off := int64(2 * 4096); off < fi.Size(); off += 4096 {
				_, _ = f.WriteAt(garbage, off)
			}
			f.Close()
			return p
		}, "raft.db"},
		{"corrupt newest snapshot", LogStoreWAL, func(t *testing.T, dir string) string {
			p := filepath.Join(newestSnapshot(t, dir), "state.bin")
			f, err := os.OpenFile(p, os.O_RDWR, 0)
			must(t, err)
			_, err = f.WriteAt([]byte("corrupt"), 10)
			must(t, err)
			f.Close()
			return p
		}, "CRC mismatch"},
		{"truncated newest snapshot", LogStoreWAL, func(t *testing.T, dir string) string {
			p := filepath.Join(newestSnapshot(t, dir), "state.bin")
			must(t, os.Truncate(p, 7))
			return p
		}, "truncated"},
		{"damaged snapshot meta.json", LogStoreWAL, func(t *testing.T, dir string) string {
			p := filepath.Join(newestSnapshot(t, dir), "meta.json")
			must(t, os.WriteFile(p, []byte("{\"Version\":"), 0o600))
			return p
		}, "does not decode"},
		{"wal-meta.db removed beside a snapshot", LogStoreWAL, func(t *testing.T, dir string) string {
			p := filepath.Join(dir, "wal", "wal-meta.db")
			must(t, os.Remove(p))
			return p
		}, "missing or empty beside snapshot"},
		{"wal-meta.db overwritten with garbage pages", LogStoreWAL, func(t *testing.T, dir string) string {
			p := filepath.Join(dir, "wal", "wal-meta.db")
			garbage(t, p, 2*4096)
			return p
		}, "wal-meta.db"},
		{"the WAL's tail segment removed", LogStoreWAL, func(t *testing.T, dir string) string {
			segs := segments(t, dir)
			p := segs[len(segs)-1]
			must(t, os.Remove(p))
			return p
		}, "missing"},
		{"the WAL's tail segment truncated", LogStoreWAL, func(t *testing.T, dir string) string {
			segs := segments(t, dir)
			p := segs[len(segs)-1]
			must(t, os.Truncate(p, 4096))
			return p
		}, "truncated"},
		{"a record of the tail segment's first batch corrupted", LogStoreWAL, func(t *testing.T, dir string) string {
			segs := segments(t, dir)
			p := segs[len(segs)-1]
			flip(t, p, 32+8+100) // inside the first entry's payload
			return p
		}, "do not match their checksum"},
		{"a record of a sealed segment corrupted", LogStoreWAL, func(t *testing.T, dir string) string {
			p := segments(t, dir)[0]
			flip(t, p, 20_000)
			return p
		}, "do not match their checksum"},
		{"a sealed segment without an index (raft-wal v0.4.0's truncation)", LogStoreWAL, func(t *testing.T, dir string) string {
			p := segments(t, dir)[0]
			editWALMeta(t, dir, func(st *types.PersistentState) { st.Segments[0].IndexStart = 0 })
			return p
		}, "records no index"},
		{"a sealed segment removed", LogStoreWAL, func(t *testing.T, dir string) string {
			p := segments(t, dir)[0]
			must(t, os.Remove(p))
			return p
		}, "missing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := seedDataDir(t, tc.format)
			file := tc.damage(t, dir)
			var err error
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Fatalf("panic on restart: %v", r)
					}
				}()
				err = restart(dir)
			}()
			if !errors.Is(err, ErrDamagedDataDir) {
				t.Fatalf("restart: %v, want ErrDamagedDataDir", err)
			}
			if !strings.Contains(err.Error(), file) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "wipe the data dir and rejoin") {
				t.Fatalf("error %q does not name %s and %q and how to recover", err, file, tc.want)
			}
			t.Log(err)
		})
	}
}

// segments lists the WAL's segment files, oldest first (at least two:
// one sealed and the tail).
func segments(t *testing.T, dir string) []string {
	t.Helper()
	segs := walFiles(t, dir)
	if len(segs) < 2 {
		t.Fatalf("the seeded WAL has %d segments, want a sealed one and a tail", len(segs))
	}
	return segs
}

// flip inverts one byte of a file.
func flip(t *testing.T, p string, off int64) {
	t.Helper()
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	must(t, err)
	defer f.Close()
	b := make([]byte, 1)
	_, err = f.ReadAt(b, off)
	must(t, err)
	b[0] ^= 0xff
	_, err = f.WriteAt(b, off)
	must(t, err)
}

// garbage overwrites every 4 KiB page of a file from off on.
func garbage(t *testing.T, p string, from int64) {
	t.Helper()
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	must(t, err)
	defer f.Close()
	fi, _ := f.Stat()
	g := []byte(strings.Repeat("\xde\xad\xbe\xef", 1024))
	for off := from; off < fi.Size(); off += 4096 {
		_, _ = f.WriteAt(g, off)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// hungFuture never completes, like raft.Shutdown waiting on a replication
// goroutine stuck on an unresponsive peer.
type hungFuture struct{}

func (hungFuture) Error() error { select {} }

// Close is bounded and says what it still waited for.
func TestCloseIsBoundedAndSaysWhatItWaitedFor(t *testing.T) {
	n, err := New(Config{NodeID: "n1", DataDir: t.TempDir(), BindAddr: "127.0.0.1:0", Bootstrap: true,
		InitialMembers: []Peer{{ID: "n1", Addr: "127.0.0.1:1"}, {ID: "n2", Addr: "127.0.0.1:2"}},
		FSM:            &raft.MockFSM{}, Logger: hclog.NewNullLogger()})
	if err != nil {
		t.Fatal(err)
	}
	real := n.Raft.Shutdown
	defer func() { _ = real().Error(); n.closeStores() }()
	n.shutdown = func() raft.Future { return hungFuture{} }
	n.ShutdownTimeout = 200 * time.Millisecond
	done := make(chan error, 1)
	go func() { done <- n.Close() }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "did not stop within") || !strings.Contains(err.Error(), "replication to n2 (127.0.0.1:2)") {
			t.Fatalf("Close: %v", err)
		}
		t.Log(err)
	case <-time.After(30 * time.Second):
		t.Fatal("Close still waiting after 30 s with a 200 ms bound")
	}
}

// An older snapshot half removed (raft deletes the retained snapshots past
// the newest file by file, so a kill can leave one without state.bin) is
// no reason to refuse to start; a damaged snapshot newer than every sound
// one is.
func TestHalfRemovedOlderSnapshotIsIgnored(t *testing.T) {
	newest := newestSnapshot(t, seedDataDir(t, LogStoreWAL))
	snaps := filepath.Dir(newest)
	parts := strings.Split(filepath.Base(newest), "-")
	index, err := strconv.ParseUint(parts[1], 10, 64)
	if err != nil || index < 2 {
		t.Fatalf("snapshot name %q", filepath.Base(newest))
	}
	meta, err := os.ReadFile(filepath.Join(newest, "meta.json"))
	must(t, err)
	half := func(idx uint64) string {
		d := filepath.Join(snaps, fmt.Sprintf("%s-%d-1", parts[0], idx))
		must(t, os.MkdirAll(d, 0o700))
		must(t, os.WriteFile(filepath.Join(d, "meta.json"), meta, 0o600))
		return d
	}
	old := half(index - 1)
	names, err := checkSnapshots(snaps)
	if err != nil || len(names) != 1 || names[0] != filepath.Base(newest) {
		t.Fatalf("with a half-removed older snapshot: %v, %v; want only %s", names, err, filepath.Base(newest))
	}
	must(t, os.RemoveAll(old))
	half(index + 1)
	if _, err := checkSnapshots(snaps); err == nil || !strings.Contains(err.Error(), "state.bin") {
		t.Fatalf("a damaged snapshot newer than every sound one: %v, want refused naming state.bin", err)
	}
}
