package raftnode

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
)

// MarkFile is the file in the data dir where a node records, outside its
// Raft log, what the log held: that the node was a member, and an index
// (with its term) that its log or a snapshot durably held, with the
// current term it had voted in. A start whose log and snapshots fall
// short of it is refused (DESIGN.md, "What a node knows it had").
const MarkFile = "raft-mark.json"

// DefaultMarkInterval is how often a running node brings its mark up to
// date (besides after every snapshot and at a clean stop).
const DefaultMarkInterval = time.Second

// ErrLogLost is the error of a data dir whose Raft log and snapshots fall
// short of what its mark records: acknowledged entries are gone. It is
// always also an ErrDamagedDataDir.
var ErrLogLost = errors.New("the Raft log lost entries this node had")

// keyCurrentTerm is raft's stable-store key of the current term.
var keyCurrentTerm = []byte("CurrentTerm")

const markVersion = 1

// logMark is the content of MarkFile.
type logMark struct {
	Version int    `json:"version"`
	NodeID  string `json:"node_id,omitempty"`
	// Log is the format of the log the mark is about.
	Log string `json:"log"`
	// Index and Term: an entry the node's log or a snapshot durably held,
	// and that the cluster committed (so no leader can ever remove it).
	Index uint64 `json:"index"`
	Term  uint64 `json:"term"`
	// CurrentTerm is the term the stable store durably held: it never goes
	// back (a node that forgot it could vote twice in one term).
	CurrentTerm uint64 `json:"current_term"`
}

// readMark reads dir's mark (nil when there is none: a data dir from
// before any commit, or from a build without marks).
func readMark(dir string) (*logMark, error) {
	p := filepath.Join(dir, MarkFile)
	b, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	var m logMark
	if err := json.Unmarshal(b, &m); err != nil || m.Version < 1 || m.Index == 0 || (m.Log != LogStoreWAL && m.Log != LogStoreBolt) {
		// It is written whole or not at all (writeMark), so this is damage
		// to the file itself, not a crash.
		return nil, fmt.Errorf("%w: %s: not this node's log mark (version, log, index; %d bytes): the node refuses to start without knowing what its log held; if the Raft log beside it is known to be intact, move %s aside and start again",
			ErrDamagedDataDir, p, len(b), p)
	}
	return &m, nil
}

// writeMark replaces dir's mark whole: a temporary file, synced, renamed
// over it, and the directory synced, so that a crash leaves the old mark
// or the new one, never a part.
func writeMark(dir string, m logMark) error {
	m.Version = markVersion
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	p := filepath.Join(dir, MarkFile)
	tmp := p + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("write %s: %w", tmp, err)
	}
	_, err = f.Write(append(b, '\n'))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, p)
	}
	if err == nil {
		err = syncDir(dir)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("write %s: %w", p, err)
	}
	return nil
}

// logPath is the file or directory of a data dir's log of the format.
func logPath(dir, format string) string {
	if format == LogStoreBolt {
		return filepath.Join(dir, boltFile)
	}
	return filepath.Join(dir, walDir)
}

// lost is the refusal of a data dir whose log falls short of its mark m
// (in dir): file is what lost it, what says how. It names the way to
// accept the loss: moving the mark aside.
func lost(m *logMark, dir, file, what string, args ...any) error {
	return lostErr(m, dir, file, true, what, args...)
}

// lostErr is lost; without acceptable, the data dir is refused even
// without its mark (a log lost beside a snapshot: the vote is lost too),
// and the error does not offer moving the mark aside.
func lostErr(m *logMark, dir, file string, acceptable bool, what string, args ...any) error {
	p := filepath.Join(dir, MarkFile)
	id := m.NodeID
	if id == "" {
		id = "NODE_ID"
	}
	accept := ""
	if acceptable {
		accept = fmt.Sprintf(". To start anyway on what is left, accepting the loss (a single node without a backup), move %s aside", p)
	}
	return fmt.Errorf("%w: %w: %s: %s, where %s records that this node held index %d (term %d, current term %d): acknowledged writes are gone and the node refuses to start from it. "+
		"Recover: restore the data dir from a backup (grackle snapshot restore, into an empty data dir), or run grackle cluster remove %s on the cluster, wipe the data dir and rejoin the cluster empty (--join)%s",
		ErrDamagedDataDir, ErrLogLost, file, fmt.Sprintf(what, args...), p, m.Index, m.Term, m.CurrentTerm, id, accept)
}

// lostOrDamaged is the refusal of a log missing or empty (file), with the
// data dir's mark m (nil: none) and snapshots: lost when there is a mark,
// else damaged. Beside a snapshot it is refused with or without a mark.
func lostOrDamaged(m *logMark, dir, file string, snaps []string, what string) error {
	what += beside(snaps) + ": the Raft log and the vote (current term) are lost"
	if m != nil {
		return lostErr(m, dir, file, len(snaps) == 0, "%s", what)
	}
	return damaged(file, "%s", what)
}

