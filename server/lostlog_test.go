package server_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
	"github.com/grackle-coord/grackle/raftnode"
	"github.com/grackle-coord/grackle/server"
	"github.com/grackle-coord/grackle/server/servertest"
)

// A node whose data dir lost its Raft log after acknowledging writes
// refuses to start, naming the file and the recovery, instead of starting
// as a new leader without them: raft.db truncated to 0 bytes (bbolt, no
// snapshot), and the WAL's tail segment truncated to 0 bytes (no
// snapshot: the whole log).
func TestNodeWithLostLogRefusesToStart(t *testing.T) {
	for _, tc := range []struct {
		format string
		damage func(t *testing.T, dir string) string
	}{
		{raftnode.LogStoreBolt, func(t *testing.T, dir string) string {
			p := filepath.Join(dir, "raft.db")
			if err := os.Truncate(p, 0); err != nil {
				t.Fatal(err)
			}
			return p
		}},
		{raftnode.LogStoreWAL, func(t *testing.T, dir string) string {
			segs, err := filepath.Glob(filepath.Join(dir, "wal", "*.wal"))
			if err != nil || len(segs) == 0 {
				t.Fatalf("WAL segments: %v %v", segs, err)
			}
			p := segs[len(segs)-1]
			if err := os.Truncate(p, 0); err != nil {
				t.Fatal(err)
			}
			return p
		}},
	} {
		t.Run(tc.format, func(t *testing.T) {
			c := servertest.New(t)
			cfg := servertest.Config(t, "node1")
			cfg.RaftLogStore = tc.format
			cfg.RaftWALSegmentSize = 4 << 20
			cfg.SnapshotThreshold = 1 << 30 // no snapshot: the log is all there is
			c.StartNode(cfg)
			c.WaitLeader()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			const acked = 100
			for i := 0; i < acked; i++ {
				if _, err := c.Client(0).CreateNamespace(ctx, &pb.CreateNamespaceRequest{Name: fmt.Sprintf("ns%03d", i)}); err != nil {
					t.Fatal(err)
				}
			}
			c.StopNode(0)
			file := tc.damage(t, cfg.DataDir)

			s, err := server.Start(cfg, servertest.Logger(t, "node1"))
			if err == nil {
				s.Close()
				t.Fatalf("started on a data dir whose Raft log (%s) was cut to 0 bytes after %d acknowledged writes", file, acked)
			}
			if !errors.Is(err, raftnode.ErrLogLost) {
				t.Fatalf("start: %v, want raftnode.ErrLogLost", err)
			}
			for _, want := range []string{file, raftnode.MarkFile, "grackle snapshot restore", "grackle cluster remove node1", "wipe the data dir"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("the refusal does not say %q: %v", want, err)
				}
			}
			t.Log(err)
		})
	}
}
