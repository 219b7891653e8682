package vtcodec

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	fsmpb "github.com/grackle-coord/grackle/proto/grackle/fsm/v1"
	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
)

// samples are messages with every shape the API uses: nested messages,
// maps, repeated fields, enums, a oneof (the FSM command), unknown fields.
func samples() []proto.Message {
	meta := map[string]string{}
	for i := range 20 {
		meta[fmt.Sprintf("k%02d", i)] = strings.Repeat("v", i)
	}
	sem := &pb.Semaphore{Name: "s", Description: "d", Permits: 20, ActiveHolds: 5, Metadata: meta, Version: 3, CreatedAt: -1}
	list := &pb.ListSemaphoresResponse{NextPaginationToken: "n"}
	for range 200 { // large enough for gRPC's pooled buffers
		list.Semaphores = append(list.Semaphores, sem)
	}
	withUnknown := &pb.GetSemaphoreResponse{Semaphore: sem}
	withUnknown.ProtoReflect().SetUnknown([]byte{0xf8, 0x3e, 0x07}) // field 999, varint 7
	return []proto.Message{
		&pb.AcquireSemaphoreResponse{Semaphore: sem, Outcome: pb.AcquireOutcome_ACQUIRE_OUTCOME_ACQUIRED,
			Holder: &pb.SemaphoreHolder{LeaseId: "l", Weight: 5, FencingToken: 1 << 60, Metadata: meta}},
		list,
		withUnknown,
		&pb.MuxCall{Id: 7, Method: "/m", Request: []byte{1, 2, 3}, Batch: []*pb.MuxCall{{Id: 8, Cancel: true}}},
		&fsmpb.Command{Now: 42, Op: &fsmpb.Command_Batch{Batch: &fsmpb.Batch{Commands: [][]byte{{1}, {}, {2, 3}}}}},
		&pb.AcquireSemaphoreResponse{}, // empty: zero bytes
	}
}

// The generated code and the protobuf runtime read each other's bytes.
func TestWireCompatibleWithTheRuntime(t *testing.T) {
	for _, m := range samples() {
		t.Run(fmt.Sprintf("%T", m), func(t *testing.T) {
			ours, err := Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			if len(ours) != Size(m) || Size(m) != proto.Size(m) {
				t.Fatalf("sizes: encoded %d, Size %d, runtime %d", len(ours), Size(m), proto.Size(m))
			}
			back := m.ProtoReflect().New().Interface()
			if err := proto.Unmarshal(ours, back); err != nil || !proto.Equal(back, m) {
				t.Fatalf("the runtime reads our bytes as %v (%v)", back, err)
			}
			theirs, err := proto.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			back = m.ProtoReflect().New().Interface()
			proto.Merge(back, m) // Unmarshal must reset what is there
			if err := Unmarshal(theirs, back); err != nil || !proto.Equal(back, m) {
				t.Fatalf("we read the runtime's bytes as %v (%v)", back, err)
			}
		})
	}
}

// Without maps, the generated encoder writes what the runtime's
// deterministic encoding does, byte for byte.
func TestMarshalWithoutMapsIsTheRuntimes(t *testing.T) {
	for _, m := range []proto.Message{
		&pb.MuxCall{Id: 7, Method: "/m", Request: []byte{1, 2, 3}, TimeoutMicros: 9, Batch: []*pb.MuxCall{{Id: 8, Cancel: true}}},
		&fsmpb.Command{Now: 42, Op: &fsmpb.Command_Batch{Batch: &fsmpb.Batch{Commands: [][]byte{{1}, {}, {2, 3}}}}},
	} {
		ours, err := Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		theirs, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
		if err != nil || !bytes.Equal(ours, theirs) {
			t.Fatalf("%T: %x, the runtime %x (%v)", m, ours, theirs, err)
		}
	}
}

// The gRPC codec: pooled and unpooled buffers, split input, and messages
// without generated methods (the runtime's).
func TestCodec(t *testing.T) {
	c := Codec{}
	msgs := append(samples(), wrapperspb.String("no generated methods"))
	for _, m := range msgs {
		t.Run(fmt.Sprintf("%T", m), func(t *testing.T) {
			bs, err := c.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			data := bs.Materialize()
			bs.Free()
			want, _ := proto.Marshal(m)
			back := m.ProtoReflect().New().Interface()
			if err := proto.Unmarshal(data, back); err != nil || !proto.Equal(back, m) || len(data) != len(want) {
				t.Fatalf("the runtime reads the codec's bytes as %v (%v)", back, err)
			}
			// Split in two buffers, as gRPC hands over a message that spans frames.
			half := len(data) / 2
			split := mem.BufferSlice{mem.SliceBuffer(data[:half]), mem.SliceBuffer(data[half:])}
			for _, in := range []mem.BufferSlice{{mem.SliceBuffer(data)}, split} {
				back := m.ProtoReflect().New().Interface()
				if err := c.Unmarshal(in, back); err != nil || !proto.Equal(back, m) {
					t.Fatalf("the codec reads its bytes as %v (%v)", back, err)
				}
			}
		})
	}
}

