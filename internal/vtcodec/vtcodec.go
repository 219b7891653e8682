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
// One difference decides where this package may be used: the generated
// decoder does not check that string fields hold valid UTF-8, as the
// runtime's does. So Unmarshal and Codec.Unmarshal are for bytes this
// program's own code produced or that a peer it trusts sent (a server's
// responses to a client, the leader's log entries, whose strings all
// came from requests the runtime decoded or from the leader itself);
// requests from clients keep being decoded by the runtime (package
// reqcodec), which refuses a malformed string field.
package vtcodec

import (
	"fmt"

	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
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
	if !ok {
		return proto.Unmarshal(b, m)
	}
	proto.Reset(m)
	return vt.UnmarshalVT(b)
}

// Codec is a gRPC codec (content-subtype "proto", wire-compatible with
// the standard one) that uses the generated methods. Its Unmarshal is for
// trusted peers only (see the package comment): a client may use it for
// every call, a server only for what it sends.
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

// Unmarshal decodes data into v (a trusted peer's message).
func (Codec) Unmarshal(data mem.BufferSlice, v any) error {
	vt, ok := v.(vtMessage)
	if !ok {
		return std().Unmarshal(data, v)
	}
	if m, ok := v.(proto.Message); ok {
		proto.Reset(m)
	}
	if len(data) == 1 {
		return vt.UnmarshalVT(data[0].ReadOnlyData())
	}
	buf := data.MaterializeToBuffer(mem.DefaultBufferPool())
	defer buf.Free()
	return vt.UnmarshalVT(buf.ReadOnlyData())
}

// std is gRPC's registered protobuf codec, for messages without the
// generated methods.
func std() encoding.CodecV2 { return encoding.GetCodecV2(grpcproto.Name) }
