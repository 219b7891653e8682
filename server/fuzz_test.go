package server_test

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
	"github.com/grackle-coord/grackle/server"
	"github.com/grackle-coord/grackle/server/servertest"
)

// fuzzCall is one request type of the API, sent through a real node's
// gRPC handler path (interceptors, validation, then the state machine).
type fuzzCall struct {
	method string // GrackleService's
	req    func() proto.Message
	call   func(ctx context.Context, g pb.GrackleServiceClient, m proto.Message) error
}

func fuzzCalls() []fuzzCall {
	return []fuzzCall{
		{"CreateNamespace", func() proto.Message { return &pb.CreateNamespaceRequest{} }, func(ctx context.Context, g pb.GrackleServiceClient, m proto.Message) error {
			_, err := g.CreateNamespace(ctx, m.(*pb.CreateNamespaceRequest))
			return err
		}},
		{"UpdateNamespace", func() proto.Message { return &pb.UpdateNamespaceRequest{} }, func(ctx context.Context, g pb.GrackleServiceClient, m proto.Message) error {
			_, err := g.UpdateNamespace(ctx, m.(*pb.UpdateNamespaceRequest))
			return err
		}},
		{"DeleteNamespace", func() proto.Message { return &pb.DeleteNamespaceRequest{} }, func(ctx context.Context, g pb.GrackleServiceClient, m proto.Message) error {
			_, err := g.DeleteNamespace(ctx, m.(*pb.DeleteNamespaceRequest))
			return err
		}},
		{"ListNamespaces", func() proto.Message { return &pb.ListNamespacesRequest{} }, func(ctx context.Context, g pb.GrackleServiceClient, m proto.Message) error {
			_, err := g.ListNamespaces(ctx, m.(*pb.ListNamespacesRequest))
			return err
		}},
		{"CreateSemaphore", func() proto.Message { return &pb.CreateSemaphoreRequest{} }, func(ctx context.Context, g pb.GrackleServiceClient, m proto.Message) error {
			_, err := g.CreateSemaphore(ctx, m.(*pb.CreateSemaphoreRequest))
			return err
		}},
		{"UpdateSemaphore", func() proto.Message { return &pb.UpdateSemaphoreRequest{} }, func(ctx context.Context, g pb.GrackleServiceClient, m proto.Message) error {
			_, err := g.UpdateSemaphore(ctx, m.(*pb.UpdateSemaphoreRequest))
			return err
		}},
		{"ListSemaphores", func() proto.Message { return &pb.ListSemaphoresRequest{} }, func(ctx context.Context, g pb.GrackleServiceClient, m proto.Message) error {
			_, err := g.ListSemaphores(ctx, m.(*pb.ListSemaphoresRequest))
			return err
		}},
		{"CreateSemaphoreLease", func() proto.Message { return &pb.CreateSemaphoreLeaseRequest{} }, func(ctx context.Context, g pb.GrackleServiceClient, m proto.Message) error {
			_, err := g.CreateSemaphoreLease(ctx, m.(*pb.CreateSemaphoreLeaseRequest))
			return err
		}},
		{"RefreshSemaphoreLease", func() proto.Message { return &pb.RefreshSemaphoreLeaseRequest{} }, func(ctx context.Context, g pb.GrackleServiceClient, m proto.Message) error {
			_, err := g.RefreshSemaphoreLease(ctx, m.(*pb.RefreshSemaphoreLeaseRequest))
			return err
		}},
		{"ListSemaphoreLeases", func() proto.Message { return &pb.ListSemaphoreLeasesRequest{} }, func(ctx context.Context, g pb.GrackleServiceClient, m proto.Message) error {
			_, err := g.ListSemaphoreLeases(ctx, m.(*pb.ListSemaphoreLeasesRequest))
			return err
		}},
		{"AcquireSemaphore", func() proto.Message { return &pb.AcquireSemaphoreRequest{} }, func(ctx context.Context, g pb.GrackleServiceClient, m proto.Message) error {
			r := m.(*pb.AcquireSemaphoreRequest)
			if r.TimeoutSeconds > 1 {
				r.TimeoutSeconds = 1 // keep each execution short
			}
			_, err := g.AcquireSemaphore(ctx, r)
			return err
		}},
		{"ReleaseSemaphore", func() proto.Message { return &pb.ReleaseSemaphoreRequest{} }, func(ctx context.Context, g pb.GrackleServiceClient, m proto.Message) error {
			_, err := g.ReleaseSemaphore(ctx, m.(*pb.ReleaseSemaphoreRequest))
			return err
		}},
		{"ListSemaphoreHolders", func() proto.Message { return &pb.ListSemaphoreHoldersRequest{} }, func(ctx context.Context, g pb.GrackleServiceClient, m proto.Message) error {
			_, err := g.ListSemaphoreHolders(ctx, m.(*pb.ListSemaphoreHoldersRequest))
			return err
		}},
		{"CreateLockLease", func() proto.Message { return &pb.CreateLockLeaseRequest{} }, func(ctx context.Context, g pb.GrackleServiceClient, m proto.Message) error {
			_, err := g.CreateLockLease(ctx, m.(*pb.CreateLockLeaseRequest))
			return err
		}},
		{"AcquireLock", func() proto.Message { return &pb.AcquireLockRequest{} }, func(ctx context.Context, g pb.GrackleServiceClient, m proto.Message) error {
			r := m.(*pb.AcquireLockRequest)
			if r.TimeoutSeconds > 1 {
				r.TimeoutSeconds = 1 // keep each execution short
			}
			_, err := g.AcquireLock(ctx, r)
			return err
		}},
		{"ReleaseLock", func() proto.Message { return &pb.ReleaseLockRequest{} }, func(ctx context.Context, g pb.GrackleServiceClient, m proto.Message) error {
			_, err := g.ReleaseLock(ctx, m.(*pb.ReleaseLockRequest))
			return err
		}},
		{"GetLock", func() proto.Message { return &pb.GetLockRequest{} }, func(ctx context.Context, g pb.GrackleServiceClient, m proto.Message) error {
			_, err := g.GetLock(ctx, m.(*pb.GetLockRequest))
			return err
		}},
		{"ListLocks", func() proto.Message { return &pb.ListLocksRequest{} }, func(ctx context.Context, g pb.GrackleServiceClient, m proto.Message) error {
			_, err := g.ListLocks(ctx, m.(*pb.ListLocksRequest))
			return err
		}},
		{"DeleteLock", func() proto.Message { return &pb.DeleteLockRequest{} }, func(ctx context.Context, g pb.GrackleServiceClient, m proto.Message) error {
			_, err := g.DeleteLock(ctx, m.(*pb.DeleteLockRequest))
			return err
		}},
		{"RefreshLockLease", func() proto.Message { return &pb.RefreshLockLeaseRequest{} }, func(ctx context.Context, g pb.GrackleServiceClient, m proto.Message) error {
			_, err := g.RefreshLockLease(ctx, m.(*pb.RefreshLockLeaseRequest))
			return err
		}},
		{"ListLockLeases", func() proto.Message { return &pb.ListLockLeasesRequest{} }, func(ctx context.Context, g pb.GrackleServiceClient, m proto.Message) error {
			_, err := g.ListLockLeases(ctx, m.(*pb.ListLockLeasesRequest))
			return err
		}},
	}
}

