package client_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/grackle-coord/grackle/client"
	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
	"github.com/grackle-coord/grackle/server/servertest"
)

// TestHelperCreateLease is not a test: TestResumeAfterCreatorIsGone runs
// the test binary again with GRACKLE_HELPER_ENDPOINT set, and this process
// creates a session, acquires, prints the lease id and exits without
// revoking anything (as a crashed or restarted worker would).
func TestHelperCreateLease(t *testing.T) {
	ep := os.Getenv("GRACKLE_HELPER_ENDPOINT")
	if ep == "" {
		t.Skip("helper process of TestResumeAfterCreatorIsGone")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cli, err := client.New(ctx, client.Config{Endpoints: []string{ep}})
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	sess, err := cli.NewSession(ctx, "resume", "worker-1/pid-1", 3*time.Second)
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	if _, err := sess.Semaphore("s").Acquire(ctx, 1); err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	fmt.Println("lease:", sess.LeaseID())
	os.Exit(0) // gone: no Close, no revoke
}

// A process creates a lease (TTL 3 s), acquires, and exits. Another
// process resumes the lease by id: it finds it, keeps it alive well past
// the TTL, adopts the hold by re-acquiring (same lease: no second holder),
// and can hand it over again with Orphan, or revoke it with Close. A lease
// that is gone cannot be resumed.
func TestResumeAfterCreatorIsGone(t *testing.T) {
	c := servertest.Start(t, 1, nil)
	ep := c.Nodes[0].GRPCAddr()
	cli := newClient(t, ep)
	setup(t, cli, "resume", "s", 1)
	ctx := ctxT(t)

	helper := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestHelperCreateLease$", "-test.count=1")
	helper.Env = append(os.Environ(), "GRACKLE_HELPER_ENDPOINT="+ep)
	out, err := helper.Output()
	if err != nil {
		t.Fatalf("helper: %v: %s", err, out)
	}
	var lease string
	for _, l := range strings.Split(string(out), "\n") {
		if v, ok := strings.CutPrefix(l, "lease: "); ok {
			lease = strings.TrimSpace(v)
		}
	}
	if lease == "" {
		t.Fatalf("helper printed no lease: %s", out)
	}

	sess, err := cli.NewSession(ctx, "resume", "ignored", 0, client.WithLease(lease))
	if err != nil {
		t.Fatal(err)
	}
	if sess.LeaseID() != lease || sess.ProcessID() != "worker-1/pid-1" || sess.TTL() != 3*time.Second {
		t.Fatalf("resumed session %s %s %v", sess.LeaseID(), sess.ProcessID(), sess.TTL())
	}
	// Kept alive: expires_at moves forward, well past the first expiry.
	first := getLease(t, cli, lease).ExpiresAt
	servertest.Eventually(t, "the resumed lease outlives its TTL twice over", 30*time.Second, func() bool {
		return getLease(t, cli, lease).ExpiresAt > first+int64(6*time.Second)
	})
	// The hold from before is still there; a re-acquire adopts it.
	g, err := sess.Semaphore("s").Acquire(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	hs, err := cli.ListSemaphoreHolders(ctx, &pb.ListSemaphoreHoldersRequest{NamespaceName: "resume", SemaphoreName: "s"})
	if err != nil || len(hs.Holders) != 1 || hs.Holders[0].LeaseId != lease || hs.Holders[0].FencingToken != g.FencingToken {
		t.Fatalf("holders %v %v", hs, err)
	}

	// Hand-over: Orphan stops refreshing without revoking.
	sess.Orphan()
	if !errors.Is(sess.Err(), client.ErrSessionOrphaned) {
		t.Fatalf("after Orphan: %v", sess.Err())
	}
	if err := sess.Close(ctx); err != nil {
		t.Fatal(err)
	}
	getLease(t, cli, lease) // still there
	next, err := cli.NewSession(ctx, "resume", "", 10*time.Second, client.WithLease(lease))
	if err != nil {
		t.Fatal(err)
	}
	if next.TTL() != 10*time.Second {
		t.Fatalf("ttl %v", next.TTL())
	}
	if err := next.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.NewSession(ctx, "resume", "", 0, client.WithLease(lease)); !errors.Is(err, client.ErrLeaseLost) {
		t.Fatalf("resume of a revoked lease: %v", err)
	}
}

func getLease(t *testing.T, cli *client.Client, id string) *pb.SemaphoreLease {
	t.Helper()
	r, err := cli.GetSemaphoreLease(ctxT(t), &pb.GetSemaphoreLeaseRequest{NamespaceName: "resume", LeaseId: id})
	if err != nil {
		t.Fatal(err)
	}
	return r.Lease
}
