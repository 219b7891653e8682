// Package bench measures Grackle the way shared/peers measures etcd, so the
// figures compare side by side: W2 (contended hand-off on one permit) and
// lease-expiry lateness. It speaks plain gRPC to the leader.
package bench

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
)

// Summary is a latency distribution in milliseconds.
type Summary struct {
	N                              int
	Mean, P50, P90, P99, P999, Max float64
}

// Summarize sorts the samples and computes the summary.
func Summarize(ds []time.Duration) Summary {
	if len(ds) == 0 {
		return Summary{}
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	q := func(p float64) float64 {
		i := int(math.Ceil(p*float64(len(s)))) - 1
		if i < 0 {
			i = 0
		}
		return ms(s[i])
	}
	var sum time.Duration
	for _, d := range s {
		sum += d
	}
	return Summary{N: len(s), Mean: ms(sum / time.Duration(len(s))), P50: q(0.5), P90: q(0.9), P99: q(0.99), P999: q(0.999), Max: ms(s[len(s)-1])}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// Fields renders a summary as RESULT-line fields with a prefix.
func (s Summary) Fields(prefix string) string {
	return fmt.Sprintf("%s_n=%d %s_mean_ms=%.3f %s_p50_ms=%.3f %s_p90_ms=%.3f %s_p99_ms=%.3f %s_p999_ms=%.3f %s_max_ms=%.3f",
		prefix, s.N, prefix, s.Mean, prefix, s.P50, prefix, s.P90, prefix, s.P99, prefix, s.P999, prefix, s.Max)
}

// HandoffConfig is W2 of shared/peers: one semaphore, Permits permits,
// Workers workers looping acquire -> hold -> release.
type HandoffConfig struct {
	Workers  int
	Permits  int64
	Hold     time.Duration
	Duration time.Duration
	Warmup   time.Duration
	TTL      int64
	RunID    string
}

// HandoffResult is what W2 measured.
type HandoffResult struct {
	Acquisitions  int
	AcqPerSecond  float64
	Handoff       Summary // release acknowledged -> next ACQUIRED response
	HandoffOther  Summary // ... when the next holder is another worker
	SelfFraction  float64
	Negative      int // ACQUIRED seen before its release's acknowledgement
	Wait          Summary
	Release       Summary
	CommitsPerAcq float64
	Errors        int
	LastError     error
}

type event struct {
	index  uint64
	worker int
	at     time.Time
	in     bool
}

// Handoff runs W2 against the node at conn (it should be the leader: the
// release's Raft index is read from the response header, which forwarded
// calls do not carry).
func Handoff(ctx context.Context, conn *grpc.ClientConn, c HandoffConfig) (HandoffResult, error) {
	cl := pb.NewGrackleServiceClient(conn)
	ns := "bench-" + c.RunID
	if _, err := cl.CreateNamespace(ctx, &pb.CreateNamespaceRequest{Name: ns}); err != nil {
		return HandoffResult{}, err
	}
	defer cl.DeleteNamespace(context.Background(), &pb.DeleteNamespaceRequest{NamespaceName: ns})
	if _, err := cl.CreateSemaphore(ctx, &pb.CreateSemaphoreRequest{NamespaceName: ns, SemaphoreName: "w2", Permits: c.Permits}); err != nil {
		return HandoffResult{}, err
	}
	leases := make([]string, c.Workers)
	for i := range leases {
		l, err := cl.CreateSemaphoreLease(ctx, &pb.CreateSemaphoreLeaseRequest{NamespaceName: ns, ProcessId: fmt.Sprintf("bench-%d", i), TtlSeconds: c.TTL})
		if err != nil {
			return HandoffResult{}, err
		}
		leases[i] = l.Lease.LeaseId
	}
	commits0, _ := commitIndex(ctx, conn)
	start := time.Now()
	from, to := start.Add(c.Warmup), start.Add(c.Warmup+c.Duration)
	runCtx, cancel := context.WithDeadline(ctx, to)
	defer cancel()

	var mu sync.Mutex
	var rels, acqs []event
	var wait, rel []time.Duration
	var errs int
	var lastErr error
	var wg sync.WaitGroup
	refreshEvery := time.Duration(c.TTL) * time.Second / 3
	for w := 0; w < c.Workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			lastRefresh := time.Now()
			for runCtx.Err() == nil {
				if time.Since(lastRefresh) > refreshEvery {
					cl.RefreshSemaphoreLease(ctx, &pb.RefreshSemaphoreLeaseRequest{NamespaceName: ns, LeaseId: leases[w], TtlSeconds: c.TTL})
					lastRefresh = time.Now()
				}
				t0 := time.Now()
				r, err := cl.AcquireSemaphore(runCtx, &pb.AcquireSemaphoreRequest{NamespaceName: ns, SemaphoreName: "w2", LeaseId: leases[w],
					Weight: 1, TimeoutSeconds: 60})
				t1 := time.Now()
				if err != nil || r.Outcome != pb.AcquireOutcome_ACQUIRE_OUTCOME_ACQUIRED {
					// gRPC may report the deadline a moment before the
					// context itself does: past the window is the end.
					if runCtx.Err() != nil || !t1.Before(to) {
						break
					}
					mu.Lock()
					errs++
					lastErr = fmt.Errorf("acquire: %v %v", r.GetOutcome(), err)
					mu.Unlock()
					continue
				}
				in := !t1.Before(from) && t1.Before(to)
				time.Sleep(c.Hold)
				var hdr metadata.MD
				t2 := time.Now()
				_, err = cl.ReleaseSemaphore(ctx, &pb.ReleaseSemaphoreRequest{NamespaceName: ns, SemaphoreName: "w2", LeaseId: leases[w]}, grpc.Header(&hdr))
				t3 := time.Now()
				mu.Lock()
				acqs = append(acqs, event{index: r.Holder.FencingToken, worker: w, at: t1, in: in})
				if in {
					wait = append(wait, t1.Sub(t0))
				}
				if err != nil {
					errs++
					lastErr = err
				} else if idx := headerIndex(hdr); idx > 0 {
					rels = append(rels, event{index: idx, worker: w, at: t3})
					if in {
						rel = append(rel, t3.Sub(t2))
					}
				}
				mu.Unlock()
			}
		}(w)
	}
	wg.Wait()
	commits1, _ := commitIndex(ctx, conn)

	// Pair each grant with the release that freed its permit: the last
	// release at or before the grant in log order (with one permit, every
	// grant but the first follows exactly one release).
	sort.Slice(rels, func(i, j int) bool { return rels[i].index < rels[j].index })
	var all, other []time.Duration
	self, neg, n := 0, 0, 0
	for _, a := range acqs {
		if !a.in {
			continue
		}
		n++
		i := sort.Search(len(rels), func(i int) bool { return rels[i].index > a.index }) - 1
		if i < 0 {
			continue
		}
		r := rels[i]
		d := a.at.Sub(r.at)
		if d < 0 {
			neg++
		}
		all = append(all, d)
		if r.worker == a.worker {
			self++
		} else {
			other = append(other, d)
		}
	}
	res := HandoffResult{Acquisitions: n, AcqPerSecond: float64(n) / c.Duration.Seconds(), Handoff: Summarize(all),
		HandoffOther: Summarize(other), Negative: neg, Wait: Summarize(wait), Release: Summarize(rel), Errors: errs, LastError: lastErr}
	if len(all) > 0 {
		res.SelfFraction = float64(self) / float64(len(all))
	}
	if n > 0 && commits1 > commits0 {
		res.CommitsPerAcq = float64(commits1-commits0) / float64(len(acqs))
	}
	return res, nil
}

