package fsm

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"

	fsmpb "github.com/grackle-coord/grackle/proto/grackle/fsm/v1"
)

// Benchmarks:
//
//	go test -run '^$' -bench . -benchmem ./fsm/
//	GRACKLE_BENCH_LARGE=1 go test -run '^$' -bench 'Snapshot1M|Restore1M' -benchtime=1x -timeout=30m ./fsm/

const base62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// benchLeaseID is a lease id shaped like the ones rpc generates ("ls_" and
// 24 base62 characters), distinct for every i, spread over the id space.
func benchLeaseID(i int) string {
	b := make([]byte, 3+24)
	copy(b, "ls_")
	x := uint64(i)*0x9E3779B97F4A7C15 + 0x632BE59BD9B4E019
	for j := 3; j < len(b); j++ {
		b[j] = base62[x%62]
		x /= 62
		if x == 0 {
			x = uint64(i)*0xD6E8FEB86659FD93 + uint64(j)
		}
	}
	return string(b)
}

func benchSemName(i int) string { return fmt.Sprintf("sem-%06d", i) }

// benchState applies, through ApplyCommand, one namespace "bench" with
// nSems semaphores and nLeases leases; if hold, lease i holds semaphore
// i%nSems with weight 1.
func benchState(tb testing.TB, f *FSM, nSems, nLeases int, hold bool) uint64 {
	var idx uint64
	ap := func(c *fsmpb.Command) {
		idx++
		c.Now = epoch
		if r := f.ApplyCommand(idx, c); r.Err != nil {
			tb.Fatalf("setup entry %d: %v", idx, r.Err)
		}
	}
	ap(cNS("bench"))
	for i := 0; i < nSems; i++ {
		ap(cSem("bench", benchSemName(i), 1_000_000))
	}
	for i := 0; i < nLeases; i++ {
		id := benchLeaseID(i)
		ap(cLease("bench", id, fmt.Sprintf("host-%d/pid-%d", i%1000, i), 300))
		if hold {
			ap(cAcq("bench", benchSemName(i%nSems), id, 1))
		}
	}
	return idx
}

func BenchmarkApplyAcquire(b *testing.B) {
	const nSems, nLeases, pool = 10_000, 100_000, 100_000
	f := New(Options{TempDir: b.TempDir()})
	idx := benchState(b, f, nSems, nLeases, false)
	cmds := make([]*fsmpb.Command, pool)
	data := make([][]byte, pool)
	for i := range cmds {
		cmds[i] = cAcq("bench", benchSemName(i%nSems), benchLeaseID(i%nLeases), 1)
		cmds[i].Now = epoch
		data[i] = mustEncode(b, cmds[i])
	}
	b.Run("command", func(b *testing.B) {
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			idx++
			if r := f.ApplyCommand(idx, cmds[i%pool]); !r.Acquired {
				b.Fatal(r.Err)
			}
		}
	})
	b.Run("bytes", func(b *testing.B) {
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			idx++
			if r := f.ApplyBytes(idx, data[i%pool]); !r.Acquired {
				b.Fatal(r.Err)
			}
		}
	})
}

func BenchmarkApplyRelease(b *testing.B) {
	const nSems, nLeases, chunk = 10_000, 100_000, 50_000
	f := New(Options{TempDir: b.TempDir()})
	idx := benchState(b, f, nSems, nLeases, false)
	acq := make([]*fsmpb.Command, nLeases)
	rel := make([]*fsmpb.Command, nLeases)
	relData := make([][]byte, nLeases)
	for i := range acq {
		acq[i] = cAcq("bench", benchSemName(i%nSems), benchLeaseID(i), 1)
		rel[i] = cRel("bench", benchSemName(i%nSems), benchLeaseID(i))
		acq[i].Now, rel[i].Now = epoch, epoch
		relData[i] = mustEncode(b, rel[i])
	}
	for _, viaBytes := range []bool{false, true} {
		name := "command"
		if viaBytes {
			name = "bytes"
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			b.ResetTimer()
			for done := 0; done < b.N; {
				// Holds to release, made outside the timer.
				n := min(chunk, b.N-done)
				b.StopTimer()
				for j := 0; j < n; j++ {
					idx++
					f.ApplyCommand(idx, acq[(done+j)%nLeases])
				}
				b.StartTimer()
				for j := 0; j < n; j++ {
					idx++
					k := (done + j) % nLeases
					var r *Result
					if viaBytes {
						r = f.ApplyBytes(idx, relData[k])
					} else {
						r = f.ApplyCommand(idx, rel[k])
					}
					if len(r.Freed) != 1 {
						b.Fatalf("release freed nothing: %v", r.Err)
					}
				}
				done += n
			}
		})
	}
}

