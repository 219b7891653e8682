package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/grackle-coord/grackle/bench"
)

// The Debian package's jars: `apt-get install zookeeper` (Debian's
// zookeeper runs on the classpath below without its own scripts).
const zkJar = "/usr/share/java/zookeeper.jar"

var (
	serverOnce sync.Once
	serverAddr string
	serverErr  error
	serverSkip string
	serverCmd  *exec.Cmd
	serverDir  string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if serverCmd != nil {
		_ = serverCmd.Process.Kill()
		_ = serverCmd.Wait()
	}
	if serverDir != "" {
		os.RemoveAll(serverDir)
	}
	os.Exit(code)
}

// startServer runs one standalone ZooKeeper on loopback for the package's
// tests (tickTime 500 ms, so expiries come at half-second ticks).
func startServer() {
	java, err := exec.LookPath("java")
	if err != nil {
		serverSkip = "no java: apt-get install zookeeper (it brings a JRE)"
		return
	}
	if _, err := os.Stat(zkJar); err != nil {
		serverSkip = "ZooKeeper not installed (apt-get install zookeeper): " + err.Error()
		return
	}
	serverDir, err = os.MkdirTemp("", "zkbench-test-")
	if err != nil {
		serverErr = err
		return
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		serverErr = err
		return
	}
	serverAddr = l.Addr().String()
	l.Close()
	_, port, _ := net.SplitHostPort(serverAddr)
	cfg := filepath.Join(serverDir, "zoo.cfg")
	err = os.WriteFile(cfg, []byte(strings.Join([]string{
		"tickTime=500", "dataDir=" + filepath.Join(serverDir, "data"), "clientPort=" + port, "clientPortAddress=127.0.0.1",
		"minSessionTimeout=1000", "maxSessionTimeout=120000", "maxClientCnxns=0",
		"4lw.commands.whitelist=srvr,ruok", "admin.enableServer=false", ""}, "\n")), 0o644)
	if err != nil {
		serverErr = err
		return
	}
	cmd := exec.Command(java, "-Xmx256m", "-cp", zkJar, "org.apache.zookeeper.server.quorum.QuorumPeerMain", cfg)
	if testing.Verbose() {
		cmd.Stderr = os.Stderr
	}
	if err := cmd.Start(); err != nil {
		serverErr = err
		return
	}
	serverCmd = cmd
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, serverErr = findLeader(ctx, []string{serverAddr}); serverErr != nil {
		return
	}
}

