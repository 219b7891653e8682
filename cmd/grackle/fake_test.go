package main

// The client commands against an in-process fake GrackleService and
// ClusterService on 127.0.0.1:0: the whole wire path, no real server.

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/grackle-coord/grackle/apierr"
	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
)

type fakeServer struct {
	pb.UnimplementedGrackleServiceServer
	pb.UnimplementedClusterServiceServer

	addr string // where it listens: the leader it names

	mu         sync.Mutex
	namespaces map[string]*pb.Namespace
	semaphores map[string]*pb.Semaphore // by semaphore name (one namespace is enough here)
	leases     map[string]*pb.SemaphoreLease
	requests   []proto.Message // every request, in order
	deadlines  []time.Duration // time left until each request's deadline
}

func (f *fakeServer) record(ctx context.Context, req proto.Message) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.requests = append(f.requests, proto.Clone(req))
	left := time.Duration(-1)
	if d, ok := ctx.Deadline(); ok {
		left = time.Until(d)
	}
	f.deadlines = append(f.deadlines, left)
}

// last returns the last request and the time its caller left until its deadline.
func (f *fakeServer) last() (proto.Message, time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.requests[len(f.requests)-1], f.deadlines[len(f.deadlines)-1]
}

func (f *fakeServer) CreateNamespace(ctx context.Context, r *pb.CreateNamespaceRequest) (*pb.CreateNamespaceResponse, error) {
	f.record(ctx, r)
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.namespaces[r.Name]; ok {
		return nil, status.Errorf(codes.AlreadyExists, "namespace %q already exists", r.Name)
	}
	ns := &pb.Namespace{Name: r.Name, Description: r.Description, Metadata: r.Metadata, Version: 1, CreatedAt: seedCreated, UpdatedAt: seedCreated}
	f.namespaces[r.Name] = ns
	return &pb.CreateNamespaceResponse{Namespace: ns}, nil
}

func (f *fakeServer) GetNamespace(ctx context.Context, r *pb.GetNamespaceRequest) (*pb.GetNamespaceResponse, error) {
	f.record(ctx, r)
	f.mu.Lock()
	defer f.mu.Unlock()
	ns, ok := f.namespaces[r.NamespaceName]
	if !ok {
		return nil, notFound(apierr.NamespaceNotFound, "namespace %q not found", r.NamespaceName)
	}
	return &pb.GetNamespaceResponse{Namespace: ns}, nil
}

func (f *fakeServer) UpdateNamespace(ctx context.Context, r *pb.UpdateNamespaceRequest) (*pb.UpdateNamespaceResponse, error) {
	f.record(ctx, r)
	f.mu.Lock()
	defer f.mu.Unlock()
	ns, ok := f.namespaces[r.NamespaceName]
	if !ok {
		return nil, notFound(apierr.NamespaceNotFound, "namespace %q not found", r.NamespaceName)
	}
	if r.ExpectedVersion != ns.Version {
		return nil, status.Error(codes.InvalidArgument, "version mismatch")
	}
	ns = &pb.Namespace{Name: ns.Name, Description: r.Description, Metadata: r.Metadata, Version: ns.Version + 1,
		CreatedAt: ns.CreatedAt, UpdatedAt: seedExpires}
	f.namespaces[ns.Name] = ns
	return &pb.UpdateNamespaceResponse{Namespace: ns}, nil
}

func (f *fakeServer) ListNamespaces(ctx context.Context, r *pb.ListNamespacesRequest) (*pb.ListNamespacesResponse, error) {
	f.record(ctx, r)
	// Two fixed pages of one namespace each.
	if r.PaginationToken == "" {
		return &pb.ListNamespacesResponse{Namespaces: []*pb.Namespace{{Name: "alpha", Version: 1, CreatedAt: seedCreated}}, NextPaginationToken: "page2"}, nil
	}
	if r.PaginationToken != "page2" {
		return nil, status.Error(codes.InvalidArgument, "pagination_token: malformed")
	}
	return &pb.ListNamespacesResponse{Namespaces: []*pb.Namespace{{Name: "beta", Version: 2, CreatedAt: seedCreated}}, PreviousPaginationToken: "page1"}, nil
}