// invalidNamesField: an InvalidArgument message starts with the field.
var invalidNamesField = regexp.MustCompile(`^[a-z_]+(\.[a-z_]+|\[[^\]]*\])*: `)

// FuzzHandlers sends fuzzed requests of every GrackleService request type
// through one node's gRPC handler path: no panic, no broken invariant,
// only the contract's codes, and every InvalidArgument names its field.
// Bytes that do not decode are sent raw, through the server's codec.
// make fuzz-api runs it; go test runs the seeds.
func FuzzHandlers(f *testing.F) {
	calls := fuzzCalls()
	seed := func(kind int, m proto.Message) {
		b, _ := proto.Marshal(m)
		f.Add(uint8(kind), b)
	}
	seed(0, &pb.CreateNamespaceRequest{Name: "ns", Description: "d", Metadata: map[string]string{"k": "v"}})
	seed(4, &pb.CreateSemaphoreRequest{NamespaceName: "ns", SemaphoreName: "s", Permits: 3})
	seed(7, &pb.CreateSemaphoreLeaseRequest{NamespaceName: "ns", ProcessId: "p\u2028", TtlSeconds: 30})
	seed(10, &pb.AcquireSemaphoreRequest{NamespaceName: "ns", SemaphoreName: "s", LeaseId: "ls_x", Weight: -1})
	seed(1, &pb.UpdateNamespaceRequest{NamespaceName: "ns", ExpectedVersion: -5})
	seed(6, &pb.ListSemaphoresRequest{NamespaceName: "ns", Limit: 100000, PaginationToken: "\xff"})
	seed(13, &pb.CreateLockLeaseRequest{NamespaceName: "ns", ProcessId: "p", TtlSeconds: 30, Metadata: map[string]string{"k": "v"}})
	seed(14, &pb.AcquireLockRequest{NamespaceName: "ns", LockName: "a//b", LeaseId: "ll_x", Exclusive: true})
	seed(14, &pb.AcquireLockRequest{NamespaceName: "ns", LockName: "a/b", LeaseId: "ls_aaaaaaaaaaaaaaaaaaaa", TimeoutSeconds: 301})
	seed(15, &pb.ReleaseLockRequest{NamespaceName: "ns", LockName: "/a", LeaseId: "ll_aaaaaaaaaaaaaaaaaaaa"})
	seed(17, &pb.ListLocksRequest{NamespaceName: "ns", Prefix: "a/", Limit: 251})
	seed(18, &pb.DeleteLockRequest{NamespaceName: "ns", LockName: "a/b/c"})
	// Bytes no protobuf runtime would send: invalid UTF-8, a truncated
	// varint, a string field sent as a varint, a bad tag.
	f.Add(uint8(0), []byte{0x0a, 0x02, 'n', 0xff})
	f.Add(uint8(4), []byte{0x0a, 0x02, 'n', 's', 0x20, 0x80})
	f.Add(uint8(2), []byte{0x08, 0x01})
	f.Add(uint8(9), []byte{0xff, 0xff})
	cfg := servertest.Config(f, "fuzz")
	cfg.LogLevel = "error"
	node, err := server.Start(cfg, nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { node.Close() })
	conn, err := grpc.NewClient(node.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { conn.Close() })
	// A leader whose API is ready (its term's setup done), not only raft's
	// state: else the first executions answer Unavailable.
	servertest.Eventually(f, "a ready leader", 20*time.Second, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err := pb.NewGrackleServiceClient(conn).ListNamespaces(ctx, &pb.ListNamespacesRequest{})
		return node.IsLeader() && err == nil
	})
	f.Fuzz(func(t *testing.T, kind uint8, data []byte) {
		c := calls[int(kind)%len(calls)]
		m := c.req()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		var err error
		if proto.Unmarshal(data, m) != nil {
			// Not a request: the bytes go as they are, through the
			// server's codec, and must be refused naming a field.
			err = invokeRaw(ctx, conn, "GrackleService/"+c.method, data)
			if st := status.Convert(err); st.Code() != codes.InvalidArgument || !invalidNamesField.MatchString(st.Message()) {
				t.Fatalf("%s with undecodable bytes %x: %v, want InvalidArgument naming the field", c.method, data, err)
			}
		} else {
			err = c.call(ctx, pb.NewGrackleServiceClient(conn), m)
		}
		st := status.Convert(err)
		switch st.Code() {
		case codes.OK, codes.NotFound, codes.AlreadyExists, codes.FailedPrecondition, codes.ResourceExhausted,
			codes.Aborted, codes.DeadlineExceeded:
		case codes.InvalidArgument:
			// docs/API.md fixes two messages that are about state, not one
			// field: "version mismatch" and "weight exceeds semaphore permits".
			if msg := st.Message(); !invalidNamesField.MatchString(msg) && !strings.HasPrefix(msg, "version mismatch") &&
				!strings.HasPrefix(msg, "weight exceeds semaphore permits") {
				t.Fatalf("%T %v: InvalidArgument %q does not start with the field's name", m, m, st.Message())
			}
		default:
			t.Fatalf("%T %v: %v (outside the contract's codes)", m, m, err)
		}
		if err := node.FSM.CheckInvariants(); err != nil {
			t.Fatalf("after %T %v: invariants: %v", m, m, err)
		}
	})
}
