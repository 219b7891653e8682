package bench_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/grackle-coord/grackle/bench"
)

// fakeLocks is an in-memory Backend with exclusive locks only: a FIFO
// queue per lock, or (unfair) one that on every second release keeps the
// lock for the releaser's next request, ahead of those waiting. It tests
// the lock workloads' counting apart from any server.
type fakeLocks struct {
	unfair  bool
	commits atomic.Uint64 // every lock, unlock and touch is one "commit"
	mu      sync.Mutex
	tokens  uint64
	locks   map[string]*fakeLock
	leases  int
}

type fakeLock struct {
	holder   int // lease; 0: free
	reserved int // unfair: the releaser that gets it back next
	releases int
	queue    []*fakeWaiter
}

type fakeWaiter struct {
	lease   int
	granted chan uint64
}

var errLocksOnly = errors.New("fake backend: locks only")

func (f *fakeLocks) Setup(context.Context, string) error {
	f.locks = map[string]*fakeLock{}
	return nil
}
func (f *fakeLocks) Cleanup(context.Context) error { return nil }
func (f *fakeLocks) CreateSemaphore(context.Context, string, int64) error {
	return errLocksOnly
}
func (f *fakeLocks) NewSession(context.Context, int, time.Duration, bool) (bench.Session, error) {
	return nil, errLocksOnly
}
func (f *fakeLocks) Read(context.Context, int, string) error { return errLocksOnly }
func (f *fakeLocks) CommitIndex(context.Context) (uint64, error) {
	return f.commits.Load(), nil
}

func (f *fakeLocks) CreateWaitGroup(context.Context, int, string, int64) error { return errLocksOnly }
func (f *fakeLocks) CompleteJobs(context.Context, int, string, []string) error { return errLocksOnly }
func (f *fakeLocks) WaitWaitGroup(context.Context, int, string) error          { return errLocksOnly }
func (f *fakeLocks) DeleteWaitGroup(context.Context, int, string) error        { return errLocksOnly }
func (f *fakeLocks) NewBarrier(context.Context, string, int) (bench.Barrier, error) {
	return nil, errLocksOnly
}

func (f *fakeLocks) NewLockSession(context.Context, int, time.Duration) (bench.LockSession, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.leases++
	return &fakeLockSession{f: f, lease: f.leases}, nil
}

type fakeLockSession struct {
	f     *fakeLocks
	lease int
}

// grantLocked makes lease the holder and returns the grant's token.
func (f *fakeLocks) grantLocked(l *fakeLock, lease int) uint64 {
	l.holder, l.reserved = lease, 0
	f.tokens++
	return f.tokens
}

func (f *fakeLocks) lockLocked(name string) *fakeLock {
	l := f.locks[name]
	if l == nil {
		l = &fakeLock{}
		f.locks[name] = l
	}
	return l
}

func (s *fakeLockSession) Lock(ctx context.Context, name string, timeout time.Duration) (bench.Grant, error) {
	f := s.f
	f.commits.Add(1)
	f.mu.Lock()
	l := f.lockLocked(name)
	if l.holder == 0 && (l.reserved == s.lease || l.reserved == 0 && len(l.queue) == 0) {
		tok := f.grantLocked(l, s.lease)
		f.mu.Unlock()
		return bench.Grant{Based: tok}, nil
	}
	if timeout <= 0 {
		f.mu.Unlock()
		return bench.Grant{}, fmt.Errorf("held by %d", l.holder)
	}
	w := &fakeWaiter{lease: s.lease, granted: make(chan uint64, 1)}
	l.queue = append(l.queue, w)
	f.mu.Unlock()
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	select {
	case tok := <-w.granted:
		return bench.Grant{Based: tok}, nil
	case <-wctx.Done():
	}
	f.mu.Lock()
	for i, q := range l.queue {
		if q == w {
			l.queue = append(l.queue[:i], l.queue[i+1:]...)
			f.mu.Unlock()
			return bench.Grant{}, wctx.Err()
		}
	}
	f.mu.Unlock()
	// Granted as the wait ended: give it back.
	<-w.granted
	_ = s.Unlock(context.Background(), name)
	return bench.Grant{}, wctx.Err()
}