// Bytes that do not decode are an error, not a panic or a partial success.
func TestUnmarshalRejectsGarbage(t *testing.T) {
	good, _ := Marshal(samples()[0])
	for name, b := range map[string][]byte{
		"truncated": good[:len(good)-1],
		"garbage":   {0xff, 0xff, 0xff, 0xff},
		"bad wire":  {0x0f},
	} {
		if err := Unmarshal(b, &pb.AcquireSemaphoreResponse{}); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
}

// A message whose type can contain itself is decoded by the runtime, whose
// nesting limit refuses what would exhaust the generated decoder's stack;
// the API's answers and the state machine's commands cannot, and keep the
// generated decoder.
func TestCyclicTypesUseTheRuntime(t *testing.T) {
	for m, want := range map[proto.Message]bool{
		&pb.MuxResult{}:                false,
		&pb.MuxCall{}:                  false,
		&pb.AcquireSemaphoreResponse{}: true,
		&pb.ListSemaphoresResponse{}:   true,
		&fsmpb.Command{}:               true,
	} {
		if got := !cyclic(m); got != want {
			t.Errorf("%T: generated decoder %v, want %v", m, got, want)
		}
	}
	// MuxResult{batch: [MuxResult{batch: [...]}]}, 200,000 levels deep
	// (about 1 MB): the generated decoder would recurse 200,000 frames.
	const depth = 200_000
	lens := make([]int, depth+1) // lens[k]: bytes of the message k levels up from the innermost
	for k := 1; k <= depth; k++ {
		lens[k] = 1 + protowire.SizeVarint(uint64(lens[k-1])) + lens[k-1]
	}
	deep := make([]byte, 0, lens[depth])
	for k := depth; k >= 1; k-- {
		deep = protowire.AppendTag(deep, 7, protowire.BytesType)
		deep = protowire.AppendVarint(deep, uint64(lens[k-1]))
	}
	if err := Unmarshal(deep, &pb.MuxResult{}); err == nil {
		t.Error("Unmarshal decoded a message nested 200,000 deep")
	}
	if err := (Codec{}).Unmarshal(mem.BufferSlice{mem.SliceBuffer(deep)}, &pb.MuxResult{}); err == nil {
		t.Error("Codec.Unmarshal decoded a message nested 200,000 deep")
	}
}

// What the decoders return does not share memory with their input (gRPC
// reuses its buffers once Unmarshal returns).
func TestDecodedMessagesOwnTheirBytes(t *testing.T) {
	for _, m := range samples() {
		data, err := Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		a, b := m.ProtoReflect().New().Interface(), m.ProtoReflect().New().Interface()
		in := append([]byte(nil), data...)
		if err := Unmarshal(in, a); err != nil {
			t.Fatal(err)
		}
		in2 := append([]byte(nil), data...)
		if err := (Codec{}).Unmarshal(mem.BufferSlice{mem.SliceBuffer(in2)}, b); err != nil {
			t.Fatal(err)
		}
		for i := range in {
			in[i], in2[i] = 0xff, 0xff
		}
		if !proto.Equal(a, m) || !proto.Equal(b, m) {
			t.Fatalf("%T changed with the buffer it was decoded from", m)
		}
	}
}

// BenchmarkAnswer: encoding and decoding an acquire's answer (as the
// leader sends it for every acquire, and the client reads it), with the
// generated code and with the runtime.
func BenchmarkAnswer(b *testing.B) {
	m := &pb.AcquireSemaphoreResponse{
		Semaphore: &pb.Semaphore{Name: "sem-000123", Permits: 10, ActiveHolds: 1, ActiveHoldersCount: 1, Version: 7,
			CreatedAt: 1764633600000, UpdatedAt: 1764633600500, LastActivityAt: 1764633600500},
		Outcome: pb.AcquireOutcome_ACQUIRE_OUTCOME_ACQUIRED,
		Holder: &pb.SemaphoreHolder{LeaseId: "0123456789abcdef0123456789abcdef", ProcessId: "worker-17", Weight: 1,
			LockedAt: 1764633600500, ExpiresAt: 1764633660500, FencingToken: 42},
	}
	data, _ := proto.Marshal(m)
	b.Run("encode/generated", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := Marshal(m); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encode/runtime", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := proto.Marshal(m); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decode/generated", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := Unmarshal(data, &pb.AcquireSemaphoreResponse{}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decode/runtime", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := proto.Unmarshal(data, &pb.AcquireSemaphoreResponse{}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
