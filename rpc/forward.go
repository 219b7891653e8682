package rpc

import (
	"context"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/grackle-coord/grackle/apierr"
	"github.com/grackle-coord/grackle/leader"
)

// forwarding sends a call this node cannot serve to the leader; the
// handlers see nothing else of it.
type forwarding interface {
	// forward runs call on a connection to the leader. Its error is the
	// leader's (a status, passed on unchanged with its ErrorInfo), or a
	// *leader.Error saying why the hop failed: NotLeader (no leader to
	// forward to, or the call was already forwarded once), NotSent (the
	// leader's connection never carried it), OutcomeUnknown (the hop broke
	// after the request was written).
	forward(ctx context.Context, call func(context.Context, grpc.ClientConnInterface) error) error
	close()
}

const forwardedKey = "grackle-forwarded"

// authorizationKey carries the caller's access token (package acl).
const authorizationKey = "authorization"

// forwarder keeps one connection per leader address. The leader's
// response headers (the Raft index) and trailers (the leader's address)
// are relayed to the original caller, and so are its errors with their
// detail: a forwarded call answers exactly as the leader would.
type forwarder struct {
	leaderInfo func() (id, addr string)
	self       string
	dialOpts   []grpc.DialOption

	mu      sync.Mutex
	conns   map[string]*grpc.ClientConn
	retired map[*grpc.ClientConn]*time.Timer // replaced, closed later
	dials   int                              // connections made (tests)
}

// retireAfter is how long a replaced connection stays open for the calls
// still running on it (a blocking acquire waits up to the server's
// --max-timeout): closing it at once would cancel them mid-flight, and a
// cancelled write's outcome is unknown to its caller.
const retireAfter = 10 * time.Minute

var _ forwarding = (*forwarder)(nil)

// newForwarder: extra dial options come last, so they may override the
// plaintext default (peer TLS).
func newForwarder(self string, leaderInfo func() (string, string), extra []grpc.DialOption) *forwarder {
	opts := append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithUnaryInterceptor(relayMetadata)},
		apierr.DialOptions()...)
	opts = append(opts, extra...)
	return &forwarder{leaderInfo: leaderInfo, self: self, dialOpts: opts, conns: map[string]*grpc.ClientConn{},
		retired: map[*grpc.ClientConn]*time.Timer{}}
}

// forwardAttempts bounds the tries of one forwarded call. Only a hop that
// certainly did not carry the request is tried again, and the last try
// dials afresh: a kept connection may sit in reconnect backoff after the
// leader restarted, while a new one connects at once.
const forwardAttempts = 2

func (f *forwarder) forward(ctx context.Context, call func(context.Context, grpc.ClientConnInterface) error) error {
	if md, ok := metadata.FromIncomingContext(ctx); ok && len(md.Get(forwardedKey)) > 0 {
		// Never forward twice: the sender thought we lead; let it retry.
		return &leader.Error{Code: codes.Unavailable, Reason: apierr.NotLeader, Msg: "not the leader"}
	}
	id, addr := f.leaderInfo()
	if id == "" || addr == "" || id == f.self {
		return &leader.Error{Code: codes.Unavailable, Reason: apierr.NotLeader, Msg: "not the leader"}
	}
	out := metadata.AppendToOutgoingContext(ctx, forwardedKey, "1")
	// The caller's token goes with the call: the leader decides (never an
	// identity of this node's own).
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		for _, v := range md.Get(authorizationKey) {
			out = metadata.AppendToOutgoingContext(out, authorizationKey, v)
		}
	}
	var err error
	for attempt := 1; attempt <= forwardAttempts; attempt++ {
		var cc *grpc.ClientConn
		cc, err = f.conn(addr, attempt == forwardAttempts)
		if err != nil {
			return &leader.Error{Code: codes.Unavailable, Reason: apierr.NotSent, Msg: "cannot reach the leader: " + err.Error()}
		}
		err = call(out, cc)
		if err == nil {
			return nil
		}
		info := apierr.Info(err)
		switch {
		case info != nil && info.GetMetadata()[apierr.KeyNode] != "":
			return err // the leader's own answer
		case info.GetReason() == apierr.NotSent && ctx.Err() == nil:
			continue // never carried: safe to try again
		case info.GetReason() == apierr.NotSent:
			return &leader.Error{Code: status.Code(err), Reason: apierr.NotSent, Msg: "forwarding to the leader: " + status.Convert(err).Message()}
		case status.Code(err) == codes.Unavailable, status.Code(err) == codes.Canceled && ctx.Err() == nil:
			// Canceled while the caller still waits: the connection was
			// closed under the call (this node stopping), after it was sent.
			return &leader.Error{Code: codes.Unavailable, Reason: apierr.OutcomeUnknown,
				Msg: "the connection to the leader failed after the request was sent: " + status.Convert(err).Message()}
		}
		return err
	}
	return &leader.Error{Code: codes.Unavailable, Reason: apierr.NotSent, Msg: "cannot reach the leader: " + status.Convert(err).Message()}
}

// conn returns the kept connection to addr, or (fresh) a new one that
// replaces it.
func (f *forwarder) conn(addr string, fresh bool) (*grpc.ClientConn, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if c, ok := f.conns[addr]; ok {
		if !fresh {
			return c, nil
		}
		delete(f.conns, addr)
		old := c
		f.retired[old] = time.AfterFunc(retireAfter, func() {
			f.mu.Lock()
			delete(f.retired, old)
			f.mu.Unlock()
			old.Close()
		})
	}
	c, err := grpc.NewClient(addr, f.dialOpts...)
	if err != nil {
		return nil, err
	}
	f.dials++
	f.conns[addr] = c
	return c, nil
}

func (f *forwarder) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.conns {
		c.Close()
	}
	f.conns = map[string]*grpc.ClientConn{}
	for c, t := range f.retired {
		t.Stop()
		c.Close()
	}
	f.retired = map[*grpc.ClientConn]*time.Timer{}
}

// relayMetadata hands the leader's response headers and trailers back to
// the original caller: ctx derives from this follower's incoming call, so
// SetHeader and SetTrailer reach it. A forwarding follower therefore
// relays both the Raft index header and the leader-address trailer (and
// the leader's errors carry the leader in their ErrorInfo anyway).
func relayMetadata(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	var hdr, trl metadata.MD
	err := invoker(ctx, method, req, reply, cc, append(opts, grpc.Header(&hdr), grpc.Trailer(&trl))...)
	if len(hdr) > 0 {
		_ = grpc.SetHeader(ctx, hdr)
	}
	if len(trl) > 0 {
		_ = grpc.SetTrailer(ctx, trl)
	}
	return err
}