func (f *fakeServer) DeleteNamespace(ctx context.Context, r *pb.DeleteNamespaceRequest) (*pb.DeleteNamespaceResponse, error) {
	f.record(ctx, r)
	f.mu.Lock()
	defer f.mu.Unlock()
	_, existed := f.namespaces[r.NamespaceName]
	delete(f.namespaces, r.NamespaceName)
	return &pb.DeleteNamespaceResponse{Existed: existed}, nil
}

func (f *fakeServer) CreateSemaphore(ctx context.Context, r *pb.CreateSemaphoreRequest) (*pb.CreateSemaphoreResponse, error) {
	f.record(ctx, r)
	f.mu.Lock()
	defer f.mu.Unlock()
	s := &pb.Semaphore{Name: r.SemaphoreName, Description: r.Description, Permits: r.Permits, Metadata: r.Metadata,
		Version: 1, CreatedAt: seedCreated, UpdatedAt: seedCreated, LastActivityAt: seedCreated}
	f.semaphores[r.SemaphoreName] = s
	return &pb.CreateSemaphoreResponse{Semaphore: s}, nil
}

// AcquireSemaphore grants while the permits last; otherwise UNAVAILABLE
// for timeout 0 and TIMED_OUT (at once) for a positive timeout.
func (f *fakeServer) AcquireSemaphore(ctx context.Context, r *pb.AcquireSemaphoreRequest) (*pb.AcquireSemaphoreResponse, error) {
	f.record(ctx, r)
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.semaphores[r.SemaphoreName]
	if !ok {
		return nil, notFound(apierr.SemaphoreNotFound, "semaphore %q not found", r.SemaphoreName)
	}
	l, ok := f.leases[r.LeaseId]
	if !ok {
		return nil, notFound(apierr.LeaseNotFound, "lease %q not found", r.LeaseId)
	}
	s = proto.Clone(s).(*pb.Semaphore)
	resp := &pb.AcquireSemaphoreResponse{Semaphore: s}
	switch {
	case s.ActiveHolds+r.Weight <= s.Permits:
		s.ActiveHolds += r.Weight
		s.ActiveHoldersCount++
		resp.Outcome = pb.AcquireOutcome_ACQUIRE_OUTCOME_ACQUIRED
		resp.Holder = &pb.SemaphoreHolder{LeaseId: l.LeaseId, ProcessId: l.ProcessId, Weight: r.Weight, LockedAt: seedCreated,
			ExpiresAt: l.ExpiresAt, FencingToken: 77, Metadata: r.Metadata}
	case r.TimeoutSeconds == 0:
		resp.Outcome = pb.AcquireOutcome_ACQUIRE_OUTCOME_UNAVAILABLE
	default:
		resp.Outcome = pb.AcquireOutcome_ACQUIRE_OUTCOME_TIMED_OUT
	}
	f.semaphores[s.Name] = s
	return resp, nil
}

func (f *fakeServer) CreateSemaphoreLease(ctx context.Context, r *pb.CreateSemaphoreLeaseRequest) (*pb.CreateSemaphoreLeaseResponse, error) {
	f.record(ctx, r)
	f.mu.Lock()
	defer f.mu.Unlock()
	l := &pb.SemaphoreLease{LeaseId: fmt.Sprintf("ls_fake%020d", len(f.leases)+1), ProcessId: r.ProcessId, TtlSeconds: r.TtlSeconds,
		CreatedAt: seedCreated, ExpiresAt: seedCreated + r.TtlSeconds*int64(time.Second)}
	f.leases[l.LeaseId] = l
	return &pb.CreateSemaphoreLeaseResponse{Lease: l}, nil
}

func (f *fakeServer) GetSemaphoreLease(ctx context.Context, r *pb.GetSemaphoreLeaseRequest) (*pb.GetSemaphoreLeaseResponse, error) {
	f.record(ctx, r)
	f.mu.Lock()
	defer f.mu.Unlock()
	l, ok := f.leases[r.LeaseId]
	if !ok {
		return nil, notFound(apierr.LeaseNotFound, "lease %q not found", r.LeaseId)
	}
	return &pb.GetSemaphoreLeaseResponse{Lease: l}, nil
}

