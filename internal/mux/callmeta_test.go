package mux_test

import (
	"context"
	"strings"
	"testing"

	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/grackle-coord/grackle/internal/mux"
	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
)

// connToken is per-RPC credentials: the connection's own metadata, which
// the stream carries once when it opens.
type connToken struct{}

func (connToken) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer conn"}, nil
}
func (connToken) RequireTransportSecurity() bool { return false }

// A call with metadata of its own (a forwarding member's caller's token)
// goes on the stream, and its handler sees the metadata the unary call's
// would: the connection's, then the call's.
func TestCallMetadataGoesOnTheStream(t *testing.T) {
	cc, _ := fakeServerWith(t, newFake(), false, 0, grpc.WithPerRPCCredentials(connToken{}))
	m := mux.NewConn(cc)
	defer m.Close()
	untilStream(t, m, func() error { _, err := list(context.Background(), m, "warm"); return err })

	ctx := metadata.AppendToOutgoingContext(context.Background(),
		"authorization", "Bearer caller", "grackle-forwarded", "1", "x-trace-bin", string([]byte{0, 0xff, 1}))
	unary, err := list(ctx, cc, "md")
	if err != nil {
		t.Fatalf("unary: %v", err)
	}
	before := m.StreamCalls()
	onStream, err := list(ctx, m, "md")
	if err != nil {
		t.Fatalf("stream: %v", err)
	}
	if m.StreamCalls() != before+1 {
		t.Fatal("the call with metadata of its own did not go over the stream")
	}
	if !proto.Equal(unary, onStream) {
		t.Fatalf("the handler saw %v on the stream, %v unary", onStream.Namespaces, unary.Namespaces)
	}
	if got := names(onStream); got != "authorization=Bearer conn,authorization=Bearer caller,grackle-forwarded=1,x-trace-bin=00ff01" {
		t.Fatalf("the handler saw %q", got)
	}
	// The next call without metadata sees only the connection's: one
	// call's metadata never reaches another's.
	plain, err := list(context.Background(), m, "md")
	if err != nil {
		t.Fatal(err)
	}
	if got := names(plain); got != "authorization=Bearer conn" {
		t.Fatalf("a call without metadata of its own saw %q", got)
	}
}

func names(r *pb.ListNamespacesResponse) string {
	var out []string
	for _, n := range r.Namespaces {
		out = append(out, n.Name)
	}
	return strings.Join(out, ",")
}

// A call whose metadata no unary call could carry is refused, naming the
// entry, and not run.
func TestCallMetadataRefused(t *testing.T) {
	f := newFake()
	cc, _ := fakeServer(t, f, false)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, err := pb.NewMuxServiceClient(cc).Calls(ctx)
	if err != nil {
		t.Fatal(err)
	}
	h, err := st.Header()
	if err != nil {
		t.Fatal(err)
	}
	if v := h.Get("grackle-mux-metadata"); len(v) != 1 || v[0] != "1" {
		t.Fatalf("the stream's header says grackle-mux-metadata %q, want 1", v)
	}
	req, _ := proto.Marshal(&pb.ListNamespacesRequest{PaginationToken: "x"})
	many := make([]*pb.MuxMetadata, 33)
	for i := range many {
		many[i] = &pb.MuxMetadata{Key: "k", Values: []string{"v"}}
	}
	for i, tc := range []struct {
		md   []*pb.MuxMetadata
		want string
	}{
		{[]*pb.MuxMetadata{{Key: "grpc-timeout", Values: []string{"1S"}}}, `metadata[0].key: "grpc-timeout" is reserved by gRPC`},
		{[]*pb.MuxMetadata{{Key: "ok", Values: []string{"v"}}, {Key: "Authorization", Values: []string{"v"}}}, `metadata[1].key: "Authorization" has 'A' at 0`},
		{[]*pb.MuxMetadata{{Key: "grackle-mux-batch", Values: []string{"1"}}}, `metadata[0].key: "grackle-mux-batch" is the multiplexed stream's own`},
		{[]*pb.MuxMetadata{{Key: ":path", Values: []string{"/x"}}}, `metadata[0].key: ":path" has ':' at 0`},
		{[]*pb.MuxMetadata{{Key: "a", Values: []string{"line\nbreak"}}}, "metadata[0].values[0]: byte 0x0a at 4"},
		{[]*pb.MuxMetadata{{Key: "a-bin", Values: []string{"v"}}}, `metadata[0].values: key "a-bin" is binary`},
		{[]*pb.MuxMetadata{{Key: "a", BinaryValues: [][]byte{{1}}}}, `metadata[0].binary_values: key "a" is not binary`},
		{many, "metadata: 33 entries; at most 32"},
	} {
		id := uint64(i + 1)
		if err := st.Send(&pb.MuxCall{Id: id, Method: pb.GrackleService_ListNamespaces_FullMethodName, Request: req, Metadata: tc.md}); err != nil {
			t.Fatal(err)
		}
		r, err := st.Recv()
		if err != nil {
			t.Fatal(err)
		}
		raw := new(spb.Status)
		if err := proto.Unmarshal(r.Status, raw); err != nil || r.Id != id {
			t.Fatalf("%d: result %v, %v", i, r, err)
		}
		sp := status.FromProto(raw)
		if sp.Code() != codes.InvalidArgument || !strings.Contains(sp.Message(), tc.want) {
			t.Errorf("%d: %v %q; want InvalidArgument with %q", i, sp.Code(), sp.Message(), tc.want)
		}
	}
	if n := f.served.Load(); n != 0 {
		t.Fatalf("%d refused calls ran", n)
	}
}
