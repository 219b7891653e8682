package raftnode

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// ErrHasState is returned by Seed when the data dir already holds Raft
// state: a restore never overwrites a node.
var ErrHasState = errors.New("raftnode: the data dir already holds raft state")

// Seed builds the data dir of a node of a new cluster from a state
// machine snapshot (an offline restore): a Raft snapshot at index and
// term whose configuration is members, and a current term of term. Every
// member of the new cluster is seeded from the same snapshot with the
// same members; they then start without --initial-members bootstrapping
// (the snapshot carries the configuration) and elect a leader.
// The new log is in the default format (LogStoreWAL). It writes the data
// dir's log mark (MarkFile) last, replacing one a lost log left.
func Seed(dataDir string, index, term uint64, members []Peer, data io.Reader) error {
	if len(members) == 0 {
		return errors.New("raftnode: seed needs at least one member")
	}
	if index == 0 || term == 0 {
		return fmt.Errorf("raftnode: seed at index %d term %d: both must be positive", index, term)
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return fmt.Errorf("raftnode: data dir: %w", err)
	}
	format, err := chooseFormat(dataDir, "")
	if err != nil {
		return fmt.Errorf("raftnode: %w", err)
	}
	store, err := openLogStore(dataDir, format, 0, hclog.NewNullLogger())
	if err != nil {
		return fmt.Errorf("raftnode: %w", err)
	}
	defer store.Close()
	snaps, err := raft.NewFileSnapshotStoreWithLogger(dataDir, 2, hclog.NewNullLogger())
	if err != nil {
		return fmt.Errorf("raftnode: snapshot store: %w", err)
	}
	has, err := raft.HasExistingState(store, store, snaps)
	if err != nil {
		return fmt.Errorf("raftnode: read state: %w", err)
	}
	if has {
		return fmt.Errorf("%w (%s): restore into an empty directory", ErrHasState, dataDir)
	}
	var conf raft.Configuration
	seen := map[string]bool{}
	for _, p := range members {
		if p.ID == "" || p.Addr == "" || seen[p.ID] || seen["addr:"+p.Addr] {
			return fmt.Errorf("%w: %q=%q: empty or listed twice", ErrBadPeer, p.ID, p.Addr)
		}
		seen[p.ID], seen["addr:"+p.Addr] = true, true
		conf.Servers = append(conf.Servers, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(p.ID), Address: raft.ServerAddress(p.Addr)})
	}
	// The snapshot meta keeps peers encoded by a transport (the legacy
	// peer list); every raft transport encodes an address as its bytes.
	_, enc := raft.NewInmemTransport("")
	defer enc.Close()
	sink, err := snaps.Create(1, index, term, conf, index, enc)
	if err != nil {
		return fmt.Errorf("raftnode: create snapshot: %w", err)
	}
	if _, err := io.Copy(sink, data); err != nil {
		_ = sink.Cancel()
		return fmt.Errorf("raftnode: write snapshot: %w", err)
	}
	if err := sink.Close(); err != nil {
		return fmt.Errorf("raftnode: write snapshot: %w", err)
	}
	// raft's stable-store key of the current term: elections in the new
	// cluster start above the snapshot's term, so log terms never go back.
	if err := store.SetUint64(keyCurrentTerm, term); err != nil {
		return fmt.Errorf("raftnode: set term: %w", err)
	}
	// The data dir now holds the snapshot: a start that finds it gone is
	// refused like any lost log. This replaces a mark left by a log that
	// was lost, which the restore is the recovery of.
	if err := writeMark(dataDir, logMark{Log: format, Index: index, Term: term, CurrentTerm: term}); err != nil {
		return fmt.Errorf("raftnode: %w", err)
	}
	return nil
}
