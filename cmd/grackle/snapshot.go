package main

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/grackle-coord/grackle/backup"
	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
)

func (a *app) snapshotCmd() *cobra.Command {
	cmd := a.group("snapshot", "Back up the state machine and restore a new cluster from it")
	cmd.AddCommand(a.snapshotSaveCmd(), a.snapshotInspectCmd(), a.snapshotRestoreCmd())
	return cmd
}

// snapshotSaveTime is added to --timeout for the stream of a large state.
const snapshotSaveTime = 10 * time.Minute

func (a *app) snapshotSaveCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "save FILE",
		Short: "Save a consistent snapshot of the state machine, streamed from the leader, to FILE",
		Long: `Save a consistent snapshot of the state machine to FILE. Any node relays the
leader's stream; the leader runs a barrier first, so the snapshot holds
every write committed before the call. The file ends with a SHA-256 of its
content; it is written to FILE.part, verified, then renamed to FILE.`,
		Args: positional("FILE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			path := args[0]
			part := path + ".part"
			_, err := call(a, cmd, snapshotSaveTime, func(ctx context.Context, c clients) (struct{}, error) {
				f, err := os.OpenFile(part, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
				if err != nil {
					return struct{}{}, &exitError{code: exitCallFailed, msg: err.Error()}
				}
				defer f.Close()
				st, err := c.cluster.SaveSnapshot(ctx, &pb.SaveSnapshotRequest{})
				if err != nil {
					return struct{}{}, err
				}
				for {
					m, err := st.Recv()
					if errors.Is(err, io.EOF) {
						break
					}
					if err != nil {
						os.Remove(part)
						return struct{}{}, err
					}
					if _, err := f.Write(m.GetData()); err != nil {
						os.Remove(part)
						return struct{}{}, &exitError{code: exitCallFailed, msg: err.Error()}
					}
				}
				if err := f.Sync(); err != nil {
					return struct{}{}, &exitError{code: exitCallFailed, msg: err.Error()}
				}
				return struct{}{}, f.Close()
			})
			if err != nil {
				os.Remove(part)
				return err
			}
			info, err := backup.VerifyFile(part, nil)
			if err != nil {
				os.Remove(part)
				return &exitError{code: exitCallFailed, msg: "snapshot received but invalid: " + err.Error()}
			}
			if err := os.Rename(part, path); err != nil {
				return &exitError{code: exitCallFailed, msg: err.Error()}
			}
			fmt.Fprintf(a.stdout, "saved %s: index %d, term %d, %d bytes, sha256 %s\n", path,
				info.Header.GetIndex(), info.Header.GetTerm(), info.Size, hex.EncodeToString(info.Checksum[:]))
			return nil
		},
	}
}

type inspectOut struct {
	Index        uint64 `json:"index"`
	Term         uint64 `json:"term"`
	AppliedIndex uint64 `json:"applied_index"`
	CreatedAt    string `json:"created_at"`
	LeaderID     string `json:"leader_id"`
	Version      string `json:"version"`
	Bytes        int64  `json:"bytes"`
	SHA256       string `json:"sha256"`
	Namespaces   int    `json:"namespaces"`
	Semaphores   int    `json:"semaphores"`
	Leases       int    `json:"leases"`
	Holders      int    `json:"holders"`
}

func (a *app) snapshotInspectCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "inspect FILE",
		Short: "Verify a snapshot file and print its index, term, checksum and counts",
		Long: `Verify a snapshot file (structure, checksum, and the state machine data
itself, loaded into a scratch state machine) and print what it holds.
Offline: no node is contacted. A truncated or altered file is refused.`,
		Args: positional("FILE"),
		RunE: func(_ *cobra.Command, args []string) error {
			c, err := backup.Inspect(args[0], "")
			if err != nil {
				return &exitError{code: exitCallFailed, msg: err.Error()}
			}
			h := c.Header
			o := inspectOut{Index: h.GetIndex(), Term: h.GetTerm(), AppliedIndex: c.AppliedIndex,
				CreatedAt: time.Unix(0, h.GetCreatedAt()).UTC().Format(time.RFC3339Nano), LeaderID: h.GetLeaderId(),
				Version: h.GetVersion(), Bytes: c.Size, SHA256: hex.EncodeToString(c.Checksum[:]),
				Namespaces: c.Counts.Namespaces, Semaphores: c.Counts.Semaphores, Leases: c.Counts.Leases, Holders: c.Counts.Holders}
			if a.output == "json" {
				b, _ := json.MarshalIndent(o, "", "  ")
				fmt.Fprintln(a.stdout, string(b))
				return nil
			}
			t := &tableOut{w: a.stdout, now: a.now()}
			u := func(v uint64) string { return strconv.FormatUint(v, 10) }
			i := func(v int) string { return strconv.Itoa(v) }
			t.kv([2]string{"Index", u(o.Index)}, [2]string{"Term", u(o.Term)}, [2]string{"Applied index", u(o.AppliedIndex)},
				[2]string{"Created", o.CreatedAt}, [2]string{"Leader", o.LeaderID}, [2]string{"Version", o.Version},
				[2]string{"Bytes", strconv.FormatInt(o.Bytes, 10)}, [2]string{"SHA-256", o.SHA256},
				[2]string{"Namespaces", i(o.Namespaces)}, [2]string{"Semaphores", i(o.Semaphores)},
				[2]string{"Leases", i(o.Leases)}, [2]string{"Holders", i(o.Holders)})
			return nil
		},
	}
}

func (a *app) snapshotRestoreCmd() *cobra.Command {
	var dataDir, nodeID, members string
	cmd := &cobra.Command{
		Use:   "restore FILE --data-dir DIR --node-id ID --initial-members id=raft=grpc,...",
		Short: "Build the data dir of one node of a new cluster from a snapshot file (offline)",
		Long: `Build DIR, which must hold no Raft state, as the data dir of node ID of a new
cluster whose voters are --initial-members, from a verified snapshot file
(like etcdctl snapshot restore). Run it once per member with the same FILE
and --initial-members, then start every node with the same --node-id,
--data-dir and --initial-members: they elect a leader and serve the
snapshot's state. Leases keep their expiry times: restore soon, or expect
leases to expire at the first leader's start.`,
		Example: `  grackle snapshot restore backup.snap --data-dir /var/lib/grackle --node-id n1 \
    --initial-members n1=10.0.0.1:7421=10.0.0.1:7420,n2=10.0.0.2:7421=10.0.0.2:7420,n3=10.0.0.3:7421=10.0.0.3:7420`,
		Args: positional("FILE"),
		RunE: func(_ *cobra.Command, args []string) error {
			if dataDir == "" || nodeID == "" || members == "" {
				return usagef("--data-dir, --node-id and --initial-members are required")
			}
			c, err := backup.Restore(args[0], dataDir, nodeID, members)
			if err != nil {
				return &exitError{code: exitCallFailed, msg: err.Error()}
			}
			fmt.Fprintf(a.stdout, "restored %s into %s as %s: index %d, %d namespaces, %d semaphores, %d leases, %d holders\n",
				args[0], dataDir, nodeID, c.Header.GetIndex(), c.Counts.Namespaces, c.Counts.Semaphores, c.Counts.Leases, c.Counts.Holders)
			return nil
		},
	}
	cmd.Flags().StringVar(&dataDir, "data-dir", "", "data dir to create (must hold no Raft state)")
	cmd.Flags().StringVar(&nodeID, "node-id", "", "id of the node this data dir is for")
	cmd.Flags().StringVar(&members, "initial-members", "", `voters of the new cluster, "id=raftAddr=grpcAddr,..."`)
	return cmd
}