// newZK connects a backend to the test server, set up for the test.
func newZK(t *testing.T) *ZK {
	t.Helper()
	serverOnce.Do(startServer)
	if serverSkip != "" {
		t.Skip(serverSkip)
	}
	if serverErr != nil {
		t.Fatal("zookeeper: ", serverErr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin, err := dial(ctx, serverAddr, workerTTL, true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(admin.Close)
	z := &ZK{servers: []string{serverAddr}, leader: serverAddr, admin: admin.Conn}
	if err := z.Setup(ctx, strings.ReplaceAll(t.Name(), "/", "-")); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := z.Cleanup(context.Background()); err != nil {
			t.Error("cleanup: ", err)
		}
	})
	return z
}

func must[T any](t *testing.T) func(T, error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

// children waits until dir has n children (a contender's node is there
// before it starts waiting, so this orders contenders without sleeping).
func waitChildren(t *testing.T, z *ZK, dir string, n int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		kids, _, err := z.admin.Children(dir)
		if err == nil && len(kids) == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d children, want %d (err %v)", dir, len(kids), n, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

type lockResult struct {
	g   bench.Grant
	err error
}

// The lock is first come first served, a release wakes the next in line
// only, and an acquire that does not wait leaves no node behind.
func TestLockFIFO(t *testing.T) {
	z := newZK(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	open := func() bench.LockSession {
		l, err := z.NewLockSession(ctx, 0, 30*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close(ctx) })
		return l
	}
	a, b, c := open(), open(), open()
	ga := must[bench.Grant](t)(a.Lock(ctx, "x", 0))
	if _, err := b.Lock(ctx, "x", 0); !errors.Is(err, errNotAcquired) {
		t.Fatalf("lock taken, timeout 0: %v, want errNotAcquired", err)
	}
	dir := z.lockDir("x")
	waitChildren(t, z, dir, 1)
	chB, chC := make(chan lockResult, 1), make(chan lockResult, 1)
	go func() { g, err := b.Lock(ctx, "x", 30*time.Second); chB <- lockResult{g, err} }()
	waitChildren(t, z, dir, 2)
	go func() { g, err := c.Lock(ctx, "x", 30*time.Second); chC <- lockResult{g, err} }()
	waitChildren(t, z, dir, 3)
	if err := a.Unlock(ctx, "x"); err != nil {
		t.Fatal(err)
	}
	rb := <-chB
	if rb.err != nil {
		t.Fatal(rb.err)
	}
	select {
	case rc := <-chC:
		t.Fatalf("c got the lock while b holds it: %+v", rc)
	default:
	}
	if err := b.Unlock(ctx, "x"); err != nil {
		t.Fatal(err)
	}
	rc := <-chC
	if rc.err != nil {
		t.Fatal(rc.err)
	}
	if !(ga.Based < rb.g.Based && rb.g.Based < rc.g.Based) {
		t.Fatalf("grants not ordered by Based: %d, %d, %d", ga.Based, rb.g.Based, rc.g.Based)
	}
	if err := a.Unlock(ctx, "x"); err == nil {
		t.Fatal("unlock of a lock not held: no error")
	}
	if _, err := a.Lock(ctx, "x", 100*time.Millisecond); !errors.Is(err, errNotAcquired) {
		t.Fatalf("lock held by c, 100ms: %v, want errNotAcquired", err)
	}
	waitChildren(t, z, dir, 1) // only c's node
}

// Weights are several leases, waiters queue first come first served, and
// a holder whose session is not kept alive expires and hands its permits
// on at most a tick after its timeout.
func TestSemaphoreWeightsAndExpiry(t *testing.T) {
	z := newZK(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := z.CreateSemaphore(ctx, "s", 3); err != nil {
		t.Fatal(err)
	}
	holder := must[bench.Session](t)(z.NewSession(ctx, 0, time.Second, false))
	defer holder.Close(ctx)
	big := must[bench.Session](t)(z.NewSession(ctx, 0, 30*time.Second, true))
	defer big.Close(ctx)
	small := must[bench.Session](t)(z.NewSession(ctx, 0, 30*time.Second, true))
	defer small.Close(ctx)

	g := must[bench.Grant](t)(holder.Acquire(ctx, "s", 2, 0))
	if _, err := small.Acquire(ctx, "s", 2, 0); !errors.Is(err, errNotAcquired) {
		t.Fatalf("2 of 1 free permit, timeout 0: %v, want errNotAcquired", err)
	}
	waitChildren(t, z, z.semDir("s")+"/leases", 2) // the failed acquire left nothing
	chBig, chSmall := make(chan lockResult, 1), make(chan lockResult, 1)
	go func() { g, err := big.Acquire(ctx, "s", 2, 30*time.Second); chBig <- lockResult{g, err} }()
	waitChildren(t, z, z.semDir("s")+"/leases", 4) // big's first lease fits, its second waits
	go func() { g, err := small.Acquire(ctx, "s", 1, 30*time.Second); chSmall <- lockResult{g, err} }()
	waitChildren(t, z, z.semDir("s")+"/locks", 2) // small queues on the lock behind big
	rb := <-chBig
	if rb.err != nil {
		t.Fatal(rb.err)
	}
	late := time.Since(g.Expires)
	t.Logf("granted %s after the holder's expiry (tick 500 ms)", late)
	// The session expires at the first tick (500 ms) after its timeout;
	// allow a commit or two on a busy machine besides. Expires is counted
	// from the reply to the holder's last request, the server's count from
	// its receipt: a grant may come that much before it, never a tick.
	if late < -500*time.Millisecond || late > 2*time.Second {
		t.Fatalf("big granted %s after the holder's expiry, want within a tick", late)
	}
	rs := <-chSmall
	if rs.err != nil {
		t.Fatal(rs.err)
	}
	if !(rb.g.Based < rs.g.Based) {
		t.Fatalf("grants not ordered: big %d, small %d", rb.g.Based, rs.g.Based)
	}
	if _, err := big.Release(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	waitChildren(t, z, z.semDir("s")+"/leases", 1)
	if _, err := big.Release(ctx, "s"); err == nil {
		t.Fatal("release of nothing held: no error")
	}
}

// The operations the recipes' comments count, in transactions (zxids).
func TestCommitsPerOperation(t *testing.T) {
	z := newZK(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	commits := func(f func()) uint64 {
		t.Helper()
		c0 := must[uint64](t)(z.CommitIndex(ctx))
		f()
		return must[uint64](t)(z.CommitIndex(ctx)) - c0
	}
	if err := z.CreateSemaphore(ctx, "s", 10); err != nil {
		t.Fatal(err)
	}
	s := must[bench.Session](t)(z.NewSession(ctx, 0, 30*time.Second, true))
	defer s.Close(ctx)
	l := must[bench.LockSession](t)(z.NewLockSession(ctx, 0, 30*time.Second))
	defer l.Close(ctx)
	must[bench.Grant](t)(l.Lock(ctx, "x", 0)) // creates the lock's directory
	if err := l.Unlock(ctx, "x"); err != nil {
		t.Fatal(err)
	}
	must[bench.Grant](t)(s.Acquire(ctx, "s", 1, 0)) // reads the permits once
	must[uint64](t)(s.Release(ctx, "s"))
	if err := z.Read(ctx, 0, "s"); err != nil { // opens worker 0's session
		t.Fatal(err)
	}

	for _, c := range []struct {
		what string
		want uint64
		f    func()
	}{
		{"semaphore acquire", 3, func() { must[bench.Grant](t)(s.Acquire(ctx, "s", 1, 0)) }},
		{"semaphore release", 1, func() { must[uint64](t)(s.Release(ctx, "s")) }},
		{"semaphore acquire, weight 2", 6, func() { must[bench.Grant](t)(s.Acquire(ctx, "s", 2, 0)) }},
		{"semaphore release, weight 2", 2, func() { must[uint64](t)(s.Release(ctx, "s")) }},
		{"lock", 1, func() { must[bench.Grant](t)(l.Lock(ctx, "x", 0)) }},
		{"unlock", 1, func() {
			if err := l.Unlock(ctx, "x"); err != nil {
				t.Fatal(err)
			}
		}},
		{"session create and close", 2, func() {
			s := must[bench.Session](t)(z.NewSession(ctx, 0, 30*time.Second, false))
			s.Close(ctx)
		}},
		{"linearizable read", 0, func() {
			if err := z.Read(ctx, 0, "s"); err != nil {
				t.Fatal(err)
			}
		}},
		{"touch", 1, func() {
			if err := s.Touch(ctx); err != nil { // creates the node
				t.Fatal(err)
			}
		}},
		{"touch again", 1, func() {
			if err := s.Touch(ctx); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		if got := commits(c.f); got != c.want {
			t.Errorf("%s: %d transactions, want %d", c.what, got, c.want)
		}
	}
}

// A wait group's waiter returns once enough distinct jobs are complete (a
// job completed twice counts once); a barrier trips each round once every
// process has arrived, and exactly one process of each round was last.
func TestWaitGroupAndBarrier(t *testing.T) {
	z := newZK(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := z.CreateWaitGroup(ctx, 0, "g", 4); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- z.WaitWaitGroup(ctx, 1, "g") }()
	if err := z.CompleteJobs(ctx, 0, "g", []string{"a", "b"}); err != nil {
		t.Fatal(err)
	}
	if err := z.CompleteJobs(ctx, 0, "g", []string{"b", "c"}); err != nil { // b again
		t.Fatal(err)
	}
	waitChildren(t, z, z.root+"/w/g", 3)
	select {
	case err := <-done:
		t.Fatalf("waiter returned with 3 of 4 jobs: %v", err)
	default:
	}
	if err := z.CompleteJobs(ctx, 0, "g", []string{"d"}); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := z.DeleteWaitGroup(ctx, 0, "g"); err != nil {
		t.Fatal(err)
	}
	if ok, _, _ := z.admin.Exists(z.root + "/w/g"); ok {
		t.Fatal("wait group still there after delete")
	}

	const parties, rounds = 3, 4
	b, err := z.NewBarrier(ctx, "b", parties)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close(ctx)
	c0 := must[uint64](t)(z.CommitIndex(ctx))
	lasts := make([][parties]bool, rounds+1)
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make(chan error, parties)
	for w := 0; w < parties; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for r := int64(1); r <= rounds; r++ {
				_, last, known, err := b.Meet(ctx, w, r)
				if err != nil || !known {
					errs <- fmt.Errorf("worker %d round %d: known %v, %v", w, r, known, err)
					return
				}
				mu.Lock()
				lasts[r][w] = last
				mu.Unlock()
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for r := 1; r <= rounds; r++ {
		n := 0
		for _, l := range lasts[r] {
			if l {
				n++
			}
		}
		if n != 1 {
			t.Errorf("round %d: %d processes say they were last, want 1", r, n)
		}
	}
	if got := must[uint64](t)(z.CommitIndex(ctx)) - c0; got != rounds*(parties+1) {
		t.Errorf("%d rounds of %d: %d transactions, want %d", rounds, parties, got, rounds*(parties+1))
	}
}
