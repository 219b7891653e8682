package backup_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/grackle-coord/grackle/backup"
	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
	"github.com/grackle-coord/grackle/raftnode"
	"github.com/grackle-coord/grackle/server"
	"github.com/grackle-coord/grackle/server/servertest"
)

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// everything reads every semaphore, lease and holder through the API, in
// a canonical order, as text.
func everything(t *testing.T, c pb.GrackleServiceClient, namespaces []string) []string {
	ctx := ctxT(t)
	var out []string
	for _, ns := range namespaces {
		sems := must(c.ListSemaphores(ctx, &pb.ListSemaphoresRequest{NamespaceName: ns, Limit: 250}))
		for _, s := range sems.Semaphores {
			out = append(out, "sem "+ns+" "+s.Name+fmt.Sprintf(" permits=%d holds=%d", s.Permits, s.ActiveHolds))
			hs := must(c.ListSemaphoreHolders(ctx, &pb.ListSemaphoreHoldersRequest{NamespaceName: ns, SemaphoreName: s.Name, Limit: 250}))
			for _, h := range hs.Holders {
				out = append(out, fmt.Sprintf("holder %s %s %s w=%d token=%d", ns, s.Name, h.LeaseId, h.Weight, h.FencingToken))
			}
		}
		for _, p := range []string{"p0", "p1", "p2"} {
			ls := must(c.ListSemaphoreLeases(ctx, &pb.ListSemaphoreLeasesRequest{NamespaceName: ns, ProcessId: p, Limit: 250}))
			for _, l := range ls.Leases {
				out = append(out, fmt.Sprintf("lease %s %s %s created=%d", ns, l.LeaseId, l.ProcessId, l.CreatedAt))
			}
		}
		lls := must(c.ListLockLeases(ctx, &pb.ListLockLeasesRequest{NamespaceName: ns, Limit: 250}))
		for _, l := range lls.Leases {
			out = append(out, fmt.Sprintf("lock lease %s %s %s created=%d md=%v", ns, l.LeaseId, l.ProcessId, l.CreatedAt, l.Metadata))
		}
		locks := must(c.ListLocks(ctx, &pb.ListLocksRequest{NamespaceName: ns, Limit: 250}))
		for _, l := range locks.Locks {
			for _, h := range l.Holders {
				out = append(out, fmt.Sprintf("lock %s %s %v %s excl=%v token=%d", ns, l.Name, l.State, h.LeaseId, h.Exclusive, h.FencingToken))
			}
		}
	}
	sort.Strings(out)
	return out
}

func freeAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// Save a snapshot of a 3-node cluster through a follower (it relays the
// leader's stream), inspect it, restore it into a fresh 3-node cluster
// on other addresses, and read back every semaphore, lease and holder.
func TestSaveInspectRestoreRoundTrip(t *testing.T) {
	slow := func(cfg *server.Config) {
		cfg.HeartbeatTimeout, cfg.ElectionTimeout, cfg.LeaderLeaseTimeout = time.Second, time.Second, 500*time.Millisecond
	}
	src := servertest.Start(t, 3, slow)
	li := src.WaitLeader()
	c := src.Client(li)
	ctx := ctxT(t)
	namespaces := []string{"alpha", "beta"}
	for _, ns := range namespaces {
		must(c.CreateNamespace(ctx, &pb.CreateNamespaceRequest{Name: ns}))
		for i := 0; i < 4; i++ {
			must(c.CreateSemaphore(ctx, &pb.CreateSemaphoreRequest{NamespaceName: ns, SemaphoreName: fmt.Sprintf("s%d", i), Permits: 10}))
		}
		for p := 0; p < 3; p++ {
			l := must(c.CreateSemaphoreLease(ctx, &pb.CreateSemaphoreLeaseRequest{NamespaceName: ns, ProcessId: fmt.Sprintf("p%d", p), TtlSeconds: 300}))
			for i := 0; i <= p; i++ {
				must(c.AcquireSemaphore(ctx, &pb.AcquireSemaphoreRequest{NamespaceName: ns, SemaphoreName: fmt.Sprintf("s%d", i),
					LeaseId: l.Lease.LeaseId, Weight: int64(p + 1)}))
			}
		}
	}
	// Locks: a lease holding a subtree shared and a leaf exclusive, and a
	// second reader of the subtree.
	for _, ns := range namespaces {
		for p := 0; p < 2; p++ {
			l := must(c.CreateLockLease(ctx, &pb.CreateLockLeaseRequest{NamespaceName: ns, ProcessId: fmt.Sprintf("p%d", p), TtlSeconds: 300,
				Metadata: map[string]string{"n": fmt.Sprint(p)}}))
			must(c.AcquireLock(ctx, &pb.AcquireLockRequest{NamespaceName: ns, LockName: "db", LeaseId: l.Lease.LeaseId}))
			if p == 0 {
				must(c.AcquireLock(ctx, &pb.AcquireLockRequest{NamespaceName: ns, LockName: "jobs/1", LeaseId: l.Lease.LeaseId, Exclusive: true}))
			}
		}
	}
	want := everything(t, c, namespaces)
	if len(want) < 20 {
		t.Fatalf("workload too small: %v", want)
	}

	dir := t.TempDir()
	file := filepath.Join(dir, "backup.snap")
	fi := src.Follower()
	st := must(src.ClusterClient(fi).SaveSnapshot(ctx, &pb.SaveSnapshotRequest{}))
	f := must(os.Create(file))
	for {
		m, err := st.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		must(f.Write(m.Data))
	}
	f.Close()

	ins, err := backup.Inspect(file, "")
	if err != nil {
		t.Fatal(err)
	}
	if ins.Counts.Namespaces != 2 || ins.Counts.Semaphores != 8 || ins.Counts.Leases != 10 || ins.Counts.Holders != 12 ||
		ins.Counts.LockLeases != 4 || ins.Counts.Locks != 4 || ins.Counts.LockHolders != 6 {
		t.Fatalf("inspect counts: %+v", ins.Counts)
	}
	if ins.Header.Index == 0 || ins.Header.Term == 0 || ins.AppliedIndex > ins.Header.Index {
		t.Fatalf("inspect header: %v, applied %d", ins.Header, ins.AppliedIndex)
	}
	src.Close()

	// A fresh cluster on new addresses, every member restored from the file.
	var members []string
	cfgs := make([]server.Config, 3)
	for i := range cfgs {
		cfg := servertest.Config(t, fmt.Sprintf("r%d", i+1))
		slow(&cfg)
		cfg.RaftAddr, cfg.GRPCAddr = freeAddr(t), freeAddr(t)
		cfgs[i] = cfg
		members = append(members, cfg.NodeID+"="+cfg.RaftAddr+"="+cfg.GRPCAddr)
	}
	im := strings.Join(members, ",")
	for i := range cfgs {
		cfgs[i].InitialMembers = im
		if _, err := backup.Restore(file, cfgs[i].DataDir, cfgs[i].NodeID, im); err != nil {
			t.Fatalf("restore %s: %v", cfgs[i].NodeID, err)
		}
	}
	// Restoring over existing state is refused.
	if _, err := backup.Restore(file, cfgs[0].DataDir, cfgs[0].NodeID, im); !errors.Is(err, raftnode.ErrHasState) {
		t.Fatalf("restore over a restored dir: %v", err)
	}
	dst := servertest.New(t)
	for _, cfg := range cfgs {
		dst.StartNode(cfg)
	}
	dst.WaitMembers(3)
	li = dst.WaitLeader()
	got := everything(t, dst.Client(li), namespaces)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("restored state differs:\n got %v\nwant %v", got, want)
	}
	// The restored cluster takes writes, and fencing tokens go on upward.
	l := must(dst.Client(li).CreateSemaphoreLease(ctx, &pb.CreateSemaphoreLeaseRequest{NamespaceName: "alpha", ProcessId: "p0", TtlSeconds: 60}))
	a := must(dst.Client(li).AcquireSemaphore(ctx, &pb.AcquireSemaphoreRequest{NamespaceName: "alpha", SemaphoreName: "s3", LeaseId: l.Lease.LeaseId, Weight: 1}))
	if a.Outcome != pb.AcquireOutcome_ACQUIRE_OUTCOME_ACQUIRED {
		t.Fatalf("acquire after restore: %v", a)
	}
	for _, h := range want {
		var tok uint64
		if _, err := fmt.Sscanf(h[strings.LastIndex(h, "token=")+len("token="):], "%d", &tok); err == nil && tok >= a.Holder.FencingToken {
			t.Fatalf("fencing token %d after restore not above %d", a.Holder.FencingToken, tok)
		}
	}
}

