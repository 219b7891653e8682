package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
)

// BenchmarkLargeState: one real node (the grackle binary) is filled through
// its API, so through Raft, by 256 concurrent callers with
// GRACKLE_LARGE_LEASES leases (default 1,000,000) over
// GRACKLE_LARGE_SEMAPHORES semaphores (default 100,000), lease i holding one
// permit of semaphore i mod semaphores. It reports the node's resident set
// (VmRSS once filled, VmHWM its peak), then starts a second node with --join
// and reports the time from starting that process until its state machine
// has applied the first node's commit index (it catches up by an
// InstallSnapshot: the log before the last snapshot is gone), and the new
// node's resident set (GRACKLE_LARGE_GOMEMLIMIT sets both nodes' GOMEMLIMIT,
// GRACKLE_LARGE_MEMORY_LIMIT their --memory-limit, GRACKLE_LARGE_GC_HEADROOM
// their --gc-headroom).
// Filling a million leases takes minutes, so it runs
// only with GRACKLE_BENCH_LARGE=1 (make bench-large):
//
//	GRACKLE_BENCH_LARGE=1 go test -run '^$' -bench LargeState -benchtime 1x -timeout 90m ./e2e/
func BenchmarkLargeState(b *testing.B) {
	if os.Getenv("GRACKLE_BENCH_LARGE") == "" {
		b.Skip("set GRACKLE_BENCH_LARGE=1 to fill a node with 1M leases (takes minutes)")
	}
	leases := envInt("GRACKLE_LARGE_LEASES", 1_000_000)
	sems := envInt("GRACKLE_LARGE_SEMAPHORES", 100_000)
	const callers = 256
	for n := 0; n < b.N; n++ {
		// Leases must outlive the fill, hence the long TTL. Snapshots every
		// 2,048 entries (checked every 10 s) keep the log short, as a
		// long-running node's would be: the leader packs about 50 of these
		// commands into one entry, so a million leases are only some
		// 40,000 entries, and a threshold of 100,000 (as here before
		// packing) never took a snapshot at all, so the new node replayed
		// the whole log instead of installing a snapshot.
		args := []string{"--snapshot-threshold", "2048", "--snapshot-interval", "10s", "--trailing-logs", "1024",
			"--max-leases-per-namespace", strconv.Itoa(2 * leases), "--max-semaphores-per-namespace", strconv.Itoa(2 * sems),
			"--max-ttl-seconds", "86400"}
		// GRACKLE_LARGE_PPROF=DIR: node 1 serves Go's profiles, and its heap
		// profile (with the runtime's memory statistics) is saved in DIR
		// once filled.
		profDir := os.Getenv("GRACKLE_LARGE_PPROF")
		var httpAddr string
		if profDir != "" {
			httpAddr = fmt.Sprintf("127.0.0.1:%d", FreePorts(b, 1)[0])
			args = append(args, "--http-addr", httpAddr, "--pprof")
		}
		p := NewCluster(b, 1, args...)
		// GRACKLE_LARGE_GOMEMLIMIT (e.g. 700MiB) is passed to both nodes as
		// GOMEMLIMIT: the Go runtime's soft memory limit, the knob that keeps
		// the heap's GC headroom (by default as much again as the live heap)
		// from pushing a large node's RSS up.
		var env []string
		if v := os.Getenv("GRACKLE_LARGE_GOMEMLIMIT"); v != "" {
			env = []string{"GOMEMLIMIT=" + v}
			p.Nodes[0].Env = env
			b.Logf("nodes run with GOMEMLIMIT=%s", v)
		}
		// GRACKLE_LARGE_MEMORY_LIMIT (e.g. 900MiB) is passed to both nodes
		// as --memory-limit; without it they run with the default (auto:
		// 90 % of the cgroup's or the machine's memory).
		var memFlag []string
		if v := os.Getenv("GRACKLE_LARGE_MEMORY_LIMIT"); v != "" {
			memFlag = []string{"--memory-limit", v}
			p.Nodes[0].Args = append(p.Nodes[0].Args, memFlag...)
			b.Logf("nodes run with --memory-limit %s", v)
		}
		// GRACKLE_LARGE_GC_HEADROOM (e.g. off) is passed to both nodes as
		// --gc-headroom; without it they run with the default (auto).
		if v := os.Getenv("GRACKLE_LARGE_GC_HEADROOM"); v != "" {
			memFlag = append(memFlag, "--gc-headroom", v)
			p.Nodes[0].Args = append(p.Nodes[0].Args, "--gc-headroom", v)
			b.Logf("nodes run with --gc-headroom %s", v)
		}
		p.StartAll()
		p.WaitLeader(0, 30*time.Second)
		ctx, cancel := context.WithTimeout(context.Background(), 80*time.Minute)
		conns := make([]pb.GrackleServiceClient, 8)
		for i := range conns {
			conns[i] = pb.NewGrackleServiceClient(p.Dial(0))
		}
		if _, err := conns[0].CreateNamespace(ctx, &pb.CreateNamespaceRequest{Name: "big"}); err != nil {
			b.Fatal(err)
		}
		permits := int64(leases/sems + 1)
		start := time.Now()
		var done atomic.Int64
		stopProgress := progress(b, &done, int64(sems+2*leases), start)
		run(b, ctx, callers, sems, func(w, i int) error {
			_, err := conns[w%len(conns)].CreateSemaphore(ctx, &pb.CreateSemaphoreRequest{NamespaceName: "big",
				SemaphoreName: largeSemName(i), Permits: permits})
			done.Add(1)
			return err
		})
		run(b, ctx, callers, leases, func(w, i int) error {
			cl := conns[w%len(conns)]
			l, err := cl.CreateSemaphoreLease(ctx, &pb.CreateSemaphoreLeaseRequest{NamespaceName: "big",
				ProcessId: fmt.Sprintf("host-%d/pid-%d", i%1000, i), TtlSeconds: 86400})
			if err != nil {
				return err
			}
			done.Add(1)
			r, err := cl.AcquireSemaphore(ctx, &pb.AcquireSemaphoreRequest{NamespaceName: "big", SemaphoreName: largeSemName(i % sems),
				LeaseId: l.Lease.LeaseId, Weight: 1})
			if err != nil {
				return err
			}
			if r.Outcome != pb.AcquireOutcome_ACQUIRE_OUTCOME_ACQUIRED {
				return fmt.Errorf("acquire of %s: %v", largeSemName(i%sems), r.Outcome)
			}
			done.Add(1)
			return nil
		})
		stopProgress()
		if b.Failed() {
			cancel()
			return
		}
		fill := time.Since(start)
		ops := float64(sems + 2*leases)
		b.Logf("filled %d semaphores and %d leases (one hold each) in %v: %.0f writes/s", sems, leases, fill.Round(time.Second), ops/fill.Seconds())
		m1 := procMemory(b, p.Nodes[0])
		b.Logf("node n1: %v; %d snapshot(s) on disk", m1, snapshotsIn(p.Nodes[0].DataDir))
		if profDir != "" {
			for name, q := range map[string]string{"n1-heap.pprof": "", "n1-heap.txt": "?debug=1"} {
				saveURL(b, "http://"+httpAddr+"/debug/pprof/heap"+q, filepath.Join(profDir, name))
			}
		}

		st, err := pb.NewClusterServiceClient(p.Dial(0)).GetClusterStatus(ctx, &pb.GetClusterStatusRequest{})
		if err != nil {
			b.Fatal(err)
		}
		ports := FreePorts(b, 2)
		nd := &Node{ID: "n2", GRPC: fmt.Sprintf("127.0.0.1:%d", ports[0]), Raft: fmt.Sprintf("127.0.0.1:%d", ports[1]),
			DataDir: filepath.Join(b.TempDir(), "n2"), LogPath: filepath.Join(b.TempDir(), "n2.log")}
		nd.Args = []string{"server", "--node-id", "n2", "--data-dir", nd.DataDir, "--grpc-addr", nd.GRPC, "--raft-addr", nd.Raft,
			"--http-addr", "", "--log-level", "warn", "--join", p.Nodes[0].GRPC,
			"--max-leases-per-namespace", strconv.Itoa(2 * leases), "--max-semaphores-per-namespace", strconv.Itoa(2 * sems),
			"--max-ttl-seconds", "86400"}
		nd.Args = append(nd.Args, memFlag...)
		nd.Env = env
		p.Nodes = append(p.Nodes, nd)
		joined := time.Now()
		p.Start(1)
		me := pb.NewClusterServiceClient(p.Dial(1))
		for {
			cctx, cc := context.WithTimeout(ctx, time.Second)
			s, err := me.GetClusterStatus(cctx, &pb.GetClusterStatusRequest{})
			cc()
			if err == nil && s.AppliedIndex >= st.CommitIndex {
				break
			}
			if ctx.Err() != nil || time.Since(joined) > 10*time.Minute {
				b.Fatal("n2 did not catch up within 10 minutes")
			}
			time.Sleep(20 * time.Millisecond)
		}
		took := time.Since(joined)
		m2 := procMemory(b, nd)
		m1 = procMemory(b, p.Nodes[0])
		if snapshotsIn(nd.DataDir) == 0 {
			b.Fatalf("n2 caught up in %v by replaying the log, not by a snapshot: this measures nothing of what it claims", took)
		}
		// A follower keeps the snapshot it was sent: one on disk means it
		// caught up by InstallSnapshot, none that it replayed the log.
		b.Logf("n2 caught up to index %d in %v (%d snapshot(s) on its disk); n2: %v; n1 now: %v",
			st.CommitIndex, took.Round(time.Millisecond), snapshotsIn(nd.DataDir), m2, m1)
		b.ReportMetric(float64(leases), "leases")
		b.ReportMetric(ops/fill.Seconds(), "fill-writes/s")
		b.ReportMetric(mib(m1.hwm), "n1-peak-MiB")
		b.ReportMetric(mib(m1.anon), "n1-anon-MiB")
		b.ReportMetric(mib(m2.hwm), "n2-peak-MiB")
		b.ReportMetric(took.Seconds(), "catchup-s")
		cancel()
		p.KillAll()
	}
}

