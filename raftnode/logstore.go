package raftnode

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	gometrics "github.com/hashicorp/go-metrics/compat"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	wal "github.com/hashicorp/raft-wal"
	"github.com/hashicorp/raft-wal/metadb"
	"github.com/hashicorp/raft-wal/types"
	bolt "go.etcd.io/bbolt"
)

// The two formats of a node's Raft log and stable store (the vote and
// current term). A data dir holds one of them, fixed when it is created:
//
//   - LogStoreWAL (the default for a new data dir): hashicorp/raft-wal,
//     segment files preallocated in <data-dir>/wal/ plus a small bbolt
//     file of segment metadata and the vote. An append is one write and
//     one fsync of a preallocated file.
//   - LogStoreBolt: one bbolt file, <data-dir>/raft.db (every data dir
//     made before raft-wal). An append is a bbolt transaction, which syncs
//     twice (its pages, then its meta page): on this project's reference
//     machine that is about twice the time of the WAL's append, and the
//     leader and each follower append before a write commits.
//
// A node opens whichever format its data dir already holds; the setting
// only chooses the format of a new one.
const (
	LogStoreWAL  = "wal"
	LogStoreBolt = "bolt"
)

// ErrLogStore reports an unknown log store format name.
var ErrLogStore = errors.New("raftnode: unknown log store")

const (
	boltFile = "raft.db"
	walDir   = "wal"
)

// logStore is the node's Raft log and stable store, in either format.
type logStore interface {
	raft.LogStore
	raft.StableStore
	io.Closer
}

// dataDirFormat is the log store format the data dir already holds, or
// "" for a dir with neither (a new node).
func dataDirFormat(dir string) (string, error) {
	_, errBolt := os.Stat(filepath.Join(dir, boltFile))
	_, errWAL := os.Stat(filepath.Join(dir, walDir))
	for _, err := range []error{errBolt, errWAL} {
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return "", err
		}
	}
	switch {
	case errBolt == nil && errWAL == nil:
		return "", damaged(dir, "holds both %s and %s/: two Raft logs, and it is not known which is this node's", boltFile, walDir)
	case errBolt == nil:
		return LogStoreBolt, nil
	case errWAL == nil:
		return LogStoreWAL, nil
	}
	return "", nil
}

// chooseFormat is the format to open: the one the dir holds, else want
// ("" meaning the default).
func chooseFormat(dir, want string) (string, error) {
	switch want {
	case "", LogStoreWAL, LogStoreBolt:
	default:
		return "", fmt.Errorf("%w %q: want %q or %q", ErrLogStore, want, LogStoreWAL, LogStoreBolt)
	}
	have, err := dataDirFormat(dir)
	if err != nil || have != "" {
		return have, err
	}
	if want == "" {
		want = LogStoreWAL
	}
	return want, nil
}

// openLogStore opens (or creates) the store of the given format in dir;
// segmentSize is the WAL's (0: DefaultWALSegmentSize).
func openLogStore(dir, format string, segmentSize int, log hclog.Logger) (logStore, error) {
	unlock, err := lockLogStore(dir, format, true)
	if err != nil {
		return nil, err
	}
	s, err := openLockedLogStore(dir, format, segmentSize, log, unlock)
	if err != nil {
		unlock()
	}
	return s, err
}

// lockLogStore takes the WAL's lock (wal/LOCK, flock with a 2 s bound);
// a bbolt log is locked by bbolt itself when it opens. The node takes it
// before the start check when the WAL exists, since the check may write to
// its tail segment (it clears a torn batch, clearTornTail): only a node
// holding the lock writes there. create: make wal/ if it is missing;
// without it a missing wal/ takes no lock (unlock is nil), and the check
// reports what it finds missing.
func lockLogStore(dir, format string, create bool) (unlock func(), err error) {
	if format != LogStoreWAL {
		return func() {}, nil
	}
	d := filepath.Join(dir, walDir)
	if !create {
		if _, err := os.Stat(d); errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
	}
	if err := os.MkdirAll(d, 0o700); err != nil {
		return nil, fmt.Errorf("create %s: %w", d, err)
	}
	return lockDir(d)
}

