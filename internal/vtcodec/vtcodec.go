// Package vtcodec encodes and decodes protobuf messages with the
// reflection-free methods that vtprotobuf generates beside each message
// (proto/**/*_vtproto.pb.go, `make proto`), and falls back to the protobuf
// runtime for a message without them.
//
// The runtime walks a message through reflection tables: on a write it is
// a tenth or more of every process's CPU (the leader encodes responses and
// log entries and decodes each command it applies; followers decode each
// command; clients encode requests and decode responses). The generated
// methods do the same work as straight-line code.
//
// The generated code differs from the runtime in what it checks, and that
// decides where this package is used:
//
//   - Neither its encoder nor its decoder checks that a string field holds
//     valid UTF-8. So it encodes only what the program knows to be valid
//     (answers built from the state machine, whose every string went
//     through fsm.Encode, which uses the runtime and refuses an invalid
//     one; packed entries, which hold bytes), and decodes only bytes this
//     program's own code produced or a peer it trusts sent (a server's
//     answers to a client, the leader's log entries). A client's request
//     is encoded (package mux) and decoded (package reqcodec) by the
//     runtime, so a malformed string fails as it always did.
//   - Its decoder has no nesting limit (the runtime stops at 10,000
//     levels), and a message that can contain itself, however deeply,
//     would recurse until the stack is exhausted, a fatal error no
//     recover catches. So Unmarshal and Codec.Unmarshal decode a message
//     whose type can reach a cycle (MuxCall, MuxResult: a batch of
//     themselves) with the runtime instead (see cyclic).
//   - It refuses a known field sent with another wire type, which the
//     runtime would keep as an unknown field; the encoders never write one.
package vtcodec

import (
	"fmt"
	"sync"

	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// vtMessage is what vtprotobuf generates for a message (features marshal,
// unmarshal, size).
type vtMessage interface {
	SizeVT() int
	MarshalToSizedBufferVT(dAtA []byte) (int, error)
	UnmarshalVT(dAtA []byte) error
}

// Marshal encodes m. The generated encoder writes map entries in Go's map
// order, so a message with a map may encode differently each time (as the
// runtime's default encoding may); one without maps always encodes the
// same (fields in number order).
func Marshal(m proto.Message) ([]byte, error) {
	vt, ok := m.(vtMessage)
	if !ok {
		return proto.Marshal(m)
	}
	b := make([]byte, vt.SizeVT())
	n, err := vt.MarshalToSizedBufferVT(b)
	if err != nil {
		return nil, err
	}
	return b[len(b)-n:], nil
}

// Size is the encoded size of m.
func Size(m proto.Message) int {
	if vt, ok := m.(vtMessage); ok {
		return vt.SizeVT()
	}
	return proto.Size(m)
}

// Unmarshal decodes b into m, which it first resets. Only for trusted
// bytes: see the package comment.
func Unmarshal(b []byte, m proto.Message) error {
	vt, ok := m.(vtMessage)
	if !ok || cyclic(m) {
		return proto.Unmarshal(b, m)
	}
	proto.Reset(m)
	return vt.UnmarshalVT(b)
}

// cyclicTypes caches cyclic's answer per message type.
var cyclicTypes sync.Map // protoreflect.FullName -> bool

// cyclic reports whether m's type can contain, at any depth, a message of
// a type it has already passed through: then the generated decoder's
// recursion has no bound but the input's nesting.
func cyclic(m proto.Message) bool {
	md := m.ProtoReflect().Descriptor()
	if v, ok := cyclicTypes.Load(md.FullName()); ok {
		return v.(bool)
	}
	c := reachesCycle(md, map[protoreflect.FullName]bool{}, map[protoreflect.FullName]bool{})
	cyclicTypes.Store(md.FullName(), c)
	return c
}

// reachesCycle is a depth-first walk of the message types md's fields can
// hold: onPath are the types on the way from the root, done those already
// known to reach no cycle.
func reachesCycle(md protoreflect.MessageDescriptor, onPath, done map[protoreflect.FullName]bool) bool {
	name := md.FullName()
	if onPath[name] {
		return true
	}
	if done[name] {
		return false
	}
	onPath[name] = true
	fields := md.Fields()
	for i := range fields.Len() {
		f := fields.Get(i)
		sub := f.Message()
		if f.IsMap() {
			sub = f.MapValue().Message()
		}
		if sub != nil && reachesCycle(sub, onPath, done) {
			return true
		}
	}
	delete(onPath, name)
	done[name] = true
	return false
}

// Codec is a gRPC codec (content-subtype "proto", wire-compatible with
// the standard one) that uses the generated methods. Its Unmarshal is for
// trusted peers only (see the package comment): a client may use it for
// the answers of its server, a server only for what it sends.
type Codec struct{}

var _ encoding.CodecV2 = Codec{}

// Name is the content-subtype of the standard protobuf codec.
func (Codec) Name() string { return grpcproto.Name }

// Marshal encodes v into a buffer from gRPC's pool when it is large
// enough to be worth pooling, as the standard codec does.
func (Codec) Marshal(v any) (mem.BufferSlice, error) {
	vt, ok := v.(vtMessage)
	if !ok {
		return std().Marshal(v)
	}
	size := vt.SizeVT()
	if mem.IsBelowBufferPoolingThreshold(size) {
		b := make([]byte, size)
		n, err := vt.MarshalToSizedBufferVT(b)
		if err != nil {
			return nil, err
		}
		return mem.BufferSlice{mem.SliceBuffer(b[size-n:])}, nil
	}
	pool := mem.DefaultBufferPool()
	buf := pool.Get(size)
	n, err := vt.MarshalToSizedBufferVT(*buf)
	if err != nil {
		pool.Put(buf)
		return nil, err
	}
	if n != size {
		pool.Put(buf)
		return nil, fmt.Errorf("vtcodec: %T encoded to %d bytes, its size said %d", v, n, size)
	}
	return mem.BufferSlice{mem.NewBuffer(buf, pool)}, nil
}

// Unmarshal decodes data into v (a trusted peer's message) as Unmarshal
// does: a type that can reach a cycle with the runtime.
func (Codec) Unmarshal(data mem.BufferSlice, v any) error {
	m, ok := v.(proto.Message)
	if !ok {
		return std().Unmarshal(data, v)
	}
	if len(data) == 1 {
		return Unmarshal(data[0].ReadOnlyData(), m)
	}
	buf := data.MaterializeToBuffer(mem.DefaultBufferPool())
	defer buf.Free()
	return Unmarshal(buf.ReadOnlyData(), m)
}

// std is gRPC's registered protobuf codec, for messages without the
// generated methods.
func std() encoding.CodecV2 { return encoding.GetCodecV2(grpcproto.Name) }
