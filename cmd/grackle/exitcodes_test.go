package main

// One test per exit code, against a real node (in-process, loopback),
// through the same client stack as every command.

import (
	"context"
	"strings"
	"testing"
	"time"

	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
	"github.com/grackle-coord/grackle/server/servertest"
)

// wantExit runs args and checks the exit code and that stderr contains
// errPart (one line) or is empty when errPart is "".
func wantExit(t *testing.T, addr string, code int, errPart string, args ...string) cliResult {
	t.Helper()
	r := runCLI(t, map[string]string{"GRACKLE_ENDPOINTS": addr}, args...)
	if r.code != code {
		t.Fatalf("%q: exit %d, want %d; stderr %q stdout %q", args, r.code, code, r.stderr, r.stdout)
	}
	if errPart == "" && r.stderr != "" || !strings.Contains(r.stderr, errPart) || strings.Count(r.stderr, "\n") > 1 {
		t.Fatalf("%q: stderr %q, want one line containing %q", args, r.stderr, errPart)
	}
	return r
}

func newLease(t *testing.T, addr string) string {
	t.Helper()
	r := wantExit(t, addr, exitOK, "", "lease", "create", "ns", "--process-id", "test", "--ttl", "1m", "-o", "id")
	return strings.TrimSpace(r.stdout)
}

func TestExit0OK(t *testing.T) {
	_, addr := runTestCluster(t)
	r := wantExit(t, addr, exitOK, "", "semaphore", "get", "ns", "s", "-o", "template={{.semaphore.permits}}")
	if r.stdout != "2\n" {
		t.Fatalf("stdout %q", r.stdout)
	}
	// What did not exist: said so, still exit 0.
	r = wantExit(t, addr, exitOK, "", "namespace", "delete", "never_was")
	if r.stdout != "namespace \"never_was\" did not exist\n" {
		t.Fatalf("stdout %q", r.stdout)
	}
	r = wantExit(t, addr, exitOK, "", "semaphore", "delete", "ns", "never_was")
	if r.stdout != "semaphore \"never_was\" did not exist in namespace \"ns\"\n" {
		t.Fatalf("stdout %q", r.stdout)
	}
	lease := newLease(t, addr)
	r = wantExit(t, addr, exitOK, "", "semaphore", "release", "ns", "s", "--lease", lease)
	if !strings.HasSuffix(r.stdout, "lease "+lease+" did not hold semaphore \"s\": nothing released\n") {
		t.Fatalf("stdout %q", r.stdout)
	}
	wantExit(t, addr, exitOK, "", "lease", "revoke", "ns", lease)
	r = wantExit(t, addr, exitOK, "", "lease", "revoke", "ns", lease)
	if r.stdout != "lease "+lease+" did not exist in namespace \"ns\" (or had expired)\n" {
		t.Fatalf("stdout %q", r.stdout)
	}
}

func TestExit1CallFailed(t *testing.T) {
	_, addr := runTestCluster(t)
	wantExit(t, addr, exitCallFailed, `grackle: semaphore get: semaphore "nope" not found in namespace "ns"`, "semaphore", "get", "ns", "nope")
	wantExit(t, addr, exitCallFailed, `grackle: namespace create: namespace "ns" already exists`, "namespace", "create", "ns")
	wantExit(t, closedAddr(t), exitCallFailed, "grackle: namespace list: no endpoint of", "namespace", "list", "--timeout", "1s")
}

func TestExit2BadInput(t *testing.T) {
	_, addr := runTestCluster(t)
	// Caught locally.
	wantExit(t, addr, exitUsage, "grackle: semaphore create: --permits 0: must be at least 1", "semaphore", "create", "ns", "x", "--permits", "0")
	wantExit(t, addr, exitUsage, `grackle: semaphore create: SEMAPHORE "bad name": may contain only [-_0-9a-zA-Z]`, "semaphore", "create", "ns", "bad name", "--permits", "1")
	// Rejected by the server: InvalidArgument is bad input too.
	lease := newLease(t, addr)
	wantExit(t, addr, exitUsage, "grackle: semaphore acquire: --weight 3: more than the semaphore's 2 permits", "semaphore", "acquire", "ns", "s", "--lease", lease, "--weight", "3")
}

