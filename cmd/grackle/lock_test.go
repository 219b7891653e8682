package main

// The lock commands against an in-process fake lock service: flags,
// requests, output and exit codes, without a real server.

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"sort"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/grackle-coord/grackle/apierr"
	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
)

// lockFake adds locks and lock leases to fakeServer: a lease holds a lock
// when nobody conflicts (no queue: a blocked request is UNAVAILABLE, or
// TIMED_OUT at once when it would wait), with the contract's conflict
// relation over the name hierarchy and a fencing token per grant.
type lockFake struct {
	*fakeServer
	lockLeases map[string]*pb.LockLease
	locks      map[string]*pb.Lock
	token      uint64
}

func startLockFake(t *testing.T) (*lockFake, string) {
	t.Helper()
	f := &lockFake{
		fakeServer: &fakeServer{namespaces: map[string]*pb.Namespace{}, semaphores: map[string]*pb.Semaphore{}, leases: map[string]*pb.SemaphoreLease{}},
		lockLeases: map[string]*pb.LockLease{}, locks: map[string]*pb.Lock{}, token: 100,
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	pb.RegisterGrackleServiceServer(srv, f)
	pb.RegisterClusterServiceServer(srv, f)
	f.addr = lis.Addr().String()
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	return f, f.addr
}

// related: a equals b or one is an ancestor of the other.
func related(a, b string) bool {
	return a == b || strings.HasPrefix(a, b+"/") || strings.HasPrefix(b, a+"/")
}

func (f *lockFake) leaseLocked(id string) (*pb.LockLease, error) {
	if strings.HasPrefix(id, "ls_") {
		return nil, notFound(apierr.LeaseNotFound, "lease %s is a semaphore lease; this call needs a lock lease", id)
	}
	l, ok := f.lockLeases[id]
	if !ok {
		return nil, notFound(apierr.LeaseNotFound, "lock lease %s not found", id)
	}
	return l, nil
}

func (f *lockFake) CreateLockLease(ctx context.Context, r *pb.CreateLockLeaseRequest) (*pb.CreateLockLeaseResponse, error) {
	f.record(ctx, r)
	f.mu.Lock()
	defer f.mu.Unlock()
	l := &pb.LockLease{LeaseId: fmt.Sprintf("ll_fake%020d", len(f.lockLeases)+1), ProcessId: r.ProcessId, TtlSeconds: r.TtlSeconds,
		CreatedAt: seedCreated, ExpiresAt: seedCreated + r.TtlSeconds*int64(time.Second), Metadata: r.Metadata}
	f.lockLeases[l.LeaseId] = l
	return &pb.CreateLockLeaseResponse{Lease: l}, nil
}

func (f *lockFake) GetLockLease(ctx context.Context, r *pb.GetLockLeaseRequest) (*pb.GetLockLeaseResponse, error) {
	f.record(ctx, r)
	f.mu.Lock()
	defer f.mu.Unlock()
	l, err := f.leaseLocked(r.LeaseId)
	if err != nil {
		return nil, err
	}
	return &pb.GetLockLeaseResponse{Lease: l}, nil
}

func (f *lockFake) RefreshLockLease(ctx context.Context, r *pb.RefreshLockLeaseRequest) (*pb.RefreshLockLeaseResponse, error) {
	f.record(ctx, r)
	f.mu.Lock()
	defer f.mu.Unlock()
	l, err := f.leaseLocked(r.LeaseId)
	if err != nil {
		return nil, err
	}
	l = proto.Clone(l).(*pb.LockLease)
	l.ExpiresAt = testNow.UnixNano() + r.TtlSeconds*int64(time.Second)
	f.lockLeases[l.LeaseId] = l
	return &pb.RefreshLockLeaseResponse{Lease: l}, nil
}

func (f *lockFake) RevokeLockLease(ctx context.Context, r *pb.RevokeLockLeaseRequest) (*pb.RevokeLockLeaseResponse, error) {
	f.record(ctx, r)
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, err := f.leaseLocked(r.LeaseId); err != nil {
		return nil, err
	}
	delete(f.lockLeases, r.LeaseId)
	for name := range f.locks {
		f.dropHolderLocked(name, r.LeaseId)
	}
	return &pb.RevokeLockLeaseResponse{}, nil
}

func (f *lockFake) ListLockLeases(ctx context.Context, r *pb.ListLockLeasesRequest) (*pb.ListLockLeasesResponse, error) {
	f.record(ctx, r)
	f.mu.Lock()
	defer f.mu.Unlock()
	out := &pb.ListLockLeasesResponse{}
	for _, l := range f.lockLeases {
		if r.ProcessId == "" || l.ProcessId == r.ProcessId {
			out.Leases = append(out.Leases, l)
		}
	}
	return out, nil
}

// dropHolderLocked removes lease's hold of name; it reports whether there was one.
func (f *lockFake) dropHolderLocked(name, lease string) bool {
	l := f.locks[name]
	if l == nil {
		return false
	}
	for i, h := range l.Holders {
		if h.LeaseId == lease {
			l.Holders = append(l.Holders[:i], l.Holders[i+1:]...)
			if len(l.Holders) == 0 {
				delete(f.locks, name)
			} else if !l.Holders[0].Exclusive {
				l.State = pb.LockState_LOCK_STATE_SHARED_LOCKED
			}
			return true
		}
	}
	return false
}

func (f *lockFake) lockLocked(name string) *pb.Lock {
	if l := f.locks[name]; l != nil {
		return proto.Clone(l).(*pb.Lock)
	}
	return &pb.Lock{Name: name, State: pb.LockState_LOCK_STATE_UNLOCKED}
}

func (f *lockFake) AcquireLock(ctx context.Context, r *pb.AcquireLockRequest) (*pb.AcquireLockResponse, error) {
	f.record(ctx, r)
	f.mu.Lock()
	defer f.mu.Unlock()
	ls, err := f.leaseLocked(r.LeaseId)
	if err != nil {
		return nil, err
	}
	var reason pb.ContentionReason
	var blocking []string
	for name, l := range f.locks {
		if !related(name, r.LockName) {
			continue
		}
		for _, h := range l.Holders {
			if h.LeaseId != r.LeaseId && (h.Exclusive || r.Exclusive) {
				switch {
				case name == r.LockName:
					reason = pb.ContentionReason_CONTENTION_REASON_PEER
				case strings.HasPrefix(r.LockName, name+"/"):
					reason = pb.ContentionReason_CONTENTION_REASON_ANCESTOR
				default:
					reason = pb.ContentionReason_CONTENTION_REASON_DESCENDANT
				}
				blocking = append(blocking, name)
				break
			}
		}
	}
	if reason != pb.ContentionReason_CONTENTION_REASON_UNSPECIFIED {
		o := pb.AcquireOutcome_ACQUIRE_OUTCOME_UNAVAILABLE
		if r.TimeoutSeconds > 0 {
			o = pb.AcquireOutcome_ACQUIRE_OUTCOME_TIMED_OUT
		}
		return &pb.AcquireLockResponse{Lock: f.lockLocked(r.LockName), Outcome: o, Reason: reason, BlockingLocks: blocking}, nil
	}
	f.dropHolderLocked(r.LockName, r.LeaseId)
	f.token++
	h := &pb.LockHolder{LeaseId: ls.LeaseId, ProcessId: ls.ProcessId, Exclusive: r.Exclusive, LockedAt: seedCreated,
		ExpiresAt: ls.ExpiresAt, FencingToken: f.token, Metadata: r.Metadata}
	l := f.locks[r.LockName]
	if l == nil {
		l = &pb.Lock{Name: r.LockName, LockedAt: seedCreated}
		f.locks[r.LockName] = l
	}
	l.Holders = append(l.Holders, h)
	l.LastActivityAt = seedCreated
	l.State = pb.LockState_LOCK_STATE_SHARED_LOCKED
	if r.Exclusive {
		l.State = pb.LockState_LOCK_STATE_EXCLUSIVE_LOCKED
	}
	return &pb.AcquireLockResponse{Lock: f.lockLocked(r.LockName), Outcome: pb.AcquireOutcome_ACQUIRE_OUTCOME_ACQUIRED, Holder: h}, nil
}

func (f *lockFake) ReleaseLock(ctx context.Context, r *pb.ReleaseLockRequest) (*pb.ReleaseLockResponse, error) {
	f.record(ctx, r)
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, err := f.leaseLocked(r.LeaseId); err != nil {
		return nil, err
	}
	released := f.dropHolderLocked(r.LockName, r.LeaseId)
	return &pb.ReleaseLockResponse{Lock: f.lockLocked(r.LockName), Released: released}, nil
}

func (f *lockFake) GetLock(ctx context.Context, r *pb.GetLockRequest) (*pb.GetLockResponse, error) {
	f.record(ctx, r)
	f.mu.Lock()
	defer f.mu.Unlock()
	return &pb.GetLockResponse{Lock: f.lockLocked(r.LockName)}, nil
}

func (f *lockFake) ListLocks(ctx context.Context, r *pb.ListLocksRequest) (*pb.ListLocksResponse, error) {
	f.record(ctx, r)
	f.mu.Lock()
	defer f.mu.Unlock()
	out := &pb.ListLocksResponse{}
	for name := range f.locks {
		if r.Prefix == "" || name == r.Prefix || strings.HasPrefix(name, r.Prefix+"/") {
			out.Locks = append(out.Locks, f.lockLocked(name))
		}
	}
	sort.Slice(out.Locks, func(i, j int) bool { return out.Locks[i].Name < out.Locks[j].Name })
	return out, nil
}

func (f *lockFake) DeleteLock(ctx context.Context, r *pb.DeleteLockRequest) (*pb.DeleteLockResponse, error) {
	f.record(ctx, r)
	f.mu.Lock()
	defer f.mu.Unlock()
	_, existed := f.locks[r.LockName]
	delete(f.locks, r.LockName)
	return &pb.DeleteLockResponse{Existed: existed}, nil
}

func (f *lockFake) ListLockWaiters(ctx context.Context, r *pb.ListLockWaitersRequest) (*pb.ListLockWaitersResponse, error) {
	f.record(ctx, r)
	return &pb.ListLockWaitersResponse{Waiters: []*pb.LockWaiter{
		{LeaseId: "ll_a", ProcessId: "worker-a", Exclusive: true, Upgrade: true, Position: 1, WaitingSince: seedCreated, Deadline: seedExpires},
		{LeaseId: "ll_b", ProcessId: "worker-b", Position: 2, WaitingSince: seedCreated, Deadline: seedExpires},
	}}, nil
}

func (f *lockFake) WatchLock(r *pb.WatchLockRequest, st grpc.ServerStreamingServer[pb.WatchLockResponse]) error {
	f.mu.Lock()
	l := f.lockLocked(r.LockName)
	f.mu.Unlock()
	return st.Send(&pb.WatchLockResponse{RaftIndex: 9, Initial: true, Lock: l, Changes: 1, WaitersCount: 1,
		Waiters: []*pb.LockWaiter{{LeaseId: "ll_b", ProcessId: "worker-b", Position: 1}}})
}

func TestLockCommandsAgainstFake(t *testing.T) {
	f, addr := startLockFake(t)
	env := map[string]string{"GRACKLE_ENDPOINTS": addr}
	const goneLease = "ll_gone00000000000000000000" // never created

	var lease, other string
	t.Run("lock lease create -o json", func(t *testing.T) {
		r := runCLI(t, env, "lock", "lease", "create", "jobs", "--process-id", "host-1/pid-2", "--ttl", "60", "--metadata", "owner=billing", "-o", "json")
		wantOK(t, r)
		var out map[string]map[string]any
		if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
			t.Fatalf("%v: %s", err, r.stdout)
		}
		lease, _ = out["lease"]["lease_id"].(string)
		if !strings.HasPrefix(lease, "ll_") || out["lease"]["ttl_seconds"] != float64(60) {
			t.Fatalf("json: %s", r.stdout)
		}
		req, _ := f.last()
		if want := (&pb.CreateLockLeaseRequest{NamespaceName: "jobs", ProcessId: "host-1/pid-2", TtlSeconds: 60, Metadata: map[string]string{"owner": "billing"}}); !proto.Equal(req, want) {
			t.Errorf("request %v, want %v", req, want)
		}
		r = runCLI(t, env, "lock", "lease", "create", "jobs", "--process-id", "other", "-o", "id")
		wantOK(t, r)
		other = strings.TrimSpace(r.stdout)
	})

	t.Run("lock lease get and refresh", func(t *testing.T) {
		r := runCLI(t, env, "lock", "lease", "get", "jobs", lease)
		wantOK(t, r)
		if !strings.Contains(r.stdout, "Lease ID:    "+lease+"\n") || !strings.Contains(r.stdout, "Metadata:    owner=billing\n") {
			t.Errorf("table:\n%s", r.stdout)
		}
		r = runCLI(t, env, "lock", "lease", "refresh", "jobs", lease, "-o", "id")
		wantOK(t, r)
		req, _ := f.last()
		if want := (&pb.RefreshLockLeaseRequest{NamespaceName: "jobs", LeaseId: lease, TtlSeconds: 60}); !proto.Equal(req, want) {
			t.Errorf("request %v, want %v", req, want)
		}
		if r.stdout != lease+"\n" {
			t.Errorf("id: %q", r.stdout)
		}
		r = runCLI(t, env, "lock", "lease", "refresh", "jobs", goneLease)
		if r.code != exitLeaseLost || r.stderr != "grackle: lock lease refresh: lock lease "+goneLease+" not found; the lease is lost\n" {
			t.Errorf("gone: code %d stderr %q", r.code, r.stderr)
		}
	})

	t.Run("acquire exclusive", func(t *testing.T) {
		r := runCLI(t, env, "lock", "acquire", "jobs", "orders/eu", "--lease", lease, "--wait", "60", "--metadata", "job=7", "-o", "id")
		wantOK(t, r)
		if r.stdout != "101\n" {
			t.Errorf("id: %q", r.stdout)
		}
		req, left := f.last()
		want := &pb.AcquireLockRequest{NamespaceName: "jobs", LockName: "orders/eu", LeaseId: lease, Exclusive: true,
			TimeoutSeconds: 60, Metadata: map[string]string{"job": "7"}}
		if !proto.Equal(req, want) {
			t.Errorf("request %v, want %v", req, want)
		}
		if left <= 60*time.Second || left > 60*time.Second+defaultTimeout {
			t.Errorf("deadline %v from now, want in (60s, 60s+%v]", left, defaultTimeout)
		}
		// Table: the grant and the lock.
		r = runCLI(t, env, "lock", "acquire", "jobs", "orders/eu", "--lease", lease)
		wantOK(t, r)
		for _, s := range []string{"Outcome:          ACQUIRED\n", "Fencing token:    102\n", "Mode:             exclusive\n",
			"Lock:             orders/eu\n", "State:            EXCLUSIVE_LOCKED\n"} {
			if !strings.Contains(r.stdout, s) {
				t.Errorf("table lacks %q:\n%s", s, r.stdout)
			}
		}
	})

	t.Run("not acquired: exit 3, what blocked it", func(t *testing.T) {
		r := runCLI(t, env, "lock", "acquire", "jobs", "orders/eu", "--lease", other, "--shared", "-o", "json")
		if r.code != exitNotAcquired || !strings.Contains(r.stdout, `"outcome": "ACQUIRE_OUTCOME_UNAVAILABLE"`) ||
			!strings.Contains(r.stdout, `"reason": "CONTENTION_REASON_PEER"`) ||
			r.stderr != "grackle: lock acquire: UNAVAILABLE: \"orders/eu\" not acquired shared at once (held by another lease (orders/eu); --wait 30s waits)\n" {
			t.Errorf("unavailable: code %d stderr %q stdout %s", r.code, r.stderr, r.stdout)
		}
		if req, _ := f.last(); req.(*pb.AcquireLockRequest).Exclusive {
			t.Error("--shared sent exclusive")
		}
		r = runCLI(t, env, "lock", "acquire", "jobs", "orders", "--lease", other, "--wait", "1s")
		if r.code != exitNotAcquired || !strings.HasPrefix(r.stdout, "Outcome:         TIMED_OUT\n") ||
			!strings.Contains(r.stdout, "Blocked by:      a descendant is held\nBlocking locks:  orders/eu\n") ||
			r.stderr != "grackle: lock acquire: TIMED_OUT: \"orders\" not acquired exclusive within 1s (a descendant is held (orders/eu))\n" {
			t.Errorf("timed out: code %d stderr %q stdout %s", r.code, r.stderr, r.stdout)
		}
		r = runCLI(t, env, "lock", "acquire", "jobs", "orders/eu/42", "--lease", other, "-o", "id")
		if r.code != exitNotAcquired || r.stdout != "" || !strings.Contains(r.stderr, "an ancestor is held (orders/eu)") {
			t.Errorf("ancestor: code %d stderr %q stdout %q", r.code, r.stderr, r.stdout)
		}
	})

	t.Run("lost lease: exit 4", func(t *testing.T) {
		r := runCLI(t, env, "lock", "acquire", "jobs", "x", "--lease", goneLease)
		if r.code != exitLeaseLost || r.stderr != "grackle: lock acquire: lock lease "+goneLease+" not found; the lease is lost\n" {
			t.Errorf("code %d stderr %q", r.code, r.stderr)
		}
	})

	t.Run("get, list, waiters, watch", func(t *testing.T) {
		wantOK(t, runCLI(t, env, "lock", "acquire", "jobs", "reports", "--lease", other, "--shared"))
		r := runCLI(t, env, "lock", "get", "jobs", "orders/eu")
		wantOK(t, r)
		if !strings.HasPrefix(r.stdout, "Name:           orders/eu\nState:          EXCLUSIVE_LOCKED\nHolders:        1\n") ||
			!strings.Contains(r.stdout, "LEASE ID") || !strings.Contains(r.stdout, "host-1/pid-2  exclusive  102") {
			t.Errorf("get:\n%s", r.stdout)
		}
		r = runCLI(t, env, "lock", "get", "jobs", "nobody/holds/this", "-o", "template={{.lock.state}} {{len .lock.holders}}")
		wantOK(t, r)
		if r.stdout != "LOCK_STATE_UNLOCKED 0\n" {
			t.Errorf("unheld: %q", r.stdout)
		}
		r = runCLI(t, env, "lock", "list", "jobs", "--prefix", "orders", "-o", "id")
		wantOK(t, r)
		if req, _ := f.last(); !proto.Equal(req, &pb.ListLocksRequest{NamespaceName: "jobs", Prefix: "orders"}) {
			t.Errorf("request %v", req)
		}
		if r.stdout != "orders/eu\n" {
			t.Errorf("list --prefix: %q", r.stdout)
		}
		r = runCLI(t, env, "lock", "list", "jobs", "--prefix", "reports")
		wantOK(t, r)
		if !strings.HasPrefix(r.stdout, "NAME     STATE          HOLDERS  LOCKED") || !strings.Contains(r.stdout, "reports  SHARED_LOCKED  1 ") {
			t.Errorf("list table:\n%s", r.stdout)
		}
		r = runCLI(t, env, "lock", "waiters", "jobs", "orders/eu")
		wantOK(t, r)
		if !strings.Contains(r.stdout, "1         ll_a      worker-a    upgrade") || !strings.Contains(r.stdout, "2         ll_b      worker-b    shared") {
			t.Errorf("waiters:\n%s", r.stdout)
		}
		r = runCLI(t, env, "lock", "watch", "jobs", "orders/eu", "--count", "1")
		wantOK(t, r)
		if r.stdout != "14:55:00.000 index 9 (initial): exclusive by 1 holder [host-1/pid-2#102]; 1 waiting [1:worker-b shared]\n" {
			t.Errorf("watch: %q", r.stdout)
		}
		r = runCLI(t, env, "lock", "watch", "jobs", "orders/eu", "--count", "1", "-o", "json")
		wantOK(t, r)
		var st struct {
			Initial bool `json:"initial"`
			Lock    struct {
				Name  string `json:"name"`
				State string `json:"state"`
			} `json:"lock"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &st); err != nil || strings.Count(r.stdout, "\n") != 1 || !st.Initial ||
			st.Lock.Name != "orders/eu" || st.Lock.State != "LOCK_STATE_EXCLUSIVE_LOCKED" {
			t.Errorf("watch json (%v): %q", err, r.stdout)
		}
	})

	t.Run("completion of lock names", func(t *testing.T) {
		for _, tc := range []struct {
			args       []string
			want, from string
		}{
			{[]string{"lock", "get", "jobs", ""}, "orders/eu reports", ""},
			{[]string{"lock", "acquire", "jobs", "orders/"}, "orders/eu", "orders"},
			{[]string{"lock", "list", "jobs", "--prefix", "rep"}, "reports", ""},
			{[]string{"run", "--namespace", "jobs", "--lock", "orders/e"}, "orders/eu", "orders"},
		} {
			if got := strings.Join(completions(t, env, tc.args...), " "); got != tc.want {
				t.Errorf("%q: got %q, want %q", tc.args, got, tc.want)
			}
			// Only the descendants of the typed path are listed.
			if req, _ := f.last(); req.(*pb.ListLocksRequest).Prefix != tc.from {
				t.Errorf("%q: listed under %q, want %q", tc.args, req.(*pb.ListLocksRequest).Prefix, tc.from)
			}
		}
	})

	t.Run("release", func(t *testing.T) {
		r := runCLI(t, env, "lock", "release", "jobs", "orders/eu", "--lease", other)
		wantOK(t, r)
		if !strings.HasSuffix(r.stdout, "lease "+other+" did not hold lock \"orders/eu\": nothing released\n") {
			t.Errorf("not held: %q", r.stdout)
		}
		r = runCLI(t, env, "lock", "release", "jobs", "orders/eu", "--lease", lease, "-o", "template={{.released}} {{.lock.state}}")
		wantOK(t, r)
		if r.stdout != "true LOCK_STATE_UNLOCKED\n" {
			t.Errorf("released: %q", r.stdout)
		}
	})

	t.Run("delete and revoke", func(t *testing.T) {
		r := runCLI(t, env, "lock", "delete", "jobs", "reports")
		wantOK(t, r)
		if r.stdout != "lock \"reports\" in namespace \"jobs\" released by force\n" {
			t.Errorf("delete: %q", r.stdout)
		}
		r = runCLI(t, env, "lock", "delete", "jobs", "reports", "-o", "json")
		wantOK(t, r)
		if r.stdout != "{\n  \"existed\": false\n}\n" {
			t.Errorf("delete again: %q", r.stdout)
		}
		wantOK(t, runCLI(t, env, "lock", "lease", "revoke", "jobs", other))
		r = runCLI(t, env, "lock", "lease", "revoke", "jobs", other)
		wantOK(t, r)
		if r.stdout != "lock lease "+other+" did not exist in namespace \"jobs\" (or had expired)\n" {
			t.Errorf("revoke again: %q", r.stdout)
		}
		r = runCLI(t, env, "lock", "lease", "list", "jobs", "-o", "id")
		wantOK(t, r)
		if r.stdout != lease+"\n" {
			t.Errorf("list: %q", r.stdout)
		}
	})
}

// Bad lock input never reaches the network: one line on stderr, exit 2.
func TestLockUsageErrors(t *testing.T) {
	const ll = "ll_NfKKeiPbP18NFeU3lLGrRWWgDJRB"
	for _, tc := range []struct {
		args   []string
		stderr string
	}{
		{[]string{"lock", "acquire", "ns", "a"},
			"grackle: lock acquire: --lease is required (create one with: grackle lock lease create ns --process-id ...)"},
		{[]string{"lock", "acquire", "ns", "a", "--lease", "ls_NfKK"},
			"grackle: lock acquire: --lease ls_NfKK: a semaphore lease; locks are held under lock leases (ll_...: grackle lock lease create ns --process-id ...)"},
		{[]string{"lock", "acquire", "ns", "a", "--lease", "ll_x"},
			`grackle: lock acquire: --lease ll_x: must be "ll_" followed by 20..61 base62 characters, got "ll_x"`},
		{[]string{"lock", "acquire", "ns", "a", "--lease", ll, "--wait", "-1"},
			"grackle: lock acquire: --wait -1: must not be negative"},
		{[]string{"lock", "acquire", "ns", "a", "--lease", ll, "--metadata", "x"},
			`grackle: lock acquire: --metadata x: want key=value`},
		{[]string{"lock", "acquire", "ns", "a/", "--lease", ll},
			`grackle: lock acquire: LOCK a/: empty path segment at byte 1 (a lock name is segments of [-_0-9a-zA-Z] joined by '/')`},
		{[]string{"lock", "acquire", "ns", "--lease", ll},
			"grackle: lock acquire: want arguments NAMESPACE LOCK, got 1"},
		{[]string{"lock", "release", "ns", "a"},
			"grackle: lock release: --lease is required (create one with: grackle lock lease create ns --process-id ...)"},
		{[]string{"lock", "list", "ns", "--limit", "300"},
			"grackle: lock list: --limit 300: must be 0..250 (0: the server's default, 100)"},
		{[]string{"lock", "list", "ns", "--prefix", "a//b"},
			`grackle: lock list: --prefix a//b: empty path segment at byte 2 (a lock name is segments of [-_0-9a-zA-Z] joined by '/')`},
		{[]string{"lock", "watch", "ns", "a", "--count", "-1"},
			"grackle: lock watch: --count -1: must be 0 (no end) or more"},
		{[]string{"lock", "frobnicate"},
			`grackle: lock: unknown command "frobnicate"; see grackle lock --help`},
		{[]string{"lock", "lease", "frobnicate"},
			`grackle: lock lease: unknown command "frobnicate"; see grackle lock lease --help`},
		{[]string{"lock", "lease", "create", "ns"},
			"grackle: lock lease create: --process-id is required (any label of the caller, e.g. host-123/pid-4567)"},
		{[]string{"lock", "lease", "create", "ns", "--process-id", "p", "--ttl", "0"},
			"grackle: lock lease create: --ttl 0: must be at least 1s"},
		{[]string{"lock", "lease", "get", "ns", "ls_x"},
			"grackle: lock lease get: LEASE_ID ls_x: a semaphore lease (see grackle lease); lock leases start with ll_"},
		{[]string{"lock", "lease", "refresh", "ns", ll, "--ttl", "-5"},
			"grackle: lock lease refresh: --ttl -5: must not be negative"},
		{[]string{"semaphore", "acquire", "ns", "s", "--lease", "ll_x"},
			"grackle: semaphore acquire: --lease ll_x: a lock lease; semaphores are held under semaphore leases (ls_...: grackle lease create)"},
		{[]string{"semaphore", "release", "ns", "s", "--lease", "ll_x"},
			"grackle: semaphore release: --lease ll_x: a lock lease; semaphores are held under semaphore leases (ls_...: grackle lease create)"},
		{[]string{"lease", "refresh", "ns", "ll_x"},
			"grackle: lease refresh: LEASE_ID ll_x: a lock lease (see grackle lock lease); semaphore leases start with ls_"},
		{[]string{"run", "--namespace", "ns", "--", "true"},
			"grackle: run: --namespace and --semaphore (or --lock) are required"},
		{[]string{"run", "--namespace", "ns", "--semaphore", "s", "--lock", "l", "--", "true"},
			"grackle: run: --semaphore and --lock: give one of them, not both"},
		{[]string{"run", "--namespace", "ns", "--lock", "l", "--weight", "2", "--", "true"},
			"grackle: run: --weight is for a semaphore; a lock is held --shared or exclusive"},
		{[]string{"run", "--namespace", "ns", "--semaphore", "s", "--shared", "--", "true"},
			"grackle: run: --shared is for a lock (--lock); a semaphore is held with --weight permits"},
		{[]string{"run", "--namespace", "ns", "--lock", "a//b", "--", "true"},
			"grackle: run: --lock a//b: empty path segment at byte 2 (a lock name is segments of [-_0-9a-zA-Z] joined by '/')"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			args := append(append([]string{}, tc.args[:2]...), append([]string{"--endpoints", "127.0.0.1:1"}, tc.args[2:]...)...)
			if tc.args[0] == "run" {
				args = append([]string{"run", "--endpoints", "127.0.0.1:1"}, tc.args[1:]...)
			}
			r := runCLI(t, nil, args...)
			if r.code != exitUsage || r.stderr != tc.stderr+"\n" || r.stdout != "" {
				t.Fatalf("code %d (want 2)\nstderr %q\n  want %q\nstdout %q", r.code, r.stderr, tc.stderr+"\n", r.stdout)
			}
		})
	}
}

// Every lock RPC has its command.
func TestLockCommandTree(t *testing.T) {
	root := (&app{}).rootCmd()
	for _, path := range []string{
		"lock acquire", "lock release", "lock get", "lock list", "lock delete", "lock waiters", "lock watch",
		"lock lease create", "lock lease get", "lock lease refresh", "lock lease revoke", "lock lease list",
	} {
		cmd, rest, err := root.Find(strings.Fields(path))
		if err != nil || len(rest) != 0 || cmd.CommandPath() != "grackle "+path {
			t.Errorf("%q: found %q rest %q err %v", path, cmd.CommandPath(), rest, err)
		}
	}
	r := runCLI(t, nil, "lock", "acquire", "--help")
	for _, s := range []string{"--lease", "--shared", "--wait duration", "--metadata", "--timeout duration", "-o, --output", "UPGRADE_CONFLICT"} {
		if !strings.Contains(r.stdout, s) {
			t.Errorf("lock acquire --help lacks %q:\n%s", s, r.stdout)
		}
	}
	r = runCLI(t, nil, "run", "--help")
	for _, s := range []string{"--lock string", "--shared", "GRACKLE_LOCK_MODE", "GRACKLE_FENCING_TOKEN"} {
		if !strings.Contains(r.stdout, s) {
			t.Errorf("run --help lacks %q", s)
		}
	}
}

// run --lock against the fake: the command runs holding the lock, with the
// lease, the token, the lock and its mode in its environment, and its exit
// code becomes grackle's; afterwards the lease is revoked. Not acquired:
// exit 3, the command never runs, and the message says what blocked it.
func TestRunLockAgainstFake(t *testing.T) {
	f, addr := startLockFake(t)
	r := runCLI(t, nil, "run", "--endpoints", addr, "--namespace", "jobs", "--lock", "reports/daily", "--shared", "--wait", "0", "--",
		"sh", "-c", `echo "$GRACKLE_LEASE_ID $GRACKLE_FENCING_TOKEN $GRACKLE_NAMESPACE $GRACKLE_LOCK $GRACKLE_LOCK_MODE"; exit 7`)
	if r.code != 7 {
		t.Fatalf("exit %d, want 7; stderr %q", r.code, r.stderr)
	}
	if r.stdout != "ll_fake00000000000000000001 101 jobs reports/daily shared\n" {
		t.Fatalf("child saw %q", r.stdout)
	}
	f.mu.Lock()
	leases, locks := len(f.lockLeases), len(f.locks)
	f.mu.Unlock()
	if leases != 0 || locks != 0 {
		t.Fatalf("after run: %d lock leases, %d locks left", leases, locks)
	}

	// Someone else holds reports exclusively: reports/daily is blocked by
	// an ancestor.
	wantOK(t, runCLI(t, nil, "lock", "lease", "create", "jobs", "--process-id", "other", "--endpoints", addr))
	f.mu.Lock()
	var other string
	for id := range f.lockLeases {
		other = id
	}
	f.mu.Unlock()
	wantOK(t, runCLI(t, nil, "lock", "acquire", "jobs", "reports", "--lease", other, "--endpoints", addr))
	r = runCLI(t, nil, "run", "--endpoints", addr, "--namespace", "jobs", "--lock", "reports/daily", "--wait", "0", "--", "sh", "-c", "echo ran")
	if r.code != exitNotAcquired || strings.Contains(r.stdout, "ran") ||
		r.stderr != "grackle: run: exclusive lock jobs/reports/daily not acquired within 0s (an ancestor is held (reports))\n" {
		t.Fatalf("exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	f.mu.Lock()
	leases = len(f.lockLeases)
	f.mu.Unlock()
	if leases != 1 {
		t.Fatalf("%d lock leases after a run that did not acquire: its lease was not revoked", leases)
	}
}
