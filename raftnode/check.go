package raftnode

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc64"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/raft"
	bolt "go.etcd.io/bbolt"
)

// ErrDamagedDataDir is the error of a data dir a node must not start from:
// a file is missing, empty, truncated or fails its checksum. Starting
// would panic, or worse run on a partial state (a term gone backwards, or
// acknowledged writes lost, which breaks Raft's safety in a cluster).
// Recovery: wipe the data dir and rejoin the cluster (docs/SECURITY.md,
// "A damaged data dir").
var ErrDamagedDataDir = errors.New("damaged data dir")

func damaged(file, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s; the node refuses to start from it: wipe the data dir and rejoin the cluster",
		ErrDamagedDataDir, file, fmt.Sprintf(format, args...))
}

// snapshotMeta is what the check reads of raft's file snapshot meta.json.
type snapshotMeta struct {
	raft.SnapshotMeta
	CRC []byte
}

// checkDataDir verifies what a restart reads before raft and its stores
// get to it (bbolt panics on some damage, raft-wal silently drops a torn
// or truncated tail, and raft silently skips a snapshot whose meta.json
// does not load): every snapshot's meta.json must decode and its
// state.bin match the recorded size and CRC; the Raft log (raft.db, or
// wal/ in checkwal.go) must open, every record of it must read (and, in
// the WAL, match its checksum), and it must hold the log and term a
// snapshot beside it implies. It writes to the WAL in three cases only,
// each what a crash can leave and raft-wal mishandles (checkwal.go): an
// empty tail whose preallocation failed is removed, a torn batch at the
// end of the tail is zeroed, and a rotation cut short is recorded; so the
// caller holds the WAL's lock (lockLogStore).
//
// m is the data dir's mark (nil: none). With one, a log that is missing or
// empty, or a WAL tail segment cut to nothing that should hold entries up
// to the mark, is refused as lost (ErrLogLost) before anything opens or
// repairs it; what the opened log holds is checked against the mark after
// (checkAgainstMark).
func checkDataDir(dir string, m *logMark) error {
	snaps, snapIndex, err := checkSnapshotsIndex(filepath.Join(dir, "snapshots"))
	if err != nil {
		return err
	}
	format, err := dataDirFormat(dir)
	if err != nil {
		return err
	}
	if m != nil && format != "" && format != m.Log {
		return lost(m, dir, logPath(dir, m.Log), "missing: the data dir holds a %s log instead", format)
	}
	switch format {
	case LogStoreWAL:
		return checkWAL(filepath.Join(dir, walDir), snaps, snapIndex, m)
	case LogStoreBolt:
		return checkBoltLog(filepath.Join(dir, boltFile), snaps, m)
	}
	if m != nil {
		return lostOrDamaged(m, dir, logPath(dir, m.Log), snaps, "is missing")
	}
	if len(snaps) > 0 {
		return damaged(dir, "its Raft log (%s or %s/) is missing beside snapshot %s: the log and the vote are lost", boltFile, walDir, snaps[0])
	}
	return nil
}

// beside names the newest snapshot, if any, for an error.
func beside(snaps []string) string {
	if len(snaps) == 0 {
		return ""
	}
	return " beside snapshot " + snaps[0]
}

// checkBoltLog checks raft.db, the bbolt log and stable store.
func checkBoltLog(db string, snaps []string, m *logMark) error {
	fi, err := os.Stat(db)
	switch {
	case err != nil:
		return fmt.Errorf("%s: %w", db, err)
	case fi.Size() == 0:
		if len(snaps) > 0 || m != nil {
			return lostOrDamaged(m, filepath.Dir(db), db, snaps, "empty")
		}
		return nil // a crash right after creating it, before any write
	}
	return checkBolt(db, "logs", "conf", len(snaps) > 0, func(tx *bolt.Tx) error {
		return tx.Bucket([]byte("logs")).ForEach(func(k, v []byte) error {
			if len(k) != 8 {
				return damaged(db, "a log key of %d bytes (want 8)", len(k))
			}
			return nil
		})
	})
}

// checkSnapshots returns the snapshot directory names, newest first.
func checkSnapshots(dir string) ([]string, error) {
	names, _, err := checkSnapshotsIndex(dir)
	return names, err
}

