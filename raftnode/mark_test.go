package raftnode

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// TestMain runs the child of TestKilledNodeRestartsWithWhatItAcknowledged
// when asked to.
func TestMain(m *testing.M) {
	if dir := os.Getenv(childDirEnv); dir != "" {
		os.Exit(runChild(dir, os.Getenv(childFormatEnv)))
	}
	os.Exit(m.Run())
}

const (
	childDirEnv    = "RAFTNODE_TEST_CHILD_DIR"
	childFormatEnv = "RAFTNODE_TEST_CHILD_FORMAT"
)

// nodeConfig is a single test node on dir: small WAL segments (so the log
// spans sealed segments and a tail), fast elections.
func nodeConfig(dir, format string) Config {
	return Config{NodeID: "n1", DataDir: dir, BindAddr: "127.0.0.1:0", Bootstrap: true, LogStore: format,
		WALSegmentSize:   64 << 10,
		HeartbeatTimeout: 100 * time.Millisecond, ElectionTimeout: 100 * time.Millisecond, LeaderLeaseTimeout: 50 * time.Millisecond,
		FSM: &raft.MockFSM{}, Logger: hclog.NewNullLogger()}
}

func waitLeader(n *Node) error {
	deadline := time.Now().Add(20 * time.Second)
	for n.Raft.State() != raft.Leader {
		if time.Now().After(deadline) {
			return errors.New("no leader within 20 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	return nil
}

// writeThrough starts a node on dir, waits for it to lead, runs steps,
// and stops it cleanly.
func writeThrough(t *testing.T, dir, format string, steps ...func(t *testing.T, n *Node)) {
	t.Helper()
	n, err := New(nodeConfig(dir, format))
	must(t, err)
	defer func() { must(t, n.Close()) }()
	must(t, waitLeader(n))
	for _, s := range steps {
		s(t, n)
	}
}

func applyN(k int) func(t *testing.T, n *Node) {
	return func(t *testing.T, n *Node) {
		t.Helper()
		for i := 0; i < k; i++ {
			must(t, n.Raft.Apply([]byte(strings.Repeat("x", 512)), 10*time.Second).Error())
		}
	}
}

func snapshotNow(t *testing.T, n *Node) {
	t.Helper()
	must(t, n.Raft.Snapshot().Error())
}

// copyDir copies a directory tree of regular files (a stopped node's log).
func copyDir(t *testing.T, from, to string) {
	t.Helper()
	must(t, filepath.Walk(from, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(from, p)
		if err != nil {
			return err
		}
		dst := filepath.Join(to, rel)
		if fi.IsDir() {
			return os.MkdirAll(dst, 0o700)
		}
		src, err := os.Open(p)
		if err != nil {
			return err
		}
		defer src.Close()
		out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, src); err != nil {
			out.Close()
			return err
		}
		return out.Close()
	}))
}

// olderCopy returns a data dir whose Raft log (raft.db or wal/) is the
// copy kept after before, while its snapshots and mark are those after
// after: a log restored from an old file copy, whole and well formed.
func olderCopy(format string, before, after []func(*testing.T, *Node)) func(t *testing.T) (string, string) {
	return func(t *testing.T) (string, string) {
		dir := t.TempDir()
		writeThrough(t, dir, format, before...)
		aside := t.TempDir()
		log := logPath(dir, format)
		if format == LogStoreBolt {
			must(t, os.MkdirAll(aside, 0o700))
			copyDir(t, dir, aside) // raft.db and the rest; only raft.db is put back
		} else {
			copyDir(t, log, filepath.Join(aside, walDir))
		}
		writeThrough(t, dir, format, after...)
		must(t, os.RemoveAll(log))
		if format == LogStoreBolt {
			b, err := os.ReadFile(filepath.Join(aside, boltFile))
			must(t, err)
			must(t, os.WriteFile(log, b, 0o600))
		} else {
			copyDir(t, filepath.Join(aside, walDir), log)
		}
		return dir, log
	}
}

// tailSegment is the WAL's last segment file.
func tailSegment(t *testing.T, dir string) string {
	t.Helper()
	segs := walFiles(t, dir)
	if len(segs) == 0 {
		t.Fatal("no WAL segment")
	}
	return segs[len(segs)-1]
}

// A data dir whose Raft log lost what the node had acknowledged refuses
// to start, naming the file, the mark and the recovery: for the bbolt log
// and the WAL, with and without a snapshot. Every case here started on
// the code before the mark (as leader, on what was left), but for the
// empty raft.db beside a snapshot, which was refused without the
// recovery.
func TestLostLogIsRefused(t *testing.T) {
	withSnapshot := []func(*testing.T, *Node){applyN(200), snapshotNow, applyN(50)}
	noSnapshot := []func(*testing.T, *Node){applyN(250)}
	written := func(format string, steps []func(*testing.T, *Node), damage func(t *testing.T, dir string) string) func(t *testing.T) (string, string) {
		return func(t *testing.T) (string, string) {
			dir := t.TempDir()
			writeThrough(t, dir, format, steps...)
			return dir, damage(t, dir)
		}
	}
	truncateBolt := func(t *testing.T, dir string) string {
		p := filepath.Join(dir, boltFile)
		must(t, os.Truncate(p, 0))
		return p
	}
	removeBolt := func(t *testing.T, dir string) string {
		p := filepath.Join(dir, boltFile)
		must(t, os.Remove(p))
		return p
	}
	truncateTail := func(t *testing.T, dir string) string {
		p := tailSegment(t, dir)
		must(t, os.Truncate(p, 0))
		return p
	}
	removeWAL := func(t *testing.T, dir string) string {
		p := filepath.Join(dir, walDir)
		must(t, os.RemoveAll(p))
		return p
	}
	for _, tc := range []struct {
		name string
		make func(t *testing.T) (dir, file string)
		// beside a snapshot, a log missing or empty is refused with or
		// without the mark (the vote is lost too): no moving the mark aside
		final bool
	}{
		{"bolt, no snapshot: raft.db truncated to 0", written(LogStoreBolt, noSnapshot, truncateBolt), false},
		{"bolt, no snapshot: raft.db removed", written(LogStoreBolt, noSnapshot, removeBolt), false},
		{"bolt, snapshot: raft.db truncated to 0", written(LogStoreBolt, withSnapshot, truncateBolt), true},
		{"bolt, snapshot: raft.db removed", written(LogStoreBolt, withSnapshot, removeBolt), true},
		{"bolt, no snapshot: an older copy of raft.db", olderCopy(LogStoreBolt, []func(*testing.T, *Node){applyN(100)}, []func(*testing.T, *Node){applyN(100)}), false},
		{"bolt, snapshot: an older copy of raft.db", olderCopy(LogStoreBolt, []func(*testing.T, *Node){applyN(100), snapshotNow, applyN(20)}, []func(*testing.T, *Node){applyN(100)}), false},
		{"wal, no snapshot: the tail segment truncated to 0", written(LogStoreWAL, noSnapshot, truncateTail), false},
		{"wal, snapshot: the tail segment truncated to 0", written(LogStoreWAL, withSnapshot, truncateTail), false},
		{"wal, no snapshot: its only segment truncated to 0", func(t *testing.T) (string, string) {
			dir := t.TempDir()
			cfg := nodeConfig(dir, LogStoreWAL)
			cfg.WALSegmentSize = 4 << 20
			n, err := New(cfg)
			must(t, err)
			must(t, waitLeader(n))
			applyN(250)(t, n)
			must(t, n.Close())
			if segs := walFiles(t, dir); len(segs) != 1 {
				t.Fatalf("segments %v, want one", segs)
			}
			return dir, truncateTail(t, dir)
		}, false},
		{"wal, no snapshot: wal/ removed", written(LogStoreWAL, noSnapshot, removeWAL), false},
		{"wal, snapshot: wal/ removed", written(LogStoreWAL, withSnapshot, removeWAL), true},
		{"wal, no snapshot: an older copy of wal/", olderCopy(LogStoreWAL, []func(*testing.T, *Node){applyN(100)}, []func(*testing.T, *Node){applyN(100)}), false},
		{"wal, snapshot: an older copy of wal/", olderCopy(LogStoreWAL, []func(*testing.T, *Node){applyN(100), snapshotNow, applyN(20)}, []func(*testing.T, *Node){applyN(100)}), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, file := tc.make(t)
			m, err := readMark(dir)
			if err != nil || m == nil {
				t.Fatalf("no mark after a clean stop: %v %v", m, err)
			}
			n, err := New(nodeConfig(dir, ""))
			if err == nil {
				last := n.Raft.LastIndex()
				n.Close()
				t.Fatalf("started on a log that lost entries (its last index %d, the mark's %d)", last, m.Index)
			}
			if !errors.Is(err, ErrLogLost) || !errors.Is(err, ErrDamagedDataDir) {
				t.Fatalf("restart: %v, want ErrLogLost", err)
			}
			aside := "move " + filepath.Join(dir, MarkFile) + " aside"
			for _, want := range []string{file, filepath.Join(dir, MarkFile), fmt.Sprintf("held index %d", m.Index),
				"grackle snapshot restore", "grackle cluster remove n1", "wipe the data dir and rejoin", aside} {
				if want == aside && tc.final {
					if strings.Contains(err.Error(), want) {
						t.Errorf("the refusal offers to move the mark aside, which would not start it: %v", err)
					}
					continue
				}
				if !strings.Contains(err.Error(), want) {
					t.Errorf("the refusal does not say %q: %v", want, err)
				}
			}
			t.Log(err)
			// The operator may accept the loss: without the mark, the node
			// starts on what is left, as it did before marks.
			must(t, os.Rename(filepath.Join(dir, MarkFile), filepath.Join(dir, "mark.aside")))
			n, err = New(nodeConfig(dir, ""))
			if tc.final {
				if !errors.Is(err, ErrDamagedDataDir) {
					t.Fatalf("start with the mark moved aside: %v, want still refused", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("start with the mark moved aside: %v", err)
			}
			must(t, n.Close())
		})
	}
}

// An intact data dir restarts; the clean stop left a mark at its commit
// index, and a new data dir (no mark) starts as before.
func TestIntactDataDirRestartsPastItsMark(t *testing.T) {
	for _, format := range []string{LogStoreBolt, LogStoreWAL} {
		for _, snap := range []bool{false, true} {
			dir := t.TempDir()
			if _, err := readMark(dir); err != nil {
				t.Fatal(err)
			}
			steps := []func(*testing.T, *Node){applyN(30)}
			if snap {
				steps = append(steps, snapshotNow, applyN(5))
			}
			var last uint64
			writeThrough(t, dir, format, append(steps, func(t *testing.T, n *Node) { last = n.Raft.LastIndex() })...)
			m, err := readMark(dir)
			must(t, err)
			if m == nil || m.Index != last || m.Log != format || m.NodeID != "n1" || m.CurrentTerm == 0 {
				t.Fatalf("%s (snapshot %v): the mark after a clean stop is %+v, want index %d", format, snap, m, last)
			}
			writeThrough(t, dir, format, applyN(3))
			m2, err := readMark(dir)
			must(t, err)
			if m2.Index <= m.Index {
				t.Fatalf("%s: the mark did not move: %d then %d", format, m.Index, m2.Index)
			}
		}
	}
}

// A running node brings its mark up to date without stopping.
func TestMarkFollowsCommitsWhileRunning(t *testing.T) {
	dir := t.TempDir()
	cfg := nodeConfig(dir, "")
	cfg.MarkInterval = 10 * time.Millisecond
	n, err := New(cfg)
	must(t, err)
	defer n.Close()
	must(t, waitLeader(n))
	applyN(20)(t, n)
	want := n.Raft.LastIndex()
	waitUntil(t, "the mark reaching the last commit", func() bool {
		m, err := readMark(dir)
		return err == nil && m != nil && m.Index >= want
	})
}

// A mark that is not one (damaged: it is only ever replaced whole) is
// refused by name rather than ignored.
func TestDamagedMarkIsRefused(t *testing.T) {
	dir := t.TempDir()
	writeThrough(t, dir, "", applyN(5))
	p := filepath.Join(dir, MarkFile)
	must(t, os.WriteFile(p, []byte("{\"version\":1,"), 0o600))
	_, err := New(nodeConfig(dir, ""))
	if !errors.Is(err, ErrDamagedDataDir) || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "aside") {
		t.Fatalf("restart with a damaged mark: %v", err)
	}
}

// A restore (Seed) writes the mark of what it seeded, also into a data dir
// whose log was lost (the mark left by it is replaced): the restored node
// starts, and a restored dir that then loses its snapshot is refused.
func TestSeedWritesTheMark(t *testing.T) {
	dir := t.TempDir()
	writeThrough(t, dir, LogStoreWAL, applyN(10))
	must(t, os.RemoveAll(filepath.Join(dir, walDir)))
	if _, err := New(nodeConfig(dir, "")); !errors.Is(err, ErrLogLost) {
		t.Fatalf("lost log: %v", err)
	}
	must(t, Seed(dir, 500, 7, []Peer{{ID: "n1", Addr: "127.0.0.1:1"}}, strings.NewReader("state")))
	m, err := readMark(dir)
	must(t, err)
	if m == nil || m.Index != 500 || m.Term != 7 || m.CurrentTerm != 7 || m.Log != LogStoreWAL {
		t.Fatalf("the seeded mark: %+v", m)
	}
	cfg := nodeConfig(dir, "")
	cfg.FSM = &anyStateFSM{}
	n, err := New(cfg)
	if err != nil {
		t.Fatalf("start a restored data dir: %v", err)
	}
	must(t, waitLeader(n))
	applyN(3)(t, n)
	must(t, n.Close())
	must(t, os.RemoveAll(filepath.Join(dir, "snapshots")))
	if _, err := New(nodeConfig(dir, "")); !errors.Is(err, ErrLogLost) || !strings.Contains(err.Error(), "entries 1 to 500 are in neither") {
		t.Fatalf("a restored data dir without its snapshot: %v", err)
	}
}

// A node killed (SIGKILL, no clean stop) at any point while it writes,
// snapshots, compacts and rotates WAL segments, with its mark written
// every millisecond, restarts, and its log holds every entry it
// acknowledged: the mark never gets ahead of what a crash leaves.
func TestKilledNodeRestartsWithWhatItAcknowledged(t *testing.T) {
	for _, format := range []string{LogStoreBolt, LogStoreWAL} {
		t.Run(format, func(t *testing.T) {
			dir := t.TempDir()
			for round, killAfter := range []int{1, 40, 150, 400} {
				acked, marked := runAndKill(t, dir, format, killAfter)
				n, err := New(nodeConfig(dir, format))
				if err != nil {
					t.Fatalf("round %d: restart after SIGKILL at acknowledged index %d: %v", round, acked, err)
				}
				last := n.Raft.LastIndex()
				must(t, n.Close())
				if last < acked {
					t.Fatalf("round %d: the log ends at %d, below acknowledged index %d", round, last, acked)
				}
				t.Logf("round %d: killed after index %d was acknowledged (mark on disk then: %d); restarted with the log at %d", round, acked, marked, last)
			}
			// The kills came while it also snapshotted and compacted.
			if snaps, err := checkSnapshots(filepath.Join(dir, "snapshots")); err != nil || len(snaps) == 0 {
				t.Fatalf("no snapshot was taken (%v): the kills did not cover compaction", err)
			}
		})
	}
}

// runAndKill runs the child node on dir until it acknowledged killAfter
// writes, kills it with SIGKILL, and returns the highest index it
// acknowledged and the mark's index on disk after the kill.
func runAndKill(t *testing.T, dir, format string, killAfter int) (acked, marked uint64) {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), childDirEnv+"="+dir, childFormatEnv+"="+format)
	out, err := cmd.StdoutPipe()
	must(t, err)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	must(t, cmd.Start())
	timer := time.AfterFunc(2*time.Minute, func() { _ = cmd.Process.Kill() })
	defer timer.Stop()
	sc := bufio.NewScanner(out)
	count := 0
	for sc.Scan() {
		idx, err := strconv.ParseUint(sc.Text(), 10, 64)
		if err != nil {
			t.Fatalf("child said %q", sc.Text())
		}
		acked = max(acked, idx)
		if count++; count == killAfter {
			must(t, cmd.Process.Kill())
		}
	}
	_ = cmd.Wait()
	if count < killAfter {
		t.Fatalf("the child stopped after %d acknowledged writes, before it was killed: %s", count, stderr.String())
	}
	if m, err := readMark(dir); err != nil {
		t.Fatalf("the mark after SIGKILL: %v", err)
	} else if m != nil {
		marked = m.Index
	}
	return acked, marked
}