func TestExit3NotAcquired(t *testing.T) {
	_, addr := runTestCluster(t)
	holder, other := newLease(t, addr), newLease(t, addr)
	wantExit(t, addr, exitOK, "", "semaphore", "acquire", "ns", "s", "--lease", holder, "--weight", "2")
	wantExit(t, addr, exitNotAcquired, "UNAVAILABLE", "semaphore", "acquire", "ns", "s", "--lease", other)
	wantExit(t, addr, exitNotAcquired, "TIMED_OUT", "semaphore", "acquire", "ns", "s", "--lease", other, "--wait", "1")
}

func TestExit4LeaseLost(t *testing.T) {
	_, addr := runTestCluster(t)
	lease := newLease(t, addr)
	wantExit(t, addr, exitOK, "", "lease", "revoke", "ns", lease)
	wantExit(t, addr, exitLeaseLost, `grackle: lease refresh: lease "`+lease+`" not found in namespace "ns"; the lease is lost`, "lease", "refresh", "ns", lease, "--ttl", "30s")
	wantExit(t, addr, exitLeaseLost, `grackle: semaphore acquire: lease "`+lease+`" not found or expired in namespace "ns"; the lease is lost`, "semaphore", "acquire", "ns", "s", "--lease", lease)
	wantExit(t, addr, exitLeaseLost, `grackle: semaphore acquire: lease "ls_NeverCreatedLease0000001" not found or expired in namespace "ns"; the lease is lost`, "semaphore", "acquire", "ns", "s", "--lease", "ls_NeverCreatedLease0000001", "--wait", "5s")
	// A missing semaphore is the call's failure, not a lost lease.
	wantExit(t, addr, exitCallFailed, "grackle: semaphore acquire: semaphore \"nope\" not found", "semaphore", "acquire", "ns", "nope", "--lease", newLease(t, addr))
	// (run's exit 4: TestRunStopsCommandWhenLeaseLost.)
}

// waitActivity waits until the semaphore's last_activity_at moves past
// since: an acquire reached the leader's state machine.
func waitActivity(t *testing.T, c *servertest.Cluster, since int64) {
	t.Helper()
	servertest.Eventually(t, "the acquire reaches the leader", 30*time.Second, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		l := c.Leader()
		if l < 0 {
			return false
		}
		g, err := c.Client(l).GetSemaphore(ctx, &pb.GetSemaphoreRequest{NamespaceName: "ns", SemaphoreName: "s"})
		return err == nil && g.Semaphore.LastActivityAt > since
	})
}

func lastActivity(t *testing.T, c *servertest.Cluster) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l := c.WaitLeader()
	g, err := c.Client(l).GetSemaphore(ctx, &pb.GetSemaphoreRequest{NamespaceName: "ns", SemaphoreName: "s"})
	if err != nil {
		t.Fatal(err)
	}
	return g.Semaphore.LastActivityAt
}

func TestExit130Interrupted(t *testing.T) {
	c, addr := runTestCluster(t)
	holder, other := newLease(t, addr), newLease(t, addr)
	wantExit(t, addr, exitOK, "", "semaphore", "acquire", "ns", "s", "--lease", holder, "--weight", "2")
	since := lastActivity(t, c)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan cliResult, 1)
	go func() {
		done <- runCLIOpts(t, ctx, map[string]string{"GRACKLE_ENDPOINTS": addr}, nil, false,
			"semaphore", "acquire", "ns", "s", "--lease", other, "--wait", "60s")
	}()
	waitActivity(t, c, since)
	cancel() // what SIGINT does
	r := <-done
	if r.code != exitInterrupted || r.stderr != "grackle: semaphore acquire: interrupted\n" {
		t.Fatalf("exit %d stderr %q", r.code, r.stderr)
	}
}