// checkSnapshotsIndex is checkSnapshots, with the highest index a snapshot
// holds (0: none).
func checkSnapshotsIndex(dir string) ([]string, uint64, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("snapshots: %w", err)
	}
	var names []string
	var highest uint64
	type bad struct {
		index uint64 // from the directory's name
		err   error
	}
	var bads []bad
	for _, e := range entries {
		if !e.IsDir() || strings.HasSuffix(e.Name(), ".tmp") {
			continue // raft ignores (and cleans up) unfinished snapshots
		}
		index, err := checkSnapshot(filepath.Join(dir, e.Name()))
		if err != nil {
			bads = append(bads, bad{indexFromName(e.Name()), err})
			continue
		}
		names = append(names, e.Name())
		highest = max(highest, index)
	}
	// An older snapshot than a sound one is what raft was removing when
	// the node stopped (it deletes the retained ones past the newest, file
	// by file, so a kill can leave one half gone): raft restores only the
	// newest and skips one whose metadata it cannot read, so it is no
	// reason to refuse to start. A damaged snapshot at or above the newest
	// sound one is.
	for _, b := range bads {
		if b.index == 0 || b.index >= highest {
			return nil, 0, b.err
		}
	}
	sort.Sort(sort.Reverse(sort.StringSlice(names)))
	return names, highest, nil
}

// indexFromName is the index in a snapshot directory's name
// (term-index-millis, as raft names them), or 0.
func indexFromName(name string) uint64 {
	parts := strings.Split(name, "-")
	if len(parts) != 3 {
		return 0
	}
	i, err := strconv.ParseUint(parts[1], 10, 64)
	if err != nil {
		return 0
	}
	return i
}

// checkSnapshot checks one snapshot and returns its index.
func checkSnapshot(dir string) (uint64, error) {
	metaPath := filepath.Join(dir, "meta.json")
	b, err := os.ReadFile(metaPath)
	if err != nil {
		return 0, damaged(metaPath, "unreadable: %v", err)
	}
	var meta snapshotMeta
	if err := json.Unmarshal(b, &meta); err != nil {
		return 0, damaged(metaPath, "does not decode: %v", err)
	}
	if meta.Version < raft.SnapshotVersionMin || meta.Version > raft.SnapshotVersionMax || meta.Index == 0 || len(meta.CRC) == 0 {
		return 0, damaged(metaPath, "not a snapshot's metadata (version %d, index %d)", meta.Version, meta.Index)
	}
	statePath := filepath.Join(dir, "state.bin")
	f, err := os.Open(statePath)
	if err != nil {
		return 0, damaged(statePath, "unreadable: %v", err)
	}
	defer f.Close()
	h := crc64.New(crc64.MakeTable(crc64.ECMA))
	n, err := io.Copy(h, f)
	if err != nil {
		return 0, damaged(statePath, "unreadable: %v", err)
	}
	if n != meta.Size {
		return 0, damaged(statePath, "%d bytes where meta.json records %d (truncated)", n, meta.Size)
	}
	if !bytes.Equal(h.Sum(nil), meta.CRC) {
		return 0, damaged(statePath, "CRC mismatch: the snapshot's contents are corrupt")
	}
	return meta.Index, nil
}

// checkBolt opens a bbolt file read-only and reads every page of its
// buckets main and stable (the stable one holds raft's vote and current
// term), then runs visit on it. A truncated file faults when bbolt touches
// a page past its end, and a corrupt page makes bbolt panic: both are
// caught and named here.
func checkBolt(path, main, stable string, haveSnapshot bool, visit func(*bolt.Tx) error) (err error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: 2 * time.Second})
	if err != nil {
		if errors.Is(err, bolt.ErrTimeout) {
			return fmt.Errorf("%s: locked (is another node using this data dir?)", path)
		}
		return damaged(path, "does not open: %v", err)
	}
	defer db.Close()
	done := make(chan error, 1)
	go func() {
		// A fault on a page past the end of the file panics here instead of
		// crashing the process.
		debug.SetPanicOnFault(true)
		defer func() {
			if r := recover(); r != nil {
				done <- damaged(path, "truncated or corrupt (%v)", r)
			}
		}()
		done <- db.View(func(tx *bolt.Tx) error {
			mb, sb := tx.Bucket([]byte(main)), tx.Bucket([]byte(stable))
			if mb == nil || sb == nil {
				if haveSnapshot {
					return damaged(path, "has no Raft log or stable store beside a snapshot")
				}
				return nil
			}
			for _, b := range []*bolt.Bucket{mb, sb} {
				if err := b.ForEach(func(k, v []byte) error { return nil }); err != nil {
					return err
				}
			}
			if haveSnapshot && sb.Get([]byte("CurrentTerm")) == nil {
				return damaged(path, "holds no current term beside a snapshot: the vote is lost")
			}
			return visit(tx)
		})
	}()
	return <-done
}