// runChild is the killed node: it writes until killed (bounded in count
// and time), printing each acknowledged entry's index once Apply returned.
func runChild(dir, format string) int {
	cfg := nodeConfig(dir, format)
	cfg.MarkInterval = time.Millisecond
	cfg.SnapshotThreshold = 64
	cfg.SnapshotInterval = 20 * time.Millisecond
	cfg.TrailingLogs = 16
	n, err := New(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if err := waitLeader(n); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	deadline := time.Now().Add(time.Minute)
	for i := 0; i < 20000 && time.Now().Before(deadline); i++ {
		f := n.Raft.Apply([]byte(strings.Repeat("y", 700)), 10*time.Second)
		if err := f.Error(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		fmt.Fprintln(os.Stdout, f.Index())
	}
	fmt.Fprintln(os.Stderr, "not killed in time")
	return 3
}

// anyStateFSM restores from any bytes (a seeded test snapshot).
type anyStateFSM struct{ raft.MockFSM }

func (*anyStateFSM) Restore(rc io.ReadCloser) error {
	_, err := io.Copy(io.Discard, rc)
	rc.Close()
	return err
}

// A follower that was down while the leader compacted catches up by an
// installed snapshot (which, on the WAL, empties its log), with its mark
// written every millisecond meanwhile, and then restarts: the mark it
// keeps through the install is what the snapshot holds, never more.
func TestFollowerCaughtUpBySnapshotRestarts(t *testing.T) {
	for _, format := range []string{LogStoreWAL, LogStoreBolt} {
		t.Run(format, func(t *testing.T) {
			cfg := func(id string, bootstrap bool, bind string) Config {
				c := nodeConfig(t.TempDir(), format)
				c.NodeID, c.Bootstrap, c.BindAddr = id, bootstrap, bind
				c.HeartbeatTimeout, c.ElectionTimeout, c.LeaderLeaseTimeout = 500*time.Millisecond, 500*time.Millisecond, 250*time.Millisecond
				c.TrailingLogs, c.SnapshotThreshold = 8, 1<<20
				c.MarkInterval = time.Millisecond
				return c
			}
			c1 := cfg("n1", true, "127.0.0.1:0")
			n1, err := New(c1)
			must(t, err)
			defer n1.Close()
			must(t, waitLeader(n1))
			c3 := cfg("n3", false, "127.0.0.1:0")
			var followers []*Node
			for _, c := range []Config{cfg("n2", false, "127.0.0.1:0"), c3} {
				n, err := New(c)
				must(t, err)
				followers = append(followers, n)
				must(t, n1.Raft.AddVoter(raft.ServerID(c.NodeID), n.Addr, 0, 10*time.Second).Error())
			}
			n2, n3 := followers[0], followers[1]
			defer n2.Close()
			caughtUp := func(n *Node) func() bool {
				return func() bool { return n.Raft.AppliedIndex() >= n1.Raft.LastIndex() }
			}
			applyN(20)(t, n1)
			waitUntil(t, "n3 applying the first writes", caughtUp(n3))
			c3.BindAddr = string(n3.Addr)
			must(t, n3.Close())

			applyN(100)(t, n1)
			snapshotNow(t, n1)
			applyN(5)(t, n1)
			n3, err = New(c3)
			must(t, err)
			waitUntil(t, "n3 catching up", caughtUp(n3))
			if snaps, err := checkSnapshots(filepath.Join(c3.DataDir, "snapshots")); err != nil || len(snaps) == 0 {
				n3.Close()
				t.Fatalf("n3 caught up without a snapshot (%v): the test did not install one", err)
			}
			applyN(5)(t, n1)
			waitUntil(t, "n3 applying after the snapshot", caughtUp(n3))
			must(t, n3.Close())
			m, err := readMark(c3.DataDir)
			must(t, err)
			n3, err = New(c3)
			if err != nil {
				t.Fatalf("restart of a follower caught up by snapshot (mark %+v): %v", m, err)
			}
			must(t, n3.Close())
		})
	}
}
