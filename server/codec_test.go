package server_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
	"github.com/grackle-coord/grackle/server/servertest"
)

// rawCodec sends and receives bytes as they are: what a hostile client
// puts on the wire, not what a protobuf runtime would encode.
type rawCodec struct{}

func (rawCodec) Name() string { return "proto" }
func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.SliceBuffer(*v.(*[]byte))}, nil
}
func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	*v.(*[]byte) = data.Materialize()
	return nil
}

// invokeRaw sends b as the request of a unary method.
func invokeRaw(ctx context.Context, cc *grpc.ClientConn, method string, b []byte) error {
	var out []byte
	return cc.Invoke(ctx, "/grackle.v1."+method, &b, &out, grpc.ForceCodecV2(rawCodec{}))
}

// watchRaw opens a WatchSemaphore stream whose request is b and returns
// its first answer's error.
func watchRaw(ctx context.Context, cc *grpc.ClientConn, b []byte) error {
	s, err := cc.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, "/grackle.v1.GrackleService/WatchSemaphore", grpc.ForceCodecV2(rawCodec{}))
	if err != nil {
		return err
	}
	if err := s.SendMsg(&b); err != nil {
		return err
	}
	if err := s.CloseSend(); err != nil {
		return err
	}
	var out []byte
	return s.RecvMsg(&out)
}

func wireField(b []byte, num protowire.Number, v string) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendBytes(b, []byte(v))
}

// Bytes that are not a request (invalid UTF-8 in a string, a truncated
// varint, a field with the wrong wire type, garbage) answer InvalidArgument
// naming the field, on unary calls and streams, and change nothing: gRPC's
// own codec error would be Internal, naming nothing.
func TestMalformedRequestsNameTheField(t *testing.T) {
	c := servertest.Start(t, 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	api := c.Client(0)
	if _, err := api.CreateNamespace(ctx, &pb.CreateNamespaceRequest{Name: "ns"}); err != nil {
		t.Fatal(err)
	}
	if _, err := api.CreateSemaphore(ctx, &pb.CreateSemaphoreRequest{NamespaceName: "ns", SemaphoreName: "s", Permits: 1}); err != nil {
		t.Fatal(err)
	}
	state := func() string {
		ns, err := api.ListNamespaces(ctx, &pb.ListNamespacesRequest{})
		if err != nil {
			t.Fatal(err)
		}
		sems, err := api.ListSemaphores(ctx, &pb.ListSemaphoresRequest{NamespaceName: "ns"})
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprint(ns.Namespaces, sems.Semaphores)
	}
	before := state()
	ns := wireField(nil, 1, "ns")
	ns = ns[:len(ns):len(ns)]
	cc := c.Conn(0)
	for _, tc := range []struct {
		method string
		b      []byte
		want   string // the message's prefix
	}{
		{"GrackleService/CreateNamespace", wireField(nil, 1, "n\xffs"), "name: must be valid UTF-8"},
		{"GrackleService/GetNamespace", wireField(nil, 1, "\xc3\x28"), "namespace_name: must be valid UTF-8"},
		{"GrackleService/CreateSemaphore", append(protowire.AppendTag(wireField(ns, 2, "t"), 4, protowire.VarintType), 0xff), "permits: malformed protobuf"},
		{"GrackleService/CreateSemaphore", wireField(wireField(ns, 2, "t"), 4, "3"), "permits: malformed protobuf: wire type"},
		{"GrackleService/DeleteNamespace", protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), 1), "namespace_name: malformed protobuf: wire type"},
		{"GrackleService/CreateNamespace", wireField(wireField(nil, 1, "m"), 3, string(wireField(wireField(nil, 1, "k"), 2, "\xff"))), `metadata["k"]: values must be valid UTF-8`},
		{"GrackleService/CreateSemaphoreLease", wireField(ns, 2, "p\xed\xa0\x80"), "process_id: must be valid UTF-8"},
		{"GrackleService/DeleteNamespace", []byte{0xff, 0xff, 0xff}, "request: malformed protobuf"},
		{"ClusterService/RemoveMember", wireField(nil, 1, "\x80"), "node_id: must be valid UTF-8"},
	} {
		err := invokeRaw(ctx, cc, tc.method, tc.b)
		if status.Code(err) != codes.InvalidArgument || !strings.HasPrefix(status.Convert(err).Message(), tc.want) {
			t.Errorf("%s %x: %v, want InvalidArgument %q", tc.method, tc.b, err, tc.want)
		}
	}
	for _, tc := range []struct {
		b    []byte
		want string
	}{
		{wireField(nil, 1, "n\xff"), "namespace_name: must be valid UTF-8"},
		{append(protowire.AppendTag(ns, 2, protowire.BytesType), 0x80), "semaphore_name: malformed protobuf"},
	} {
		err := watchRaw(ctx, cc, tc.b)
		if status.Code(err) != codes.InvalidArgument || !strings.HasPrefix(status.Convert(err).Message(), tc.want) {
			t.Errorf("WatchSemaphore %x: %v, want InvalidArgument %q", tc.b, err, tc.want)
		}
	}
	// Still up, still the same; the same bytes well formed are served.
	if after := state(); after != before {
		t.Fatalf("state changed:\n%s\n%s", before, after)
	}
	good, _ := proto.Marshal(&pb.GetNamespaceRequest{NamespaceName: "ns"})
	if err := invokeRaw(ctx, cc, "GrackleService/GetNamespace", good); err != nil {
		t.Fatalf("a well-formed raw request: %v", err)
	}
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	good, _ = proto.Marshal(&pb.WatchSemaphoreRequest{NamespaceName: "ns", SemaphoreName: "s"})
	if err := watchRaw(wctx, cc, good); err != nil {
		t.Fatalf("a well-formed raw watch: %v", err)
	}
}