// BenchmarkApplyBatch256: one op is a raft batch of 256 mixed entries
// (acquire, refresh, release with a conditional grant to a waiter,
// release), decoded and applied by ApplyBatch; the state is the same after
// every batch.
func BenchmarkApplyBatch256(b *testing.B) {
	const nSems, nLeases, batches = 1_000, 20_000, 64
	f := New(Options{TempDir: b.TempDir()})
	idx := benchState(b, f, nSems, nLeases, false)
	all := make([][]*raft.Log, batches)
	lease := 0
	for k := range all {
		logs := make([]*raft.Log, 0, 256)
		add := func(c *fsmpb.Command) {
			c.Now = epoch
			logs = append(logs, &raft.Log{Type: raft.LogCommand, Data: mustEncode(b, c)})
		}
		for g := 0; g < 64; g++ {
			la, lb := benchLeaseID(lease%nLeases), benchLeaseID((lease+1)%nLeases)
			s := benchSemName((lease / 2) % nSems)
			lease += 2
			add(cAcq("bench", s, la, 1))
			add(cRefresh("bench", la, 300))
			add(withGrants(cRel("bench", s, la), grant("bench", s, lb, 1)))
			add(cRel("bench", s, lb))
		}
		all[k] = logs
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		logs := all[i%batches]
		for _, l := range logs {
			idx++
			l.Index = idx
		}
		out := f.ApplyBatch(logs)
		if r := out[2].(*Result); len(r.Grants) != 1 || !r.Grants[0].Granted {
			b.Fatalf("grant not applied: %s", resultString(r))
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*256), "ns/entry")
	if c := f.Counts(); c.Holders != 0 {
		b.Fatalf("batches leave holders behind: %+v", c)
	}
}

// ---- large state: 1,000,000 leases, each holding one of 100,000 semaphores ----

var large struct {
	once  sync.Once
	f     *FSM
	snap  []byte
	build time.Duration
}

// largeSnapshot is the 1M-lease snapshot alone. With
// GRACKLE_BENCH_SNAPSHOT_FILE naming a file written by an earlier run
// (largeState writes it), the state is not built: a restore is then
// measured (and profiled) without the source state live in the same heap,
// as on a new node catching up.
func largeSnapshot(b *testing.B) []byte {
	if os.Getenv("GRACKLE_BENCH_LARGE") == "" {
		b.Skip("set GRACKLE_BENCH_LARGE=1 to build the 1M-lease state (takes a while)")
	}
	if path := os.Getenv("GRACKLE_BENCH_SNAPSHOT_FILE"); path != "" {
		if data, err := os.ReadFile(path); err == nil {
			return data
		}
	}
	_, snap := largeState(b)
	return snap
}

func largeState(b *testing.B) (*FSM, []byte) {
	if os.Getenv("GRACKLE_BENCH_LARGE") == "" {
		b.Skip("set GRACKLE_BENCH_LARGE=1 to build the 1M-lease state (takes a while)")
	}
	large.once.Do(func() {
		start := time.Now()
		large.f = New(Options{})
		benchState(b, large.f, 100_000, 1_000_000, true)
		large.build = time.Since(start)
		var buf bytes.Buffer
		if err := large.f.WriteSnapshot(&buf); err != nil {
			b.Fatal(err)
		}
		large.snap = buf.Bytes()
		if path := os.Getenv("GRACKLE_BENCH_SNAPSHOT_FILE"); path != "" {
			if err := os.WriteFile(path, large.snap, 0o600); err != nil {
				b.Fatal(err)
			}
		}
		c := large.f.Counts()
		b.Logf("built %+v in %v; snapshot %.1f MB", c, large.build.Round(time.Millisecond), float64(len(large.snap))/1e6)
	})
	if large.f == nil {
		b.Fatal("large state not built")
	}
	return large.f, large.snap
}

func BenchmarkSnapshot1M(b *testing.B) {
	f, snap := largeState(b)
	b.ResetTimer()
	cpu := cpuTime()
	for i := 0; i < b.N; i++ {
		if err := f.WriteSnapshot(io.Discard); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "s/snapshot")
	b.ReportMetric((cpuTime()-cpu).Seconds()/float64(b.N), "cpu-s/snapshot")
	b.ReportMetric(float64(len(snap))/1e6, "MB")
	b.ReportMetric(snapshotLivePeak(b, f)/(1<<20), "live-over-state-MiB")
}

