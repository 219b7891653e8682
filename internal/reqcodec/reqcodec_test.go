package reqcodec

import (
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
)

// field appends one length-delimited field.
func field(b []byte, num protowire.Number, v []byte) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendBytes(b, v)
}

func entry(k, v string) []byte { return field(field(nil, 1, []byte(k)), 2, []byte(v)) }

func TestCheckNamesTheField(t *testing.T) {
	ok := field(nil, 1, []byte("ns"))
	ok = ok[:len(ok):len(ok)] // each case appends to its own copy
	for _, tc := range []struct {
		name string
		msg  proto.Message
		b    []byte
		want string // the message's prefix
	}{
		{"invalid UTF-8", &pb.GetNamespaceRequest{}, field(nil, 1, []byte("n\xffs")), "namespace_name: must be valid UTF-8"},
		{"invalid UTF-8 after a good field", &pb.CreateSemaphoreLeaseRequest{}, field(ok, 2, []byte("\xc0")), "process_id: must be valid UTF-8"},
		{"truncated varint", &pb.CreateSemaphoreRequest{}, append(protowire.AppendTag(ok, 4, protowire.VarintType), 0x80), "permits: malformed protobuf: unexpected EOF"},
		{"truncated length", &pb.GetNamespaceRequest{}, []byte{0x0a, 0x05, 'a'}, "namespace_name: malformed protobuf: unexpected EOF"},
		{"bad tag", &pb.GetNamespaceRequest{}, []byte{0x80}, "request: malformed protobuf:"},
		{"field number 0", &pb.GetNamespaceRequest{}, []byte{0x00, 0x01}, "request: malformed protobuf:"},
		{"wrong wire type", &pb.GetNamespaceRequest{}, protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), 7), "namespace_name: malformed protobuf: wire type varint"},
		{"wrong wire type, int field", &pb.CreateSemaphoreRequest{}, field(ok, 4, []byte("x")), "permits: malformed protobuf: wire type length-delimited"},
		{"map key", &pb.CreateNamespaceRequest{}, field(ok, 3, entry("k\xff", "v")), "metadata: keys must be valid UTF-8"},
		{"map value", &pb.CreateNamespaceRequest{}, field(ok, 3, entry("k", "v\xff")), `metadata["k"]: values must be valid UTF-8`},
		{"nested wrong wire type", &pb.CreateNamespaceResponse{}, field(nil, 1, protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), 1)), "namespace.name: malformed protobuf: wire type varint"},
		{"nested invalid UTF-8", &pb.CreateNamespaceResponse{}, field(nil, 1, field(nil, 2, []byte("\xff"))), "namespace.description: must be valid UTF-8"},
		{"unknown field truncated", &pb.GetNamespaceRequest{}, []byte{0x4a, 0x09}, "request: field 9: malformed protobuf: unexpected EOF"},
	} {
		err := Check(tc.msg, tc.b)
		if status.Code(err) != codes.InvalidArgument || !strings.HasPrefix(status.Convert(err).Message(), tc.want) {
			t.Errorf("%s: %v, want InvalidArgument %q", tc.name, err, tc.want)
		}
	}
	// What decodes is untouched, unknown fields of a newer schema included.
	for _, b := range [][]byte{ok, field(ok, 9, []byte("newer")), protowire.AppendVarint(protowire.AppendTag(ok, 10, protowire.VarintType), 1), nil} {
		m := &pb.GetNamespaceRequest{}
		if err := Check(m, b); err != nil {
			t.Errorf("%x: %v", b, err)
		}
	}
}

// The codec records the failure for the interceptor instead of failing
// (gRPC would turn its error into Internal), and leaves the message empty.
func TestCodecDefersTheError(t *testing.T) {
	c := New()
	m := &pb.GetNamespaceRequest{}
	data := mem.BufferSlice{mem.SliceBuffer(append(field(nil, 1, []byte("ns")), field(nil, 1, []byte("\xff"))...))}
	if err := c.Unmarshal(data, m); err != nil {
		t.Fatalf("Unmarshal: %v", err)
	}
	if m.NamespaceName != "" {
		t.Fatalf("a refused request kept %q", m.NamespaceName)
	}
	if err := c.take(&pb.GetNamespaceRequest{}); err != nil {
		t.Fatalf("another message: %v", err)
	}
	if err := c.take(m); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("take: %v", err)
	}
	if err := c.take(m); err != nil || c.pending.Load() != 0 {
		t.Fatalf("taken twice: %v (pending %d)", err, c.pending.Load())
	}
	good := &pb.GetNamespaceRequest{}
	if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(field(nil, 1, []byte("ns")))}, good); err != nil || good.NamespaceName != "ns" || c.pending.Load() != 0 {
		t.Fatalf("a good request: %v %v", good, err)
	}
}

func BenchmarkUnmarshal(b *testing.B) {
	c := New()
	raw, _ := proto.Marshal(&pb.AcquireSemaphoreRequest{NamespaceName: "ns", SemaphoreName: "sem", LeaseId: "ls_0123456789abcdefghij", Weight: 1, TimeoutSeconds: 5})
	b.ReportAllocs()
	for b.Loop() {
		m := &pb.AcquireSemaphoreRequest{}
		if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(raw)}, m); err != nil {
			b.Fatal(err)
		}
	}
}

// The standard codec, for comparison with BenchmarkUnmarshal.
func BenchmarkUnmarshalStandard(b *testing.B) {
	c := New().base
	raw, _ := proto.Marshal(&pb.AcquireSemaphoreRequest{NamespaceName: "ns", SemaphoreName: "sem", LeaseId: "ls_0123456789abcdefghij", Weight: 1, TimeoutSeconds: 5})
	b.ReportAllocs()
	for b.Loop() {
		m := &pb.AcquireSemaphoreRequest{}
		if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(raw)}, m); err != nil {
			b.Fatal(err)
		}
	}
}