// saveURL writes what a GET of url returns into path.
func saveURL(b *testing.B, url, path string) {
	resp, err := http.Get(url)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		b.Fatal(err)
	}
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

func largeSemName(i int) string { return fmt.Sprintf("sem-%06d", i) }

func mib(bytes int64) float64 { return float64(bytes) / (1 << 20) }

// run calls fn(worker, i) for i in [0, n) on `workers` goroutines; the
// first error fails the benchmark and stops every worker.
func run(b *testing.B, ctx context.Context, workers, n int, fn func(w, i int) error) {
	var next atomic.Int64
	var failed atomic.Bool
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for !failed.Load() && ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := fn(w, i); err != nil {
					if !failed.Swap(true) {
						b.Errorf("item %d: %v", i, err)
					}
					return
				}
			}
		}(w)
	}
	wg.Wait()
	if ctx.Err() != nil && !failed.Load() {
		b.Errorf("fill stopped: %v", ctx.Err())
	}
}

// progress prints a line every 15 s while the fill runs (a million leases
// take minutes); the returned func stops it.
func progress(b *testing.B, done *atomic.Int64, total int64, start time.Time) func() {
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(15 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				d := done.Load()
				fmt.Fprintf(os.Stderr, "fill: %d/%d writes in %v (%.0f/s)\n", d, total, time.Since(start).Round(time.Second),
					float64(d)/time.Since(start).Seconds())
			}
		}
	}()
	return func() { close(stop); wg.Wait() }
}