// snapshotLivePeak writes one more snapshot with the collector running
// after every 5 % of heap growth and returns the most it found live
// (/gc/heap/live:bytes, what sets the next collection's goal) beyond what
// was live before: the memory a snapshot being written holds beside the
// state, which the default GC then doubles.
func snapshotLivePeak(b *testing.B, f *FSM) float64 {
	defer debug.SetGCPercent(debug.SetGCPercent(5))
	runtime.GC()
	base := liveHeap()
	stop, peak := make(chan struct{}), make(chan uint64)
	go func() {
		var top uint64
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				peak <- top
				return
			case <-t.C:
				top = max(top, liveHeap())
			}
		}
	}()
	err := f.WriteSnapshot(io.Discard)
	close(stop)
	top := <-peak
	if err != nil {
		b.Fatal(err)
	}
	return float64(max(top, base) - base)
}

// liveHeap is the heap the last collection found live.
func liveHeap() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

func BenchmarkRestore1M(b *testing.B) {
	snap := largeSnapshot(b)
	b.ResetTimer()
	cpu := cpuTime()
	for i := 0; i < b.N; i++ {
		g := New(Options{})
		if err := restoreBytes(g, snap); err != nil {
			b.Fatal(err)
		}
		if c := g.Counts(); c.Leases != 1_000_000 || c.Holders != 1_000_000 || c.Semaphores != 100_000 {
			b.Fatalf("restored %+v", c)
		}
	}
	b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "s/restore")
	b.ReportMetric((cpuTime()-cpu).Seconds()/float64(b.N), "cpu-s/restore")
}

// cpuTime is the process's user plus system CPU time so far: on a shared
// machine, where wall time depends on the neighbours, the CPU a snapshot or
// restore costs is the steadier figure (it counts every thread, the GC's
// included, so it can exceed the wall time on two cores).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkHeapPerLease measures the live heap of a lease with one hold
// (lease, holder and every index entry), built the way a follower builds
// it: from encoded entries through ApplyBytes. It ignores b.N (one
// measurement per run); read the B/lease metric.
func BenchmarkHeapPerLease(b *testing.B) {
	const nLeases, nSems = 200_000, 20_000
	measure := func() float64 {
		f := New(Options{})
		var idx uint64
		ap := func(c *fsmpb.Command) {
			idx++
			c.Now = epoch
			data, err := Encode(c)
			if err != nil {
				b.Fatal(err)
			}
			if r := f.ApplyBytes(idx, data); r.Err != nil {
				b.Fatal(r.Err)
			}
		}
		ap(cNS("bench"))
		for i := 0; i < nSems; i++ {
			ap(cSem("bench", benchSemName(i), 1_000_000))
		}
		before := heapInUse()
		for i := 0; i < nLeases; i++ {
			id := benchLeaseID(i)
			ap(cLease("bench", id, fmt.Sprintf("host-%d/pid-%d", i%1000, i), 300))
			ap(cAcq("bench", benchSemName(i%nSems), id, 1))
		}
		after := heapInUse()
		runtime.KeepAlive(f)
		return float64(after-before) / nLeases
	}
	var per float64
	for i := 0; i < b.N; i++ {
		per = measure()
	}
	b.ReportMetric(per, "B/lease")
}

func heapInUse() uint64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// BenchmarkDecodeBatch64: decoding one packed entry of 64 commands (half
// acquires, half releases; the entry and then each command, as ApplyBatch
// does), with the generated decoder Decode uses and with the protobuf
// runtime it replaced.
func BenchmarkDecodeBatch64(b *testing.B) {
	cmds := make([][]byte, 64)
	for i := range cmds {
		c := cAcq("bench", benchSemName(i), benchLeaseID(i), 1)
		if i%2 == 1 {
			c = cRel("bench", benchSemName(i), benchLeaseID(i))
		}
		c.Now = epoch
		cmds[i] = mustEncode(b, c)
	}
	entry, err := EncodeBatch(cmds)
	if err != nil {
		b.Fatal(err)
	}
	decoders := []struct {
		name   string
		decode func([]byte) (*fsmpb.Command, error)
	}{
		{"generated", Decode},
		{"runtime", func(data []byte) (*fsmpb.Command, error) {
			c := &fsmpb.Command{}
			return c, proto.Unmarshal(data, c)
		}},
	}
	for _, d := range decoders {
		b.Run(d.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				c, err := d.decode(entry)
				if err != nil {
					b.Fatal(err)
				}
				for _, data := range c.GetBatch().GetCommands() {
					if _, err := d.decode(data); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}
