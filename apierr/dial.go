package apierr

import (
	"context"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"
)

// DialOptions make a client connection mark its own failures: a unary call
// that fails with Unavailable and no reason, and whose request never
// reached a transport (no connection could be made, so gRPC never opened a
// stream for it), gets reason NotSent; code and message stay gRPC's own.
// gRPC reports "connection refused" and "the server closed the stream" with
// the same code; this tells the two apart without reading the message.
func DialOptions() []grpc.DialOption {
	return []grpc.DialOption{grpc.WithStatsHandler(sendTracker{}), grpc.WithChainUnaryInterceptor(markUnsent)}
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
	if err == nil || sent.Load() || ReasonOf(err) != "" || status.Code(err) != codes.Unavailable {
		return err
	}
	return Annotate(err, NotSent, "", Leader{})
}