// snapshotsIn counts the Raft snapshots under a node's data directory (a
// file snapshot store keeps a meta.json beside each).
func snapshotsIn(dir string) int {
	n := 0
	filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && d.Name() == "meta.json" {
			n++
		}
		return nil
	})
	return n
}

// memory is what /proc/PID/status says of a process: resident set now
// (RSS = anonymous + file-backed + shared memory) and at its peak (HWM).
// Anonymous memory is the Go heap and stacks; file-backed pages are mapped
// files (the bbolt Raft log and snapshot files), which the kernel can drop.
type memory struct{ rss, hwm, anon, file int64 }

func (m memory) String() string {
	return fmt.Sprintf("VmRSS %.0f MiB (anonymous %.0f, files %.0f), VmHWM %.0f MiB", mib(m.rss), mib(m.anon), mib(m.file), mib(m.hwm))
}

// procMemory reads a node process's memory figures.
func procMemory(b *testing.B, nd *Node) memory {
	if nd.cmd == nil || nd.cmd.Process == nil {
		b.Fatalf("node %s is not running", nd.ID)
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", nd.cmd.Process.Pid))
	if err != nil {
		b.Fatal(err)
	}
	var m memory
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		kb, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "VmRSS:":
			m.rss = kb << 10
		case "VmHWM:":
			m.hwm = kb << 10
		case "RssAnon:":
			m.anon = kb << 10
		case "RssFile:":
			m.file = kb << 10
		}
	}
	return m
}