// openLockedLogStore opens the log store of a data dir whose lock
// (lockLogStore) the caller holds; a WAL store releases it on Close, and
// the caller on an error.
func openLockedLogStore(dir, format string, segmentSize int, log hclog.Logger, unlock func()) (logStore, error) {
	switch format {
	case LogStoreBolt:
		// NoFreelistSync keeps the log store's commits small (Consul, rqlite).
		s, err := raftboltdb.New(raftboltdb.Options{
			Path:        filepath.Join(dir, boltFile),
			BoltOptions: &bolt.Options{Timeout: 2 * time.Second, NoFreelistSync: true},
		})
		if err != nil {
			return nil, fmt.Errorf("open %s (is another node using %s?): %w", boltFile, dir, err)
		}
		return s, nil
	case LogStoreWAL:
		d := filepath.Join(dir, walDir)
		size := DefaultWALSegmentSize
		if segmentSize > 0 {
			size = segmentSize
		}
		// The metadata store is ours: raft-wal's own opens bbolt with no
		// lock timeout (a second node on the dir would hang; ours has the
		// flock above), and v0.4.0's WAL.Close left it open. Since v0.4.2
		// WAL.Close closes it too; closing it again is a no-op.
		meta := &metadb.BoltMetaDB{}
		// Its counters and gauges (appends, bytes, segment rotations, the
		// last segment's age) go to go-metrics' global sink, as raft's do:
		// grackle_raft_wal_* on /metrics.
		w, err := wal.Open(d, wal.WithLogger(log.Named("wal")), wal.WithSegmentSize(size), wal.WithMetaStore(meta),
			wal.WithMetricsCollector(walCollector{}))
		if err != nil {
			meta.Close()
			return nil, fmt.Errorf("open the Raft log in %s: %w", d, err)
		}
		return &walStore{WAL: w, meta: meta, unlock: unlock, dir: d,
			reserve: uint64(size) + walReserveSlack}, nil
	}
	return nil, fmt.Errorf("%w %q", ErrLogStore, format)
}

// DefaultWALSegmentSize is the size of a WAL segment file (raft-wal's
// default): each is preallocated whole when it is started.
const DefaultWALSegmentSize = 64 << 20

// walReserveSlack is free space kept beyond one segment: the metadata
// file's growth, and the snapshot that may be written meanwhile begins.
const walReserveSlack = 1 << 20

// walStore is raft-wal plus the data dir lock it holds, and a guard for
// the one write raft-wal cannot fail cleanly: starting the next segment.
// raft-wal preallocates a segment when it starts it, so appends within a
// segment never run out of space; but when the preallocation of the next
// one fails (a full disk), raft-wal only logs it and every later append
// fails with ErrSealed until a restart. So an append is refused, as a
// full disk, while less than a segment (plus walReserveSlack) is free:
// then the rotation never lacks the space, and appends resume by
// themselves once space is freed.
type walStore struct {
	*wal.WAL
	meta    *metadb.BoltMetaDB
	unlock  func()
	dir     string
	reserve uint64
}

func (s *walStore) roomFor() error {
	free, ok := freeBytes(s.dir)
	if ok && free < s.reserve {
		return fmt.Errorf("the Raft log keeps %d bytes free in %s for its next segment, and %d are: %w", s.reserve, s.dir, free, syscall.ENOSPC)
	}
	return nil
}

func (s *walStore) StoreLog(l *raft.Log) error { return s.StoreLogs([]*raft.Log{l}) }

// GetLog keeps raft.LogStore's contract that entries DeleteRange removed
// are gone: raft-wal (v0.4.0 to v0.4.2) marks a head truncation inside a segment by
// raising its MinIndex, but its tail segment still returns the entries
// below it. Raft then replicated from those to a new or lagging member
// instead of sending a snapshot (the compacted entries are committed and
// valid, so nothing was wrong, but the member replayed the whole log).
func (s *walStore) GetLog(index uint64, l *raft.Log) error {
	first, err := s.WAL.FirstIndex()
	if err != nil {
		return err
	}
	if index < first {
		return raft.ErrLogNotFound
	}
	return s.WAL.GetLog(index, l)
}

func (s *walStore) StoreLogs(logs []*raft.Log) error {
	if err := s.roomFor(); err != nil {
		return err
	}
	err := s.WAL.StoreLogs(logs)
	if errors.Is(err, types.ErrSealed) {
		// The rotation failed (another process filled the disk between
		// the check and the rotation): raft-wal logged why.
		err = fmt.Errorf("the Raft log in %s could not start its next segment (raft-wal's rotate error is in the log); restart the node once the disk has space: %w", s.dir, err)
		if room := s.roomFor(); room != nil {
			err = fmt.Errorf("%w; %w", err, room)
		}
	}
	return err
}

func (s *walStore) Close() error {
	err := errors.Join(s.WAL.Close(), s.meta.Close())
	s.unlock()
	return err
}

// walCollector sends raft-wal's metrics to go-metrics' global sink at each
// call, as raft's own do. raft-wal's GoMetricsCollector keeps the global
// of the moment it is made, and the log opens before the server installs
// the sink that /metrics reads.
type walCollector struct{}

func (walCollector) IncrementCounter(name string, delta uint64) {
	gometrics.IncrCounter([]string{"raft", "wal", name}, float32(delta))
}

func (walCollector) SetGauge(name string, val uint64) {
	gometrics.SetGauge([]string{"raft", "wal", name}, float32(val))
}