func (f *fakeServer) RefreshSemaphoreLease(ctx context.Context, r *pb.RefreshSemaphoreLeaseRequest) (*pb.RefreshSemaphoreLeaseResponse, error) {
	f.record(ctx, r)
	f.mu.Lock()
	defer f.mu.Unlock()
	l, ok := f.leases[r.LeaseId]
	if !ok {
		return nil, notFound(apierr.LeaseNotFound, "lease %q not found", r.LeaseId)
	}
	l = proto.Clone(l).(*pb.SemaphoreLease)
	l.ExpiresAt = testNow.UnixNano() + r.TtlSeconds*int64(time.Second)
	f.leases[l.LeaseId] = l
	return &pb.RefreshSemaphoreLeaseResponse{Lease: l}, nil
}

func (f *fakeServer) GetClusterStatus(ctx context.Context, r *pb.GetClusterStatusRequest) (*pb.GetClusterStatusResponse, error) {
	f.record(ctx, r)
	return &pb.GetClusterStatusResponse{LeaderId: "n1", LeaderAddress: f.addr, Term: 2, CommitIndex: 9, AppliedIndex: 9,
		Members: []*pb.Member{{NodeId: "n1", RaftAddress: "127.0.0.1:7421", GrpcAddress: f.addr, Suffrage: "voter", State: "leader"}}}, nil
}

// notFound is NotFound with its reason, as the real server answers.
func notFound(reason, format string, a ...any) error {
	return apierr.New(codes.NotFound, reason, "n1", apierr.Leader{}, fmt.Sprintf(format, a...))
}

// startFake serves a fresh fake on 127.0.0.1:0 and returns it with its address.
func startFake(t *testing.T) (*fakeServer, string) {
	t.Helper()
	f := &fakeServer{namespaces: map[string]*pb.Namespace{}, semaphores: map[string]*pb.Semaphore{}, leases: map[string]*pb.SemaphoreLease{}}
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

// closedAddr is a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	return addr
}

func wantOK(t *testing.T, r cliResult) {
	t.Helper()
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("code %d, stderr %q, stdout:\n%s", r.code, r.stderr, r.stdout)
	}
}

