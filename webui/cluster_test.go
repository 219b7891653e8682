package webui_test

import (
	"bufio"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
	"github.com/grackle-coord/grackle/server"
	"github.com/grackle-coord/grackle/server/servertest"
)

// event is one server-sent event.
type event struct{ name, data string }

// events GETs an event stream and hands its events out until it ends.
func events(t *testing.T, ctx context.Context, url string) <-chan event {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusOK {
		res.Body.Close()
		t.Fatalf("GET %s: HTTP %d", url, res.StatusCode)
	}
	ch := make(chan event, 64)
	go func() {
		defer close(ch)
		defer res.Body.Close()
		sc := bufio.NewScanner(res.Body)
		sc.Buffer(nil, 1<<20)
		var e event
		for sc.Scan() {
			switch line := sc.Text(); {
			case strings.HasPrefix(line, "event: "):
				e.name = line[7:]
			case strings.HasPrefix(line, "data: "):
				e.data += line[6:]
			case line == "" && e.name != "":
				ch <- e
				e = event{}
			}
		}
	}()
	return ch
}

// The view's lock watch outlives a leader change: the stream from the
// node's page stays open, says "resumed", and goes on with the lock's
// state from the new leader (holders kept, raft index never going back),
// so a grant made there shows up.
func TestLockWatchAcrossLeaderChange(t *testing.T) {
	c := servertest.Start(t, 3, func(cfg *server.Config) { cfg.HTTPAddr = "127.0.0.1:0" })
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	leader := c.WaitLeader()
	api := c.Client(leader)
	const ns, lock = "lc", "jobs/nightly"
	ok[*pb.CreateNamespaceResponse](t)(api.CreateNamespace(ctx, &pb.CreateNamespaceRequest{Name: ns}))
	lease := func(proc string) string {
		return ok[*pb.CreateLockLeaseResponse](t)(c.Client(c.WaitLeader()).CreateLockLease(ctx,
			&pb.CreateLockLeaseRequest{NamespaceName: ns, ProcessId: proc, TtlSeconds: 300})).Lease.LeaseId
	}
	a, b := lease("host-1"), lease("host-2")
	ok[*pb.AcquireLockResponse](t)(api.AcquireLock(ctx, &pb.AcquireLockRequest{NamespaceName: ns, LockName: lock, LeaseId: a, Exclusive: true}))

	// The page is served by a node that does not lead (its client follows
	// the leader), so the watch is relayed from elsewhere.
	view := (leader + 1) % 3
	ch := events(t, ctx, "http://"+c.Nodes[view].HTTPAddr()+"/ui/api/namespaces/"+ns+"/lock-watch/"+lock)
	var last uint64
	next := func(what string) (string, *pb.WatchLockResponse) {
		t.Helper()
		select {
		case e, open := <-ch:
			if !open {
				t.Fatalf("%s: the event stream ended", what)
			}
			if e.name != "state" {
				return e.name, nil
			}
			var m pb.WatchLockResponse
			if err := protojson.Unmarshal([]byte(e.data), &m); err != nil {
				t.Fatal(err)
			}
			if m.RaftIndex < last {
				t.Fatalf("%s: raft index %d after %d", what, m.RaftIndex, last)
			}
			last = m.RaftIndex
			return e.name, &m
		case <-ctx.Done():
			t.Fatalf("%s: no event", what)
		}
		return "", nil
	}
	if _, m := next("the first state"); m == nil || len(m.Lock.Holders) != 1 || m.Lock.Holders[0].LeaseId != a || !m.Lock.Holders[0].Exclusive {
		t.Fatalf("first state %v", m)
	}

	if _, err := c.TransferLeadership(ctx, leader, ""); err != nil {
		t.Fatal(err)
	}
	servertest.Eventually(t, "a new leader", 30*time.Second, func() bool { l := c.Leader(); return l >= 0 && l != leader })
	for resumed := false; !resumed; {
		name, m := next("the resume")
		switch {
		case name == "resumed":
			resumed = true
		case name != "state":
			t.Fatalf("event %q before the resume", name)
		case len(m.Lock.Holders) != 1:
			t.Fatalf("holders changed before anything was granted: %v", m.Lock.Holders)
		}
	}
	if name, m := next("the resumed state"); m == nil || len(m.Lock.Holders) != 1 || m.Lock.Holders[0].LeaseId != a {
		t.Fatalf("after the resume: %q %v", name, m)
	}

	// Released on the new leader and taken by b: the stream shows it.
	nl := c.Client(c.WaitLeader())
	ok[*pb.ReleaseLockResponse](t)(nl.ReleaseLock(ctx, &pb.ReleaseLockRequest{NamespaceName: ns, LockName: lock, LeaseId: a}))
	ok[*pb.AcquireLockResponse](t)(nl.AcquireLock(ctx, &pb.AcquireLockRequest{NamespaceName: ns, LockName: lock, LeaseId: b, Exclusive: true}))
	for {
		_, m := next("b's grant")
		if m != nil && len(m.Lock.Holders) == 1 && m.Lock.Holders[0].LeaseId == b {
			break
		}
	}
}