func headerIndex(md metadata.MD) uint64 {
	v := md.Get("grackle-raft-index")
	if len(v) == 0 {
		return 0
	}
	n, _ := strconv.ParseUint(v[0], 10, 64)
	return n
}

func commitIndex(ctx context.Context, conn *grpc.ClientConn) (uint64, error) {
	st, err := pb.NewClusterServiceClient(conn).GetClusterStatus(ctx, &pb.GetClusterStatusRequest{})
	if err != nil {
		return 0, err
	}
	return st.CommitIndex, nil
}

// ExpiryConfig: Trials holders with a TTL of TTL seconds each block one
// waiter; lateness is the waiter's ACQUIRED time minus the holder's
// expires_at (both clocks are this machine's).
type ExpiryConfig struct {
	Trials int
	TTL    int64
	RunID  string
}

// ExpiryResult is the lateness of expiry hand-offs.
type ExpiryResult struct {
	Lateness Summary
	Errors   int
}

// ExpiryLateness runs the trials concurrently, on one semaphore each.
func ExpiryLateness(ctx context.Context, conn *grpc.ClientConn, c ExpiryConfig) (ExpiryResult, error) {
	cl := pb.NewGrackleServiceClient(conn)
	ns := "bench-exp-" + c.RunID
	if _, err := cl.CreateNamespace(ctx, &pb.CreateNamespaceRequest{Name: ns}); err != nil {
		return ExpiryResult{}, err
	}
	defer cl.DeleteNamespace(context.Background(), &pb.DeleteNamespaceRequest{NamespaceName: ns})
	var mu sync.Mutex
	var late []time.Duration
	errs := 0
	var wg sync.WaitGroup
	for i := 0; i < c.Trials; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			// Stagger the trials so expiries do not all land in one reap.
			time.Sleep(time.Duration(i) * 37 * time.Millisecond)
			err := func() error {
				sem := fmt.Sprintf("s%d", i)
				if _, err := cl.CreateSemaphore(ctx, &pb.CreateSemaphoreRequest{NamespaceName: ns, SemaphoreName: sem, Permits: 1}); err != nil {
					return err
				}
				short, err := cl.CreateSemaphoreLease(ctx, &pb.CreateSemaphoreLeaseRequest{NamespaceName: ns, ProcessId: "dies", TtlSeconds: c.TTL})
				if err != nil {
					return err
				}
				long, err := cl.CreateSemaphoreLease(ctx, &pb.CreateSemaphoreLeaseRequest{NamespaceName: ns, ProcessId: "waits", TtlSeconds: c.TTL + 60})
				if err != nil {
					return err
				}
				a, err := cl.AcquireSemaphore(ctx, &pb.AcquireSemaphoreRequest{NamespaceName: ns, SemaphoreName: sem, LeaseId: short.Lease.LeaseId, Weight: 1})
				if err != nil || a.Outcome != pb.AcquireOutcome_ACQUIRE_OUTCOME_ACQUIRED {
					return fmt.Errorf("first acquire: %v %v", a, err)
				}
				w, err := cl.AcquireSemaphore(ctx, &pb.AcquireSemaphoreRequest{NamespaceName: ns, SemaphoreName: sem, LeaseId: long.Lease.LeaseId,
					Weight: 1, TimeoutSeconds: c.TTL + 30})
				got := time.Now()
				if err != nil || w.Outcome != pb.AcquireOutcome_ACQUIRE_OUTCOME_ACQUIRED {
					return fmt.Errorf("waiter: %v %v", w, err)
				}
				mu.Lock()
				late = append(late, got.Sub(time.Unix(0, a.Holder.ExpiresAt)))
				mu.Unlock()
				return nil
			}()
			if err != nil {
				mu.Lock()
				errs++
				mu.Unlock()
			}
		}(i)
	}
	wg.Wait()
	return ExpiryResult{Lateness: Summarize(late), Errors: errs}, nil
}

// ResultLine formats a RESULT line like shared/peers' tools.
func ResultLine(label, scenario string, fields ...string) string {
	return "RESULT target=" + label + " scenario=" + scenario + " " + strings.Join(fields, " ")
}