func TestClientAgainstFake(t *testing.T) {
	f, addr := startFake(t)
	env := map[string]string{"GRACKLE_ENDPOINTS": addr}

	t.Run("namespace create sends flags and prints a table", func(t *testing.T) {
		r := runCLI(t, env, "namespace", "create", "third_parties", "--description", "Partner APIs",
			"--metadata", "team=payments", "--metadata", "env=prod")
		wantOK(t, r)
		req, _ := f.last()
		want := &pb.CreateNamespaceRequest{Name: "third_parties", Description: "Partner APIs",
			Metadata: map[string]string{"team": "payments", "env": "prod"}}
		if !proto.Equal(req, want) {
			t.Errorf("request %v, want %v", req, want)
		}
		if !strings.Contains(r.stdout, "Name:         third_parties\n") ||
			!strings.Contains(r.stdout, "Metadata:     env=prod, team=payments\n") ||
			!strings.Contains(r.stdout, "Created:      2023-09-27T14:50:39Z (4m20s ago)\n") {
			t.Errorf("table:\n%s", r.stdout)
		}
	})

	t.Run("AlreadyExists is one line, exit 1", func(t *testing.T) {
		r := runCLI(t, env, "namespace", "create", "third_parties")
		if r.code != exitCallFailed || r.stderr != "grackle: namespace create: namespace \"third_parties\" already exists\n" || r.stdout != "" {
			t.Fatalf("code %d stderr %q stdout %q", r.code, r.stderr, r.stdout)
		}
	})

	t.Run("NotFound", func(t *testing.T) {
		r := runCLI(t, env, "namespace", "get", "x")
		if r.code != exitCallFailed || r.stderr != "grackle: namespace get: namespace \"x\" not found\n" {
			t.Fatalf("code %d stderr %q", r.code, r.stderr)
		}
	})

	t.Run("namespace update keeps what is not given", func(t *testing.T) {
		r := runCLI(t, env, "namespace", "update", "third_parties", "--description", "EU partners", "-o", "json")
		wantOK(t, r)
		req, _ := f.last()
		want := &pb.UpdateNamespaceRequest{NamespaceName: "third_parties", Description: "EU partners",
			Metadata: map[string]string{"team": "payments", "env": "prod"}, ExpectedVersion: 1}
		if !proto.Equal(req, want) {
			t.Errorf("request %v, want %v", req, want)
		}
		var out struct {
			Namespace struct {
				Description string `json:"description"`
				Version     int64  `json:"version"`
			} `json:"namespace"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &out); err != nil || out.Namespace.Version != 2 || out.Namespace.Description != "EU partners" {
			t.Errorf("json %v: %s", err, r.stdout)
		}

		r = runCLI(t, env, "namespace", "update", "third_parties", "--clear-metadata", "--expected-version", "1")
		if r.code != exitUsage || r.stderr != "grackle: namespace update: version mismatch\n" {
			t.Fatalf("stale version: code %d stderr %q", r.code, r.stderr)
		}
	})

	t.Run("list prints the next page token", func(t *testing.T) {
		r := runCLI(t, env, "namespace", "list", "--limit", "1")
		wantOK(t, r)
		if !strings.HasPrefix(r.stdout, "NAME   VERSION") || !strings.HasSuffix(r.stdout, "\nnext page: --page-token page2\n") {
			t.Errorf("page 1:\n%s", r.stdout)
		}
		if req, _ := f.last(); !proto.Equal(req, &pb.ListNamespacesRequest{Limit: 1}) {
			t.Errorf("request %v", req)
		}
		r = runCLI(t, env, "namespace", "list", "--page-token", "page2", "-o", "id")
		wantOK(t, r)
		if r.stdout != "beta\n" {
			t.Errorf("page 2: %q", r.stdout)
		}
		r = runCLI(t, env, "namespace", "list", "--page-token", "junk")
		if r.code != exitUsage || r.stderr != "grackle: namespace list: pagination_token: malformed\n" {
			t.Errorf("junk token: code %d stderr %q", r.code, r.stderr)
		}
	})

	var lease string
	t.Run("lease create -o json | jq -r .lease.lease_id", func(t *testing.T) {
		r := runCLI(t, env, "lease", "create", "third_parties", "--process-id", "host-123/pid-4567", "--ttl", "60", "-o", "json")
		wantOK(t, r)
		var out map[string]map[string]any
		if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
			t.Fatalf("%v: %s", err, r.stdout)
		}
		lease, _ = out["lease"]["lease_id"].(string)
		if !strings.HasPrefix(lease, "ls_") || out["lease"]["process_id"] != "host-123/pid-4567" || out["lease"]["ttl_seconds"] != float64(60) {
			t.Fatalf("json: %s", r.stdout)
		}
	})

	t.Run("lease refresh defaults to the lease's ttl", func(t *testing.T) {
		r := runCLI(t, env, "lease", "refresh", "third_parties", lease, "-o", "id")
		wantOK(t, r)
		req, _ := f.last()
		if want := (&pb.RefreshSemaphoreLeaseRequest{NamespaceName: "third_parties", LeaseId: lease, TtlSeconds: 60}); !proto.Equal(req, want) {
			t.Errorf("request %v, want %v", req, want)
		}
		if r.stdout != lease+"\n" {
			t.Errorf("id: %q", r.stdout)
		}
	})

	t.Run("acquire", func(t *testing.T) {
		wantOK(t, runCLI(t, env, "semaphore", "create", "third_parties", "partner_1", "--permits", "5"))

		// Acquired: exit 0, the fencing token with -o id, and a deadline
		// beyond the server-side wait.
		r := runCLI(t, env, "semaphore", "acquire", "third_parties", "partner_1", "--lease", lease,
			"--weight", "3", "--wait", "60", "--metadata", "job=7", "-o", "id")
		wantOK(t, r)
		if r.stdout != "77\n" {
			t.Errorf("id: %q", r.stdout)
		}
		req, left := f.last()
		want := &pb.AcquireSemaphoreRequest{NamespaceName: "third_parties", SemaphoreName: "partner_1", LeaseId: lease,
			Weight: 3, TimeoutSeconds: 60, Metadata: map[string]string{"job": "7"}}
		if !proto.Equal(req, want) {
			t.Errorf("request %v, want %v", req, want)
		}
		if left <= 60*time.Second || left > 60*time.Second+defaultTimeout {
			t.Errorf("deadline %v from now, want in (60s, 60s+%v]", left, defaultTimeout)
		}

		// UNAVAILABLE: response still printed, exit 3, one line on stderr.
		r = runCLI(t, env, "semaphore", "acquire", "third_parties", "partner_1", "--lease", lease, "--weight", "3", "-o", "json")
		if r.code != exitNotAcquired || !strings.Contains(r.stdout, `"outcome": "ACQUIRE_OUTCOME_UNAVAILABLE"`) ||
			r.stderr != "grackle: semaphore acquire: UNAVAILABLE: \"partner_1\" not acquired at once (3 of 5 permits held by 1 holder(s), wanted 3; --wait 30s waits)\n" {
			t.Errorf("unavailable: code %d stderr %q stdout %s", r.code, r.stderr, r.stdout)
		}

		// TIMED_OUT.
		r = runCLI(t, env, "semaphore", "acquire", "third_parties", "partner_1", "--lease", lease, "--weight", "3", "--wait", "1s")
		if r.code != exitNotAcquired || !strings.HasPrefix(r.stdout, "Outcome:       TIMED_OUT\n") ||
			r.stderr != "grackle: semaphore acquire: TIMED_OUT: \"partner_1\" not acquired within 1s (3 of 5 permits held by 1 holder(s), wanted 3)\n" {
			t.Errorf("timed out: code %d stderr %q stdout %s", r.code, r.stderr, r.stdout)
		}

		// A plain call's deadline is --timeout.
		wantOK(t, runCLI(t, env, "lease", "get", "third_parties", lease, "--timeout", "3s"))
		if _, left := f.last(); left <= 0 || left > 3*time.Second {
			t.Errorf("lease get deadline %v from now, want (0, 3s]", left)
		}
	})

	t.Run("unimplemented RPC", func(t *testing.T) {
		r := runCLI(t, env, "semaphore", "holders", "third_parties", "partner_1")
		if r.code != exitCallFailed || r.stderr != "grackle: semaphore holders: method ListSemaphoreHolders not implemented\n" {
			t.Errorf("code %d stderr %q", r.code, r.stderr)
		}
	})

	t.Run("delete", func(t *testing.T) {
		r := runCLI(t, env, "namespace", "delete", "third_parties")
		wantOK(t, r)
		if r.stdout != "namespace \"third_parties\" deleted\n" {
			t.Errorf("table: %q", r.stdout)
		}
		// Deleting again: says it did not exist, exit 0.
		r = runCLI(t, env, "namespace", "delete", "third_parties")
		wantOK(t, r)
		if r.stdout != "namespace \"third_parties\" did not exist\n" {
			t.Errorf("table: %q", r.stdout)
		}
		r = runCLI(t, env, "namespace", "delete", "third_parties", "-o", "json")
		wantOK(t, r)
		if r.stdout != "{\n  \"existed\": false\n}\n" {
			t.Errorf("json: %q", r.stdout)
		}
	})

	t.Run("cluster status over ClusterService", func(t *testing.T) {
		r := runCLI(t, env, "cluster", "status")
		wantOK(t, r)
		if !strings.HasPrefix(r.stdout, "Leader:         n1 ("+addr+")\n") || !strings.Contains(r.stdout, "n1       voter     leader") {
			t.Errorf("table:\n%s", r.stdout)
		}
	})
}

func TestEndpointsTriedInOrder(t *testing.T) {
	f, addr := startFake(t)
	dead := closedAddr(t)

	// The flag beats the environment; the dead endpoint is skipped.
	r := runCLI(t, map[string]string{"GRACKLE_ENDPOINTS": dead}, "cluster", "status", "-o", "id", "--endpoints", dead+","+addr)
	wantOK(t, r)
	if r.stdout != "n1\n" {
		t.Errorf("stdout %q", r.stdout)
	}
	if req, _ := f.last(); !proto.Equal(req, &pb.GetClusterStatusRequest{ProbeMembers: true}) {
		t.Errorf("request %v", req)
	}

	// Nothing reachable: Unavailable naming each endpoint, exit 1.
	r = runCLI(t, nil, "cluster", "status", "--endpoints", dead+", "+dead, "--timeout", "1s")
	want := fmt.Sprintf("grackle: cluster status: no endpoint of [%s %s] answered within 1s (last error: connect: connection refused); is a node running there? check --endpoints or GRACKLE_ENDPOINTS\n", dead, dead)
	if r.code != exitCallFailed || r.stderr != want {
		t.Errorf("code %d stderr %q", r.code, r.stderr)
	}
}