// checkAgainstMark checks the opened log and snapshot store against the
// mark (none: nothing to check): the log or a snapshot must reach the
// mark's index, hold the same term there, and the stable store hold a
// current term at least the mark's.
func checkAgainstMark(m *logMark, dir, format string, store logStore, snaps raft.SnapshotStore) error {
	if m == nil {
		return nil
	}
	lp := logPath(dir, format)
	if format != m.Log {
		return lost(m, dir, logPath(dir, m.Log), "missing: the data dir holds a %s log instead", format)
	}
	first, err := store.FirstIndex()
	if err != nil {
		return fmt.Errorf("%s: read the first index: %w", lp, err)
	}
	last, err := store.LastIndex()
	if err != nil {
		return fmt.Errorf("%s: read the last index: %w", lp, err)
	}
	snap, err := highestSnapshot(snaps)
	if err != nil {
		return err
	}
	var snapIndex uint64
	held := "no snapshot"
	if snap != nil {
		snapIndex = snap.Index
		held = fmt.Sprintf("snapshot %s to index %d", snap.ID, snap.Index)
	}
	if last == 0 {
		held = "no entries, and " + held
	} else {
		held = fmt.Sprintf("entries %d to %d, and %s", first, last, held)
	}
	if last > 0 && first > snapIndex+1 {
		// Raft cuts the head of its log only up to a snapshot it synced.
		return lost(m, dir, lp, "holds %s: entries %d to %d are in neither", held, snapIndex+1, first-1)
	}
	switch {
	case last > 0 && first <= m.Index && m.Index <= last:
		var l raft.Log
		err := store.GetLog(m.Index, &l)
		switch {
		case err == nil && l.Term != m.Term:
			return lost(m, dir, lp, "holds an entry of term %d at index %d (it holds %s): not the log this node had", l.Term, m.Index, held)
		case err == nil, errors.Is(err, raft.ErrLogNotFound) && snapIndex >= m.Index:
			// A bbolt log may skip what a snapshot holds.
		case errors.Is(err, raft.ErrLogNotFound):
			return lost(m, dir, lp, "has no entry at index %d (it holds %s)", m.Index, held)
		default:
			return fmt.Errorf("%s: read entry %d: %w", lp, m.Index, err)
		}
	case snap != nil && snapIndex == m.Index:
		if snap.Term != m.Term {
			return lost(m, dir, filepath.Join(dir, "snapshots", snap.ID), "a snapshot of term %d at index %d: not the log this node had", snap.Term, m.Index)
		}
	case snapIndex > m.Index:
	default:
		return lost(m, dir, lp, "holds %s", held)
	}
	term, err := store.GetUint64(keyCurrentTerm)
	if err != nil && !errors.Is(err, raftboltdb.ErrKeyNotFound) {
		return fmt.Errorf("%s: read the current term: %w", lp, err)
	}
	if term < m.CurrentTerm {
		return lost(m, dir, lp, "its current term is %d: the vote is lost", term)
	}
	return nil
}

// markWriter keeps a running node's mark up to date: every interval when
// the commit index or the term moved, after every snapshot, and at a clean
// stop. Each write is a few small syncs (writeMark); a write that fails
// (a full disk) leaves the previous mark, which still holds, and is
// logged.
type markWriter struct {
	dir      string
	nodeID   string
	format   string
	interval time.Duration
	store    logStore
	snaps    raft.SnapshotStore
	commit   func() uint64
	log      hclog.Logger
	kick     <-chan struct{}

	mu   sync.Mutex // serializes update
	last logMark    // what the mark file holds (zero: none)

	stop     chan struct{}
	done     chan struct{}
	stopOnce sync.Once
}

func (w *markWriter) run() {
	defer close(w.done)
	t := time.NewTicker(w.interval)
	defer t.Stop()
	for {
		select {
		case <-w.stop:
			return
		case <-t.C:
		case <-w.kick:
		}
		if err := w.update(); err != nil {
			w.log.Warn("could not bring the log mark up to date; the previous one stands", "error", err.Error())
		}
	}
}

// close stops the loop and writes the mark a last time (raft has
// stopped: its commit index is final). Safe to call more than once.
func (w *markWriter) close() {
	w.stopOnce.Do(func() {
		close(w.stop)
		<-w.done
		if err := w.update(); err != nil {
			w.log.Warn("could not bring the log mark up to date at the stop; the previous one stands", "error", err.Error())
		}
	})
}

// update writes the mark when the commit index or the current term went
// past it. Entries up to raft's commit index are durable here (a leader
// counts itself once its append synced, a follower commits no further
// than what it stored) and no leader ever removes them; compaction only
// moves them into a snapshot, synced before the log is cut. So the mark
// never records what a crash may legitimately take away.
func (w *markWriter) update() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	next := w.last
	next.NodeID, next.Log = w.nodeID, w.format
	if c := w.commit(); c > next.Index {
		var l raft.Log
		err := w.store.GetLog(c, &l)
		switch {
		case err == nil:
			next.Index, next.Term = c, l.Term
		case errors.Is(err, raft.ErrLogNotFound):
			// Compacted since (or a follower's log emptied by an installed
			// snapshot): the newest snapshot holds it.
			snap, err := highestSnapshot(w.snaps)
			if err != nil {
				return err
			}
			if snap != nil && snap.Index >= c {
				next.Index, next.Term = snap.Index, snap.Term
			}
		default:
			return err
		}
	}
	if next.Index == 0 {
		return nil // nothing committed yet: not a member of anything to lose
	}
	term, err := w.store.GetUint64(keyCurrentTerm)
	if err != nil && !errors.Is(err, raftboltdb.ErrKeyNotFound) {
		return err
	}
	next.CurrentTerm = max(next.CurrentTerm, term)
	if next == w.last {
		return nil
	}
	if err := writeMark(w.dir, next); err != nil {
		return err
	}
	w.last = next
	return nil
}

// highestSnapshot is the snapshot of the highest index in the store (nil:
// none).
func highestSnapshot(snaps raft.SnapshotStore) (*raft.SnapshotMeta, error) {
	metas, err := snaps.List()
	if err != nil {
		return nil, fmt.Errorf("list the snapshots: %w", err)
	}
	var best *raft.SnapshotMeta
	for _, m := range metas {
		if best == nil || m.Index > best.Index {
			best = m
		}
	}
	return best, nil
}