func (s *fakeLockSession) Unlock(_ context.Context, name string) error {
	f := s.f
	f.commits.Add(1)
	f.mu.Lock()
	defer f.mu.Unlock()
	l := f.lockLocked(name)
	if l.holder != s.lease {
		return fmt.Errorf("release: not held")
	}
	l.holder = 0
	l.releases++
	if f.unfair && l.releases%2 == 0 {
		l.reserved = s.lease
		return nil
	}
	if len(l.queue) > 0 {
		w := l.queue[0]
		l.queue = l.queue[1:]
		w.granted <- f.grantLocked(l, w.lease)
	}
	return nil
}

func (s *fakeLockSession) Touch(context.Context) error { s.f.commits.Add(1); return nil }
func (s *fakeLockSession) Close(context.Context) error { return nil }

func runLocks(t *testing.T, b bench.Backend, target string) []bench.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	o := bench.Options{Target: target, Workers: 4, Warmup: 100 * time.Millisecond, Duration: 400 * time.Millisecond,
		Runs: 1, TTL: time.Minute, Hold: time.Millisecond, Trials: 1, ExpiryTTL: time.Second, Format: "json"}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := bench.RunAll(ctx, b, o, []string{"locks", "lockhandoff"}, &out); err != nil {
		t.Fatal(err)
	}
	rs, err := bench.ReadResults(&out)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 2 {
		t.Fatalf("%d results, want 2:\n%s", len(rs), out.String())
	}
	for _, r := range rs {
		t.Log(r.Line())
		if r.Errors != 0 || r.Ops == 0 {
			t.Errorf("%s: ops %d errors %d (last: %s)", r.Workload, r.Ops, r.Errors, r.LastError)
		}
	}
	return rs
}

// The lock workloads count pairs and hand-offs, and the self hand-off
// share is 0 for a FIFO lock and catches a lock that gives itself back to
// its releaser ahead of those waiting.
func TestLockWorkloadsOnFake(t *testing.T) {
	fifo := runLocks(t, &fakeLocks{}, "fifo")
	unfair := runLocks(t, &fakeLocks{unfair: true}, "unfair")

	pairs := fifo[0]
	if pairs.Workload != "locks" || pairs.Latency["acquire"].N == 0 || pairs.Latency["release"].N == 0 {
		t.Errorf("locks: %+v", pairs)
	}
	// One lock and one unlock per pair; the fake's pairs take a few
	// microseconds, so the window's edges (sampled by another goroutine)
	// blur the count: only its presence is checked here.
	if c, ok := pairs.Metrics.Get("commits_per_op"); !ok || c <= 0 {
		t.Errorf("locks: commits per pair %v (%v)", c, ok)
	}

	h := fifo[1]
	if h.Workload != "lockhandoff" {
		t.Fatalf("second result %q", h.Workload)
	}
	if n := h.Latency["handoff"].N; n < h.Ops-1 {
		t.Errorf("lockhandoff: %d of %d grants paired with a release", n, h.Ops)
	}
	if f, ok := h.Metrics.Get("self_handoff_frac"); !ok || f != 0 {
		t.Errorf("lockhandoff on a FIFO lock: self hand-off share %v (%v), want 0", f, ok)
	}
	if _, ok := h.Metrics.Get("permits"); ok {
		t.Errorf("lockhandoff reports permits")
	}
	for _, m := range []string{"of_limit", "commit_p50_ms", "limit_per_s", "per_worker_min"} {
		if _, ok := h.Metrics.Get(m); !ok {
			t.Errorf("lockhandoff lacks %s", m)
		}
	}
	// Every second release keeps the lock for the releaser: about half
	// the hand-offs go back to it.
	if f, _ := unfair[1].Metrics.Get("self_handoff_frac"); f < 0.3 || f > 0.7 {
		t.Errorf("lockhandoff on an unfair lock: self hand-off share %v, want about 0.5", f)
	}

	var tbl bytes.Buffer
	if err := bench.Table(&tbl, append(unfair, fifo...), "fifo"); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + tbl.String())
	for _, want := range []string{"| locks | acquire+release pairs/s |", "| lockhandoff | acquisitions/s |",
		"| lockhandoff | hand-off p99 ms |", "| lockhandoff | self hand-off share |"} {
		i := strings.Index(tbl.String(), want)
		if i < 0 {
			t.Errorf("table lacks %q", want)
			continue
		}
		// Throughputs carry the ratio unfair / fifo.
		line, _, _ := strings.Cut(tbl.String()[i:], "\n")
		if strings.Contains(want, "/s |") && !strings.HasSuffix(line, "x |") {
			t.Errorf("no ratio in %q", line)
		}
	}
}
