package raftnode

import (
	"errors"
	"fmt"
	"sync/atomic"
	"syscall"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// ErrDiskFull marks a write that failed because the data dir's filesystem
// has no space left. Without it, a full disk looks like "no leader" to
// clients: the leader fails to append, steps down, and elections follow.
var ErrDiskFull = errors.New("the disk is full")

// diskWatch notes ENOSPC on the node's writes (log, stable store,
// snapshots) until a write succeeds again.
type diskWatch struct {
	dir  string
	log  hclog.Logger
	full atomic.Pointer[error]
}

func (d *diskWatch) note(err error) error {
	if err == nil {
		if d.full.Swap(nil) != nil {
			d.log.Info("disk space is available again: writes succeed", "data_dir", d.dir)
		}
		return nil
	}
	if !errors.Is(err, syscall.ENOSPC) {
		return err
	}
	wrapped := fmt.Errorf("%w: no space left on device in %s: %w", ErrDiskFull, d.dir, err)
	if d.full.Swap(&wrapped) == nil {
		d.log.Error("the disk is full: writes to the Raft log fail until space is freed", "data_dir", d.dir, "error", err.Error())
	}
	return wrapped
}

// err is the disk-full error while the last write failed for lack of
// space, else nil.
func (d *diskWatch) err() error {
	if p := d.full.Load(); p != nil {
		return *p
	}
	return nil
}

// watchedStore is the log and stable store with its write errors checked
// for ENOSPC.
type watchedStore struct {
	logStore
	d *diskWatch
}

func (s watchedStore) StoreLog(l *raft.Log) error { return s.d.note(s.logStore.StoreLog(l)) }
func (s watchedStore) StoreLogs(l []*raft.Log) error {
	return s.d.note(s.logStore.StoreLogs(l))
}
func (s watchedStore) DeleteRange(lo, hi uint64) error {
	return s.d.note(s.logStore.DeleteRange(lo, hi))
}
func (s watchedStore) Set(k, v []byte) error { return s.d.note(s.logStore.Set(k, v)) }

// IsMonotonic passes the store's raft.MonotonicLogStore on to raft (through
// the log cache, which asks its store). raft-wal cannot hold a gap in its
// log, and says so; raft then deletes the whole log after installing a
// snapshot (removeOldLogs) instead of compacting it up to the snapshot
// with TrailingLogs kept. Without it, a follower whose log ended before a
// snapshot it was sent kept that log, and every append after the snapshot
// failed ("non-monotonic log entries: tried to append index 8781 after
// 8529"), so the leader sent the snapshot again, forever: the fault-
// injection suite caught a cluster that never served again that way.
func (s watchedStore) IsMonotonic() bool {
	m, ok := s.logStore.(raft.MonotonicLogStore)
	return ok && m.IsMonotonic()
}
func (s watchedStore) SetUint64(k []byte, v uint64) error {
	return s.d.note(s.logStore.SetUint64(k, v))
}

// watchedSnapshots checks snapshot writes for ENOSPC, and signals taken
// (without blocking) each time a snapshot is complete.
type watchedSnapshots struct {
	raft.SnapshotStore
	d     *diskWatch
	taken chan<- struct{}
}

func (s watchedSnapshots) Create(version raft.SnapshotVersion, index, term uint64, conf raft.Configuration, confIndex uint64, trans raft.Transport) (raft.SnapshotSink, error) {
	sink, err := s.SnapshotStore.Create(version, index, term, conf, confIndex, trans)
	if err != nil {
		return nil, s.d.note(err)
	}
	return watchedSink{SnapshotSink: sink, d: s.d, taken: s.taken}, nil
}

type watchedSink struct {
	raft.SnapshotSink
	d     *diskWatch
	taken chan<- struct{}
}

func (s watchedSink) Write(p []byte) (int, error) {
	n, err := s.SnapshotSink.Write(p)
	if err != nil {
		err = s.d.note(err)
	}
	return n, err
}

func (s watchedSink) Close() error {
	err := s.d.note(s.SnapshotSink.Close())
	if err == nil && s.taken != nil {
		select {
		case s.taken <- struct{}{}:
		default:
		}
	}
	return err
}

// DiskFull is ErrDiskFull (with the data dir and the cause) while the
// node's last write failed for lack of space, else nil.
func (n *Node) DiskFull() error { return n.disk.err() }
