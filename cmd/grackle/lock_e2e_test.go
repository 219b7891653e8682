package main

// The lock commands and run --lock against a real node (in-process,
// loopback).

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
	"github.com/grackle-coord/grackle/server/servertest"
)

// newLockLease creates a lock lease in ns through the CLI.
func newLockLease(t *testing.T, addr, pid string) string {
	t.Helper()
	r := wantExit(t, addr, exitOK, "", "lock", "lease", "create", "ns", "--process-id", pid, "--ttl", "1m", "-o", "id")
	return strings.TrimSpace(r.stdout)
}

func getLockE2E(t *testing.T, c *servertest.Cluster, name string) *pb.Lock {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := c.Client(0).GetLock(ctx, &pb.GetLockRequest{NamespaceName: "ns", LockName: name})
	if err != nil {
		t.Fatal(err)
	}
	return r.Lock
}

// Exclusive blocks exclusive (exit 3, with what blocked it), shared and
// shared coexist, release hands the lock on, and the exit codes of bad
// input and lost leases hold for the lock commands.
func TestLockCommandsE2E(t *testing.T) {
	c, addr := runTestCluster(t)
	a := newLockLease(t, addr, "a")
	b := newLockLease(t, addr, "b")
	if !strings.HasPrefix(a, "ll_") {
		t.Fatalf("lock lease id %q", a)
	}

	r := wantExit(t, addr, exitOK, "", "lock", "acquire", "ns", "orders", "--lease", a, "-o", "id")
	tokA, err := strconv.ParseUint(strings.TrimSpace(r.stdout), 10, 64)
	if err != nil || tokA == 0 {
		t.Fatalf("fencing token %q", r.stdout)
	}
	wantExit(t, addr, exitNotAcquired, `grackle: lock acquire: UNAVAILABLE: "orders/eu" not acquired exclusive at once (an ancestor is held (orders)`,
		"lock", "acquire", "ns", "orders/eu", "--lease", b)
	wantExit(t, addr, exitNotAcquired, `grackle: lock acquire: TIMED_OUT: "orders" not acquired shared within 1s (held by another lease`,
		"lock", "acquire", "ns", "orders", "--lease", b, "--shared", "--wait", "1s")

	// Release hands it on.
	r = wantExit(t, addr, exitOK, "", "lock", "release", "ns", "orders", "--lease", a, "-o", "template={{.released}}")
	if r.stdout != "true\n" {
		t.Fatalf("release: %q", r.stdout)
	}
	r = wantExit(t, addr, exitOK, "", "lock", "acquire", "ns", "orders/eu", "--lease", b, "--shared", "-o", "id")
	if tokB, _ := strconv.ParseUint(strings.TrimSpace(r.stdout), 10, 64); tokB <= tokA {
		t.Fatalf("token %q after %d", r.stdout, tokA)
	}
	// Shared + shared.
	wantExit(t, addr, exitOK, "", "lock", "acquire", "ns", "orders/eu", "--lease", a, "--shared")
	if l := getLockE2E(t, c, "orders/eu"); l.State != pb.LockState_LOCK_STATE_SHARED_LOCKED || len(l.Holders) != 2 {
		t.Fatalf("shared+shared: %v", l)
	}
	r = wantExit(t, addr, exitOK, "", "lock", "list", "ns", "--prefix", "orders", "-o", "id")
	if r.stdout != "orders/eu\n" {
		t.Fatalf("list: %q", r.stdout)
	}
	r = wantExit(t, addr, exitOK, "", "lock", "get", "ns", "orders/eu")
	if !strings.Contains(r.stdout, "State:          SHARED_LOCKED\n") || strings.Count(r.stdout, "shared") != 2 {
		t.Fatalf("get:\n%s", r.stdout)
	}
	r = wantExit(t, addr, exitOK, "", "lock", "delete", "ns", "orders/eu")
	if r.stdout != "lock \"orders/eu\" in namespace \"ns\" released by force\n" {
		t.Fatalf("delete: %q", r.stdout)
	}

	// Bad input (exit 2): a bad name and a semaphore lease are refused
	// before any call; a wait beyond the server's maximum by the server,
	// named as the flag given.
	wantExit(t, addr, exitUsage, "grackle: lock acquire: LOCK a//b: empty path segment at byte 2", "lock", "acquire", "ns", "a//b", "--lease", a)
	wantExit(t, addr, exitUsage, ": a semaphore lease; locks are held under lock leases", "lock", "acquire", "ns", "x", "--lease", newLease(t, addr))
	wantExit(t, addr, exitUsage, "grackle: lock acquire: --wait 10m: at most 5m0s\n", "lock", "acquire", "ns", "x", "--lease", a, "--wait", "10m")
	// The lease is gone: exit 4.
	wantExit(t, addr, exitOK, "", "lock", "lease", "revoke", "ns", a)
	wantExit(t, addr, exitLeaseLost, "grackle: lock acquire: lock lease \""+a+"\" not found or expired in namespace \"ns\"; the lease is lost\n", "lock", "acquire", "ns", "x", "--lease", a)
	wantExit(t, addr, exitLeaseLost, "; the lease is lost\n", "lock", "lease", "refresh", "ns", a)
}

