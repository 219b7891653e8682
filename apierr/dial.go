package apierr

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"
)

// DialOptions make a client connection mark its own failures: a call (unary,
// or a stream's opening and receives) that fails with Unavailable and no
// reason, and whose request never reached a transport (no connection could
// be made, so gRPC never opened a stream for it), gets reason NotSent; code
// and message stay gRPC's own.
// gRPC reports "connection refused" and "the server closed the stream" with
// the same code; this tells the two apart without reading the message.
func DialOptions() []grpc.DialOption {
	return []grpc.DialOption{grpc.WithStatsHandler(sendTracker{}), grpc.WithChainUnaryInterceptor(markUnsent),
		grpc.WithChainStreamInterceptor(markUnsentStream)}
}

type sentKey struct{}

// sendTracker records, in the call's context, that gRPC opened a stream on
// a transport for it (stats.OutHeader is reported once the stream's
// headers are queued on a live connection; a call that never got a
// connection never sees it).
type sendTracker struct{}

func (sendTracker) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context { return ctx }
func (sendTracker) HandleRPC(ctx context.Context, s stats.RPCStats) {
	if _, ok := s.(*stats.OutHeader); ok {
		if f, ok := ctx.Value(sentKey{}).(*atomic.Bool); ok {
			f.Store(true)
		}
	}
}
func (sendTracker) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context { return ctx }
func (sendTracker) HandleConn(context.Context, stats.ConnStats)                       {}

func markUnsent(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	var sent atomic.Bool
	err := invoker(context.WithValue(ctx, sentKey{}, &sent), method, req, reply, cc, opts...)
	return unsent(err, &sent)
}

func unsent(err error, sent *atomic.Bool) error {
	if err == nil || sent.Load() || ReasonOf(err) != "" || status.Code(err) != codes.Unavailable {
		return err
	}
	return Annotate(err, NotSent, "", Leader{})
}

func markUnsentStream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	sent := new(atomic.Bool)
	s, err := streamer(context.WithValue(ctx, sentKey{}, sent), desc, cc, method, opts...)
	if err != nil {
		return nil, unsent(err, sent)
	}
	return &unsentStream{ClientStream: s, sent: sent}, nil
}

// unsentStream marks a receive's failure on a stream that never reached a
// transport (io.EOF, the stream's normal end, is no status and is left).
type unsentStream struct {
	grpc.ClientStream
	sent *atomic.Bool
}

func (s *unsentStream) RecvMsg(m any) error { return unsent(s.ClientStream.RecvMsg(m), s.sent) }

// dialPrefix is how gRPC (and package net) word a connection that could
// not be made, around the cause: "connection error: desc = "transport:
// Error while dialing: dial tcp 10.0.0.1:7420: connect: connection
// refused"".
var dialPrefix = regexp.MustCompile(`^(connection error: desc = )?"?(transport: )?([Ee]rror while dialing:? )?(dial tcp [^ ]+: )?`)

// HopCause is the cause of a failed call to another node in people's words:
// gRPC's message without its transport wrapping ("connect: connection
// refused", "i/o timeout"), for a message that says which node could not
// be reached.
func HopCause(err error) string {
	msg := status.Convert(err).Message()
	out := strings.TrimSuffix(dialPrefix.ReplaceAllString(msg, ""), `"`)
	if out == "" {
		return msg
	}
	return out
}

// Relayed is err as a node that relayed a call to the leader (on a
// connection with DialOptions) answers it: the leader's own answer as it
// is; a failure of the hop itself (Unavailable, answered by no node) names
// the leader and the cause, with reason NotSent when the hop never carried
// the call and OutcomeUnknown when it may have.
func Relayed(err error, node string, l Leader) error {
	if err == nil || status.Code(err) != codes.Unavailable || Info(err).GetMetadata()[KeyNode] != "" {
		return err
	}
	if ReasonOf(err) == NotSent {
		return New(codes.Unavailable, NotSent, node, l,
			fmt.Sprintf("node %s: could not reach the leader %s at %s: %s", node, l.ID, l.Address, HopCause(err)))
	}
	return New(codes.Unavailable, OutcomeUnknown, node, l,
		fmt.Sprintf("node %s: the connection to the leader %s at %s failed after the call was sent: %s", node, l.ID, l.Address, HopCause(err)))
}
