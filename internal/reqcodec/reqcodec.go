// Package reqcodec is the server's gRPC codec: requests are decoded by the
// protobuf runtime (which checks what a client may get wrong), except that
// a request which does not decode is answered InvalidArgument naming the
// field, as any other bad input is; responses are encoded by the generated
// code of package vtcodec, wire-compatible with the runtime's.
//
// gRPC turns any error of a codec's Unmarshal into Internal ("failed to
// unmarshal the received message") before an interceptor runs, so the
// codec cannot answer by itself. Instead its Unmarshal records the
// request's error against the message it was decoding into and reports
// success; the interceptors of this package, which run before any other
// code reads the request, take the error back and answer with it. The
// codec must therefore always be installed together with both
// interceptors (ServerOption, UnaryInterceptor, StreamInterceptor): a
// server with the codec and without them would serve undecodable requests.
package reqcodec

import (
	"context"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/protoadapt"

	"github.com/grackle-coord/grackle/internal/vtcodec"
)

// Codec decodes requests; see the package comment.
type Codec struct {
	base encoding.CodecV2
	// failed maps the message a request was decoded into to the
	// InvalidArgument status of its failure. Entries live from the codec's
	// Unmarshal to the interceptor on the same goroutine: the map holds
	// the pointer, so no other message can take its address meanwhile.
	failed  sync.Map
	pending atomic.Int64 // entries in failed: the interceptors' fast path
}

// New returns a codec that wraps gRPC's registered protobuf codec.
func New() *Codec {
	return &Codec{base: encoding.GetCodecV2(grpcproto.Name)}
}

// Name is the content-subtype it serves ("proto").
func (c *Codec) Name() string { return grpcproto.Name }

// ServerOption installs c as the server's codec for every call.
func (c *Codec) ServerOption() grpc.ServerOption { return grpc.ForceServerCodecV2(c) }

// Marshal encodes a response with the generated encoder (package vtcodec),
// wire-compatible with the standard codec's.
func (c *Codec) Marshal(v any) (mem.BufferSlice, error) { return vtcodec.Codec{}.Marshal(v) }

// Unmarshal decodes a request into v. A request that does not decode, or
// that carries a known field with the wrong wire type (which the protobuf
// runtime would keep as an unknown field and otherwise ignore), leaves v
// empty and its InvalidArgument status recorded for the interceptors.
func (c *Codec) Unmarshal(data mem.BufferSlice, v any) error {
	m := messageOf(v)
	if m == nil {
		return c.base.Unmarshal(data, v)
	}
	buf := data.MaterializeToBuffer(mem.DefaultBufferPool())
	defer buf.Free()
	b := buf.ReadOnlyData()
	err := Check(m, b)
	if err == nil {
		return nil
	}
	proto.Reset(m)
	c.failed.Store(v, err)
	c.pending.Add(1)
	return nil
}

// take returns (and forgets) the decoding error recorded for m.
func (c *Codec) take(m any) error {
	if c.pending.Load() == 0 {
		return nil
	}
	e, ok := c.failed.LoadAndDelete(m)
	if !ok {
		return nil
	}
	c.pending.Add(-1)
	return e.(error)
}

// UnaryInterceptor answers a unary call whose request did not decode. It
// must run before any interceptor that reads the request.
func (c *Codec) UnaryInterceptor() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if err := c.take(req); err != nil {
			return nil, err
		}
		return handler(ctx, req)
	}
}

// StreamInterceptor makes a stream's RecvMsg fail with the decoding error
// of the message it received. It must wrap the stream before any
// interceptor that reads the messages.
func (c *Codec) StreamInterceptor() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		return handler(srv, &stream{ServerStream: ss, c: c})
	}
}

type stream struct {
	grpc.ServerStream
	c *Codec
}

func (s *stream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	return s.c.take(m)
}

// Check decodes b into m; on failure it returns the InvalidArgument status
// naming the field at fault, and m may hold part of b.
func Check(m proto.Message, b []byte) error {
	err := proto.Unmarshal(b, m)
	if err == nil {
		if !hasUnknown(m.ProtoReflect()) {
			return nil
		}
		// Unknown fields are kept for compatibility with newer clients;
		// but a known field sent with another wire type is not a newer
		// field, it is a malformed one.
		if e := locate(m.ProtoReflect().Descriptor(), b, "", 0); e != nil {
			return status.Error(codes.InvalidArgument, e.Error())
		}
		return nil
	}
	if e := locate(m.ProtoReflect().Descriptor(), b, "", 0); e != nil {
		return status.Error(codes.InvalidArgument, e.Error())
	}
	return status.Errorf(codes.InvalidArgument, "request: malformed protobuf: %v", err)
}

func messageOf(v any) proto.Message {
	switch v := v.(type) {
	case protoadapt.MessageV2:
		return v
	case protoadapt.MessageV1:
		return protoadapt.MessageV2Of(v)
	}
	return nil
}