func writeFile(t *testing.T, data []byte) string {
	p := filepath.Join(t.TempDir(), "x.snap")
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// A file cut short anywhere, with a byte changed anywhere, or with bytes
// appended is refused, by Inspect and by Restore, with ErrCorrupt.
func TestCorruptFilesRefused(t *testing.T) {
	var buf strings.Builder
	data := []byte(strings.Repeat("state machine bytes ", 100))
	w, err := backup.NewWriter(&buf, &pb.SnapshotFileHeader{Index: 7, Term: 2, DataSize: uint64(len(data))})
	if err != nil {
		t.Fatal(err)
	}
	must(w.Write(data))
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	good := []byte(buf.String())
	info, err := backup.VerifyFile(writeFile(t, good), nil)
	if err != nil || info.Header.Index != 7 || !proto.Equal(info.Header, &pb.SnapshotFileHeader{Index: 7, Term: 2, DataSize: uint64(len(data))}) {
		t.Fatalf("good file: %v %v", info, err)
	}
	cases := map[string][]byte{
		"empty":          {},
		"cut in header":  good[:10],
		"cut in data":    good[:len(good)/2],
		"checksum short": good[:len(good)-1],
		"appended":       append(append([]byte{}, good...), 0),
	}
	for _, at := range []int{0, 9, 14, len(good) / 2, len(good) - 1} {
		bad := append([]byte{}, good...)
		bad[at] ^= 0x40
		cases[fmt.Sprintf("byte %d altered", at)] = bad
	}
	for name, b := range cases {
		p := writeFile(t, b)
		if _, err := backup.VerifyFile(p, nil); !errors.Is(err, backup.ErrCorrupt) {
			t.Errorf("%s: verify: %v", name, err)
		}
		if _, err := backup.Inspect(p, ""); !errors.Is(err, backup.ErrCorrupt) {
			t.Errorf("%s: inspect: %v", name, err)
		}
		dir := filepath.Join(t.TempDir(), "d")
		if _, err := backup.Restore(p, dir, "n1", "n1=127.0.0.1:1=127.0.0.1:2"); !errors.Is(err, backup.ErrCorrupt) {
			t.Errorf("%s: restore: %v", name, err)
		}
		for _, log := range []string{"raft.db", "wal"} {
			if _, err := os.Stat(filepath.Join(dir, log)); err == nil {
				t.Errorf("%s: restore left a Raft log (%s) behind", name, log)
			}
		}
	}
	// A well-formed file whose data is not a state machine snapshot.
	if _, err := backup.Inspect(writeFile(t, good), ""); !errors.Is(err, backup.ErrCorrupt) || !errors.Is(err, backup.ErrNotState) {
		t.Errorf("non-FSM data: %v", err)
	}
}
