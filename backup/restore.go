package backup

import (
	"fmt"
	"io"
	"os"

	"github.com/grackle-coord/grackle/fsm"
	"github.com/grackle-coord/grackle/raftnode"
)

// Contents is a verified file's header and what its data holds.
type Contents struct {
	*Info
	Counts       fsm.Counts
	AppliedIndex uint64 // the state machine's own last applied index
}

// Inspect verifies the file and loads its data into a scratch state
// machine (which checks the data itself), returning what it holds. The
// data is spooled to a temporary file in tmpDir ("" = the system's).
func Inspect(path, tmpDir string) (*Contents, error) {
	c, f, err := load(path, tmpDir)
	if f != nil {
		f.Close()
		os.Remove(f.Name())
	}
	return c, err
}

// load verifies path, spools its data to a temporary file (returned,
// rewound, for the caller to remove) and loads it into a scratch FSM.
func load(path, tmpDir string) (*Contents, *os.File, error) {
	tmp, err := os.CreateTemp(tmpDir, "grackle-restore-*.snap")
	if err != nil {
		return nil, nil, err
	}
	info, err := VerifyFile(path, tmp)
	if err != nil {
		return nil, tmp, fmt.Errorf("%s: %w", path, err)
	}
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		return nil, tmp, err
	}
	f := fsm.New(fsm.Options{TempDir: tmpDir})
	if err := f.Restore(io.NopCloser(tmp)); err != nil {
		return nil, tmp, fmt.Errorf("%s: %w: %w: %v", path, ErrCorrupt, ErrNotState, err)
	}
	if err := f.CheckInvariants(); err != nil {
		return nil, tmp, fmt.Errorf("%s: %w: invariants: %v", path, ErrCorrupt, err)
	}
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		return nil, tmp, err
	}
	return &Contents{Info: info, Counts: f.Counts(), AppliedIndex: f.AppliedIndex()}, tmp, nil
}

// Restore builds dataDir, which must hold no Raft state (else an error
// wrapping raftnode.ErrHasState), as the data dir
// of node nodeID of a new cluster of initialMembers
// ("id=raftAddr[=grpcAddr],...", as --initial-members) from the snapshot
// file at path. Every member is restored from the same file with the same
// members, then started with the same --initial-members (ignored once
// state exists; it gives the members' gRPC addresses).
func Restore(path, dataDir, nodeID, initialMembers string) (*Contents, error) {
	peers, _, err := raftnode.ParsePeers(initialMembers)
	if err != nil {
		return nil, err
	}
	if len(peers) == 0 {
		return nil, fmt.Errorf("--initial-members: required")
	}
	found := false
	for _, p := range peers {
		found = found || p.ID == nodeID
	}
	if !found {
		return nil, fmt.Errorf("--initial-members does not list --node-id %q", nodeID)
	}
	c, f, err := load(path, "")
	if f != nil {
		defer os.Remove(f.Name())
		defer f.Close()
	}
	if err != nil {
		return nil, err
	}
	idx := c.Header.Index
	if c.AppliedIndex > idx {
		idx = c.AppliedIndex
	}
	if err := raftnode.Seed(dataDir, idx, c.Header.Term, peers, f); err != nil {
		return nil, err
	}
	return c, nil
}