// run --lock holds the lock while the command runs, with the lease, the
// fencing token, the lock and its mode in its environment; the exit code
// is the command's; afterwards the lock is free and the lease gone.
func TestRunLockHoldsLockAndPassesExitCode(t *testing.T) {
	c, addr := runTestCluster(t)
	r := runCLI(t, nil, "run", "--endpoints", addr, "--namespace", "ns", "--lock", "reports/daily", "--",
		"sh", "-c", `echo "lease=$GRACKLE_LEASE_ID token=$GRACKLE_FENCING_TOKEN lock=$GRACKLE_LOCK mode=$GRACKLE_LOCK_MODE"; exit 7`)
	if r.code != 7 {
		t.Fatalf("exit %d, want 7; stderr %q", r.code, r.stderr)
	}
	if !strings.Contains(r.stdout, "lease=ll_") || strings.Contains(r.stdout, "token= ") || strings.Contains(r.stdout, "token=0 ") ||
		!strings.Contains(r.stdout, "lock=reports/daily mode=exclusive\n") {
		t.Fatalf("child output %q", r.stdout)
	}
	if l := getLockE2E(t, c, "reports/daily"); l.State != pb.LockState_LOCK_STATE_UNLOCKED {
		t.Fatalf("after run: %v", l)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ls, err := c.Client(0).ListLockLeases(ctx, &pb.ListLockLeasesRequest{NamespaceName: "ns"})
	if err != nil || len(ls.Leases) != 0 {
		t.Fatalf("lock leases left: %v %v", ls, err)
	}
}

// run --lock: exclusive is not acquired under another's exclusive hold
// (exit 3, the command never runs); --shared runs beside a shared hold.
func TestRunLockNotAcquiredAndShared(t *testing.T) {
	_, addr := runTestCluster(t)
	other := newLockLease(t, addr, "other")
	wantExit(t, addr, exitOK, "", "lock", "acquire", "ns", "reports", "--lease", other, "--shared")
	r := runCLI(t, nil, "run", "--endpoints", addr, "--namespace", "ns", "--lock", "reports/daily", "--wait", "0", "--", "sh", "-c", "echo ran")
	if r.code != exitNotAcquired || strings.Contains(r.stdout, "ran") ||
		r.stderr != "grackle: run: exclusive lock ns/reports/daily not acquired within 0s (an ancestor is held (reports))\n" {
		t.Fatalf("exclusive: exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	r = runCLI(t, nil, "run", "--endpoints", addr, "--namespace", "ns", "--lock", "reports/daily", "--shared", "--wait", "5s", "--",
		"sh", "-c", `echo "mode=$GRACKLE_LOCK_MODE"`)
	if r.code != 0 || r.stdout != "mode=shared\n" {
		t.Fatalf("shared: exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
}

// A lock lease revoked out of band stops the command (SIGTERM) and exits 4.
func TestRunLockStopsCommandWhenLeaseLost(t *testing.T) {
	c, addr := runTestCluster(t)
	done := make(chan cliResult, 1)
	go func() {
		done <- runCLI(t, nil, "run", "--endpoints", addr, "--namespace", "ns", "--lock", "k", "--ttl", "3s", "--grace", "5s", "--",
			"sleep", "60")
	}()
	var lease string
	servertest.Eventually(t, "the run's lock", 20*time.Second, func() bool {
		l := getLockE2E(t, c, "k")
		if len(l.Holders) == 1 {
			lease = l.Holders[0].LeaseId
			return true
		}
		return false
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.Client(0).RevokeLockLease(ctx, &pb.RevokeLockLeaseRequest{NamespaceName: "ns", LeaseId: lease}); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-done:
		if r.code != exitLeaseLost || !strings.Contains(r.stderr, "lost") {
			t.Fatalf("exit %d stderr %q", r.code, r.stderr)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("grackle run --lock did not stop the command after its lease was revoked")
	}
}

// lock waiters and lock watch see a waiting acquire; completion offers
// held lock names.
func TestLockWaitersWatchCompletionE2E(t *testing.T) {
	_, addr := runTestCluster(t)
	a := newLockLease(t, addr, "holder")
	b := newLockLease(t, addr, "waiter")
	wantExit(t, addr, exitOK, "", "lock", "acquire", "ns", "orders", "--lease", a)
	wantExit(t, addr, exitOK, "", "lock", "acquire", "ns", "reports/daily", "--lease", a, "--shared")
	done := make(chan cliResult, 1)
	go func() {
		done <- runCLI(t, map[string]string{"GRACKLE_ENDPOINTS": addr}, "lock", "acquire", "ns", "orders/eu", "--lease", b, "--wait", "30s", "-o", "id")
	}()
	servertest.Eventually(t, "the waiter in lock waiters", 20*time.Second, func() bool {
		r := runCLI(t, map[string]string{"GRACKLE_ENDPOINTS": addr}, "lock", "waiters", "ns", "orders/eu", "-o", "id")
		return r.code == 0 && r.stdout == b+"\n"
	})
	r := wantExit(t, addr, exitOK, "", "lock", "waiters", "ns", "orders/eu")
	if !strings.Contains(r.stdout, "1         "+b+"  waiter      exclusive") {
		t.Fatalf("waiters:\n%s", r.stdout)
	}
	r = wantExit(t, addr, exitOK, "", "lock", "watch", "ns", "orders/eu", "--count", "1")
	if !strings.Contains(r.stdout, " (initial): unlocked; 1 waiting [1:waiter exclusive]\n") {
		t.Fatalf("watch: %q", r.stdout)
	}
	env := map[string]string{"GRACKLE_ENDPOINTS": addr}
	if got := strings.Join(completions(t, env, "lock", "get", "ns", ""), " "); got != "orders reports/daily" {
		t.Errorf("completion: %q", got)
	}
	if got := strings.Join(completions(t, env, "lock", "release", "ns", "reports/"), " "); got != "reports/daily" {
		t.Errorf("completion under reports/: %q", got)
	}

	wantExit(t, addr, exitOK, "", "lock", "release", "ns", "orders", "--lease", a)
	select {
	case r := <-done:
		if r.code != 0 || strings.TrimSpace(r.stdout) == "" {
			t.Fatalf("the waiting acquire: exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the waiting acquire was not granted after the release")
	}
}
