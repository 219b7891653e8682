package main

import (
	"context"
	"strings"
	"testing"
	"time"

	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
	"github.com/grackle-coord/grackle/server/servertest"
)

func runTestCluster(t *testing.T) (*servertest.Cluster, string) {
	c := servertest.Start(t, 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl := c.Client(0)
	if _, err := cl.CreateNamespace(ctx, &pb.CreateNamespaceRequest{Name: "ns"}); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.CreateSemaphore(ctx, &pb.CreateSemaphoreRequest{NamespaceName: "ns", SemaphoreName: "s", Permits: 2}); err != nil {
		t.Fatal(err)
	}
	return c, c.Nodes[0].GRPCAddr()
}

// The command runs holding the permits, sees its lease and token, and its
// exit code becomes grackle's; afterwards nothing is held and the lease is gone.
func TestRunHoldsPermitsAndPassesExitCode(t *testing.T) {
	c, addr := runTestCluster(t)
	r := runCLI(t, nil, "run", "--endpoints", addr, "--namespace", "ns", "--semaphore", "s", "--weight", "2", "--",
		"sh", "-c", `echo "lease=$GRACKLE_LEASE_ID token=$GRACKLE_FENCING_TOKEN"; exit 7`)
	if r.code != 7 {
		t.Fatalf("exit %d, want 7; stderr %q", r.code, r.stderr)
	}
	if !strings.Contains(r.stdout, "lease=ls_") || strings.Contains(r.stdout, "token= ") || strings.Contains(r.stdout, "token=0") {
		t.Fatalf("child output %q", r.stdout)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	g, err := c.Client(0).GetSemaphore(ctx, &pb.GetSemaphoreRequest{NamespaceName: "ns", SemaphoreName: "s"})
	if err != nil || g.Semaphore.ActiveHolds != 0 {
		t.Fatalf("after run: %v %v", g, err)
	}
	ls, err := c.Client(0).ListSemaphoreLeases(ctx, &pb.ListSemaphoreLeasesRequest{NamespaceName: "ns"})
	if err != nil || len(ls.Leases) != 0 {
		t.Fatalf("leases left: %v %v", ls, err)
	}
}

// Not acquired in time: exit 3 and the command never runs.
func TestRunNotAcquired(t *testing.T) {
	c, addr := runTestCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := c.Client(0).CreateSemaphoreLease(ctx, &pb.CreateSemaphoreLeaseRequest{NamespaceName: "ns", ProcessId: "other", TtlSeconds: 60})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Client(0).AcquireSemaphore(ctx, &pb.AcquireSemaphoreRequest{NamespaceName: "ns", SemaphoreName: "s", LeaseId: l.Lease.LeaseId, Weight: 2}); err != nil {
		t.Fatal(err)
	}
	r := runCLI(t, nil, "run", "--endpoints", addr, "--namespace", "ns", "--semaphore", "s", "--wait", "0", "--", "sh", "-c", "echo ran")
	if r.code != exitNotAcquired || strings.Contains(r.stdout, "ran") {
		t.Fatalf("exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
}

// A lease revoked out-of-band stops the command (SIGTERM) and exits 4.
func TestRunStopsCommandWhenLeaseLost(t *testing.T) {
	c, addr := runTestCluster(t)
	done := make(chan cliResult, 1)
	go func() {
		done <- runCLI(t, nil, "run", "--endpoints", addr, "--namespace", "ns", "--semaphore", "s", "--ttl", "3s", "--grace", "5s", "--",
			"sleep", "60")
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var lease string
	servertest.Eventually(t, "the run's hold", 20*time.Second, func() bool {
		hs, err := c.Client(0).ListSemaphoreHolders(ctx, &pb.ListSemaphoreHoldersRequest{NamespaceName: "ns", SemaphoreName: "s"})
		if err == nil && len(hs.Holders) == 1 {
			lease = hs.Holders[0].LeaseId
			return true
		}
		return false
	})
	if _, err := c.Client(0).RevokeSemaphoreLease(ctx, &pb.RevokeSemaphoreLeaseRequest{NamespaceName: "ns", LeaseId: lease}); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-done:
		if r.code != exitLeaseLost || !strings.Contains(r.stderr, "lost") {
			t.Fatalf("exit %d stderr %q", r.code, r.stderr)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("grackle run did not stop the command after its lease was revoked")
	}
}
