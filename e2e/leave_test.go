package e2e

import (
	"context"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
)

// leaveResult is one leader stop under load.
type leaveResult struct {
	gap      time.Duration // longest time no write completed, around the stop
	writes   int
	retries  int // attempts that failed with a retryable code and were retried
	failures int // writes that failed after their retries
}

// stopLeaderUnderLoad runs writers (idempotent lease refreshes, each retried
// on Unavailable/DeadlineExceeded at the next node) for a second, stops the
// leader with sig, waits for its process to exit, writes on for another
// 1.5 s, and measures the longest gap between write completions from a
// little before the signal on.
func stopLeaderUnderLoad(t testing.TB, p *Proc, li int, lease string, sig syscall.Signal) leaveResult {
	const writers = 4
	conns := make([]*grpc.ClientConn, len(p.Nodes))
	for i := range p.Nodes {
		conns[i] = p.Dial(i)
	}
	var (
		mu    sync.Mutex
		done  []time.Time
		res   leaveResult
		wg    sync.WaitGroup
		stop  = make(chan struct{})
		first = make(chan struct{})
	)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			next := w
			for {
				select {
				case <-stop:
					return
				default:
				}
				ok := false
				deadline := time.Now().Add(20 * time.Second)
				for time.Now().Before(deadline) {
					ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
					_, err := pb.NewGrackleServiceClient(conns[next%len(conns)]).RefreshSemaphoreLease(ctx,
						&pb.RefreshSemaphoreLeaseRequest{NamespaceName: "fo", LeaseId: lease, TtlSeconds: 300})
					cancel()
					if err == nil {
						ok = true
						break
					}
					if c := status.Code(err); c != codes.Unavailable && c != codes.DeadlineExceeded && c != codes.Canceled {
						t.Errorf("writer %d: %v", w, err)
						break
					}
					mu.Lock()
					res.retries++
					mu.Unlock()
					next++
					time.Sleep(2 * time.Millisecond)
				}
				mu.Lock()
				if ok {
					done = append(done, time.Now())
					res.writes++
					if res.writes == 1 {
						close(first)
					}
				} else {
					res.failures++
				}
				mu.Unlock()
			}
		}(w)
	}
	<-first
	time.Sleep(time.Second) // steady load before the stop (not a correctness wait)
	signalled := time.Now()
	if sig == syscall.SIGKILL {
		p.Kill9(li)
	} else {
		p.Signal(li, sig)
		select {
		case <-p.Nodes[li].waitDone:
			p.Nodes[li].cmd = nil
		case <-time.After(30 * time.Second):
			t.Errorf("node %s still running 30 s after %v", p.Nodes[li].ID, sig)
		}
	}
	time.Sleep(1500 * time.Millisecond) // writes after the stop, to see them resume
	close(stop)
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	sort.Slice(done, func(i, j int) bool { return done[i].Before(done[j]) })
	prev := signalled
	for _, d := range done {
		if d.Before(signalled) {
			continue
		}
		if g := d.Sub(prev); g > res.gap {
			res.gap = g
		}
		prev = d
	}
	return res
}

func setupLeave(t testing.TB, p *Proc) string {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	a := anyOf(p)
	var id string
	if err := a.Do(ctx, func(ctx context.Context, c pb.GrackleServiceClient) error {
		if _, err := c.CreateNamespace(ctx, &pb.CreateNamespaceRequest{Name: "fo"}); err != nil && status.Code(err) != codes.AlreadyExists {
			return err
		}
		l, err := c.CreateSemaphoreLease(ctx, &pb.CreateSemaphoreLeaseRequest{NamespaceName: "fo", ProcessId: "leave", TtlSeconds: 300})
		if err == nil {
			id = l.Lease.LeaseId
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return id
}

// SIGTERM on the leader under load: leadership moves to another voter
// before the process exits (its log says so), and no write fails once its
// retries are counted. The gap is logged; figures live in
// BenchmarkLeaderStop.
func TestGracefulLeaveUnderLoad(t *testing.T) {
	p := NewCluster(t, 3, "--log-level", "info")
	p.StartAll()
	li := p.Index(p.WaitLeader(0, 30*time.Second))
	lease := setupLeave(t, p)
	res := stopLeaderUnderLoad(t, p, li, lease, syscall.SIGTERM)
	if res.failures != 0 || res.writes == 0 {
		t.Fatalf("SIGTERM on the leader: %d writes, %d failed after retries", res.writes, res.failures)
	}
	if log := readFile(p.Nodes[li].LogPath); !strings.Contains(log, "leadership handed over") {
		t.Fatalf("the leader did not hand over before exiting:\n%s", tail(log, 3000))
	}
	other := (li + 1) % 3
	if nl := p.WaitLeader(other, 30*time.Second); nl == p.Nodes[li].ID {
		t.Fatalf("leader still %s", nl)
	}
	t.Logf("SIGTERM on the leader: %d writes, %d retried attempts, 0 failed; longest write gap %v", res.writes, res.retries, res.gap.Round(time.Millisecond))
}

// BenchmarkLeaderStop measures the longest write gap seen by 4 writers
// when the leader is stopped with SIGTERM (graceful leave: leadership
// transfer) and with SIGKILL (the others must time out and elect), over
// GRACKLE_LEAVE_TRIALS trials each (default 5), shipped Raft timeouts.
//
//	go test -run '^$' -bench LeaderStop -benchtime 1x ./e2e/
func BenchmarkLeaderStop(b *testing.B) {
	trials := 5
	if v, err := strconv.Atoi(os.Getenv("GRACKLE_LEAVE_TRIALS")); err == nil && v > 0 {
		trials = v
	}
	for _, c := range []struct {
		name string
		sig  syscall.Signal
	}{{"sigterm", syscall.SIGTERM}, {"sigkill", syscall.SIGKILL}} {
		b.Run(c.name, func(b *testing.B) {
			for n := 0; n < b.N; n++ {
				p := NewCluster(b, 3)
				p.StartAll()
				li := p.Index(p.WaitLeader(0, 30*time.Second))
				lease := setupLeave(b, p)
				var gaps []time.Duration
				failures, retries := 0, 0
				for trial := 0; trial < trials; trial++ {
					r := stopLeaderUnderLoad(b, p, li, lease, c.sig)
					gaps = append(gaps, r.gap)
					failures += r.failures
					retries += r.retries
					p.Start(li)
					li = p.Index(p.WaitLeader(li, 30*time.Second))
				}
				sort.Slice(gaps, func(i, j int) bool { return gaps[i] < gaps[j] })
				var parts []string
				for _, g := range gaps {
					parts = append(parts, g.Round(time.Millisecond).String())
				}
				b.Logf("%s write gaps: %s (retried attempts %d, failed writes %d)", c.name, strings.Join(parts, " "), retries, failures)
				b.ReportMetric(float64(gaps[len(gaps)/2].Milliseconds()), "p50-gap-ms")
				b.ReportMetric(float64(gaps[len(gaps)-1].Milliseconds()), "max-gap-ms")
				b.ReportMetric(float64(failures), "failed-writes")
				p.KillAll()
			}
		})
	}
}