// The status line: drawn on a terminal while the acquire waits, erased
// before the output; absent with --quiet and off a terminal.
func TestWaitStatusLine(t *testing.T) {
	_, addr := runTestCluster(t)
	holder, other := newLease(t, addr), newLease(t, addr)
	wantExit(t, addr, exitOK, "", "semaphore", "acquire", "ns", "s", "--lease", holder, "--weight", "2")
	env := map[string]string{"GRACKLE_ENDPOINTS": addr}
	args := []string{"semaphore", "acquire", "ns", "s", "--lease", other, "--wait", "3s", "-o", "id"}

	r := runCLIOpts(t, context.Background(), env, nil, true, args...)
	if r.code != exitNotAcquired {
		t.Fatalf("exit %d stderr %q", r.code, r.stderr)
	}
	if !strings.Contains(r.stdout, "\r\x1b[2Kwaiting for 1 permit(s) of ns/s: ") || !strings.Contains(r.stdout, "s left") ||
		!strings.HasSuffix(r.stdout, "\r\x1b[2K") {
		t.Fatalf("terminal stdout %q", r.stdout)
	}
	for _, extra := range [][]string{{"--quiet"}, nil} {
		term := extra != nil
		r := runCLIOpts(t, context.Background(), env, nil, term, append(args, extra...)...)
		if r.code != exitNotAcquired || r.stdout != "" {
			t.Fatalf("term=%v %q: exit %d stdout %q", term, extra, r.code, r.stdout)
		}
	}
}

// An acquire sent to a follower keeps waiting across a leadership change:
// the old leader ends the wait with Unavailable, the client retries on the
// new one (re-acquire is idempotent), and the grant arrives: exit 0.
func TestAcquireThroughFollowerSurvivesFailover(t *testing.T) {
	c := servertest.Start(t, 3, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl := c.Client(c.Leader())
	if _, err := cl.CreateNamespace(ctx, &pb.CreateNamespaceRequest{Name: "ns"}); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.CreateSemaphore(ctx, &pb.CreateSemaphoreRequest{NamespaceName: "ns", SemaphoreName: "s", Permits: 1}); err != nil {
		t.Fatal(err)
	}
	holder, err := cl.CreateSemaphoreLease(ctx, &pb.CreateSemaphoreLeaseRequest{NamespaceName: "ns", ProcessId: "holder", TtlSeconds: 120})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.AcquireSemaphore(ctx, &pb.AcquireSemaphoreRequest{NamespaceName: "ns", SemaphoreName: "s", LeaseId: holder.Lease.LeaseId, Weight: 1}); err != nil {
		t.Fatal(err)
	}
	waiter, err := cl.CreateSemaphoreLease(ctx, &pb.CreateSemaphoreLeaseRequest{NamespaceName: "ns", ProcessId: "waiter", TtlSeconds: 120})
	if err != nil {
		t.Fatal(err)
	}
	follower := c.Nodes[c.Follower()].GRPCAddr()
	since := lastActivity(t, c)
	done := make(chan cliResult, 1)
	go func() {
		done <- runCLIOpts(t, context.Background(), map[string]string{"GRACKLE_ENDPOINTS": follower}, nil, false,
			"semaphore", "acquire", "ns", "s", "--lease", waiter.Lease.LeaseId, "--wait", "50s", "-o", "id")
	}()
	waitActivity(t, c, since)
	old := c.Leader()
	if _, err := c.TransferLeadership(ctx, old, ""); err != nil {
		t.Fatal(err)
	}
	servertest.Eventually(t, "a new leader", 30*time.Second, func() bool { l := c.Leader(); return l >= 0 && l != old })
	// The holder goes: the retried acquire is granted, whether it queued
	// on the new leader before this or arrives after.
	if _, err := c.Client(c.WaitLeader()).RevokeSemaphoreLease(ctx, &pb.RevokeSemaphoreLeaseRequest{NamespaceName: "ns", LeaseId: holder.Lease.LeaseId}); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.code != exitOK || strings.TrimSpace(r.stdout) == "" {
		t.Fatalf("exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
}
