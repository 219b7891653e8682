package rpc

import (
	"context"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/grackle-coord/grackle/apierr"
	"github.com/grackle-coord/grackle/internal/peerconn"
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
	// askLeader is forward for a call of this node's own that carries no
	// caller (a read index): without the caller's token or the forwarded
	// mark, on the connection's multiplexed stream.
	askLeader(ctx context.Context, call func(context.Context, grpc.ClientConnInterface) error) error
	close()
}

// forwarder sends calls to the leader on the node's connections to its
// peers (package peerconn). The leader's response headers (the Raft index)
// and trailers (the leader's address) are relayed to the original caller,
// and so are its errors with their detail: a forwarded call answers
// exactly as the leader would.
type forwarder struct {
	leaderInfo func() (id, addr string)
	self       string
	peers      *peerconn.Cache
	ownPeers   bool // made here (no shared cache given): closed by close
}

var _ forwarding = (*forwarder)(nil)

// newForwarder forwards on peers; nil: a plaintext cache of its own.
func newForwarder(self string, leaderInfo func() (string, string), peers *peerconn.Cache) *forwarder {
	f := &forwarder{leaderInfo: leaderInfo, self: self, peers: peers}
	if peers == nil {
		f.peers, f.ownPeers = peerconn.New(), true
	}
	return f
}

// forwardAttempts bounds the tries of one forwarded call. Only a hop that
// certainly did not carry the request is tried again, and the last try
// dials afresh: a kept connection may sit in reconnect backoff after the
// leader restarted, while a new one connects at once.
const forwardAttempts = 2

func (f *forwarder) forward(ctx context.Context, call func(context.Context, grpc.ClientConnInterface) error) error {
	return f.hop(ctx, call, false)
}

func (f *forwarder) askLeader(ctx context.Context, call func(context.Context, grpc.ClientConnInterface) error) error {
	return f.hop(ctx, call, true)
}

// hop runs call on the leader: for a caller (own false: its token and the
// forwarded mark go along, and the leader's headers come back to it), or
// for this node itself (own: nothing of an incoming call goes along).
func (f *forwarder) hop(ctx context.Context, call func(context.Context, grpc.ClientConnInterface) error, own bool) error {
	if !own && peerconn.Forwarded(ctx) {
		// Never forward twice: the sender thought we lead; let it retry.
		return &leader.Error{Code: codes.Unavailable, Reason: apierr.NotLeader, Msg: "not the leader"}
	}
	id, addr := f.leaderInfo()
	if id == "" || addr == "" || id == f.self {
		return &leader.Error{Code: codes.Unavailable, Reason: apierr.NotLeader, Msg: "not the leader"}
	}
	// The caller's token goes with the call: the leader decides (never an
	// identity of this node's own).
	out := ctx
	if !own {
		out = peerconn.Forward(ctx)
	}
	var err error
	for attempt := 1; attempt <= forwardAttempts; attempt++ {
		var via grpc.ClientConnInterface
		via, err = f.via(id, addr, attempt == forwardAttempts, own)
		if err != nil {
			return unreachable(codes.Unavailable, id, addr, err)
		}
		err = call(out, via)
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
			return unreachable(status.Code(err), id, addr, err)
		case status.Code(err) == codes.Unavailable, status.Code(err) == codes.Canceled && ctx.Err() == nil:
			// Canceled while the caller still waits: the connection was
			// closed under the call (this node stopping), after it was sent.
			return &leader.Error{Code: codes.Unavailable, Reason: apierr.OutcomeUnknown,
				Msg: fmt.Sprintf("the connection to the leader %s at %s failed after the request was sent: %s", id, addr, apierr.HopCause(err))}
		}
		return err
	}
	return unreachable(codes.Unavailable, id, addr, err)
}

// via is what a hop to member id calls on: the multiplexed stream of its
// connection (a caller's token and the forwarded mark go with each call
// on it), relaying the leader's headers to the caller unless the call is
// this node's own. However many clients a follower serves, the leader
// sees one connection and one stream from it. fresh dials anew.
func (f *forwarder) via(id, addr string, fresh, own bool) (grpc.ClientConnInterface, error) {
	get := f.peers.GetMux
	if fresh {
		get = f.peers.RedialMux
	}
	mc, err := get(id, addr)
	if err != nil {
		return nil, err
	}
	if own {
		return mc, nil
	}
	return relaying{mc}, nil
}

// unreachable is the error of a hop that never carried the call: it names
// the leader and the cause, not gRPC's transport wording (a client sees
// which node could not be reached, and why).
func unreachable(code codes.Code, id, addr string, err error) *leader.Error {
	return &leader.Error{Code: code, Reason: apierr.NotSent,
		Msg: fmt.Sprintf("could not reach the leader %s at %s: %s", id, addr, apierr.HopCause(err))}
}

func (f *forwarder) close() {
	if f.ownPeers {
		f.peers.Close()
	}
}

// relayMetadata hands the leader's response headers and trailers back to
// the original caller: ctx derives from this follower's incoming call, so
// SetHeader and SetTrailer reach it. A forwarding follower therefore
// relays both the Raft index header and the leader-address trailer (and
// the leader's errors carry the leader in their ErrorInfo anyway).
//
// It wraps the connection rather than being one of its interceptors: the
// connection is shared with the node's other callers (admin probes, watch
// relays), whose peers' metadata is not the caller's answer.
type relaying struct{ grpc.ClientConnInterface }

func (r relaying) Invoke(ctx context.Context, method string, req, reply any, opts ...grpc.CallOption) error {
	var hdr, trl metadata.MD
	err := r.ClientConnInterface.Invoke(ctx, method, req, reply, append(opts, grpc.Header(&hdr), grpc.Trailer(&trl))...)
	if len(hdr) > 0 {
		_ = grpc.SetHeader(ctx, hdr)
	}
	if trl = withoutStatus(trl); len(trl) > 0 {
		_ = grpc.SetTrailer(ctx, trl)
	}
	return err
}

// withoutStatus drops the keys in which gRPC's transport sends a call's
// status (the returned error carries it): relayed as metadata they would
// be a second, stale copy of the status, and grpc-status-details-bin is
// binary.
func withoutStatus(md metadata.MD) metadata.MD {
	for _, k := range []string{"grpc-status", "grpc-message", "grpc-status-details-bin"} {
		delete(md, k)
	}
	return md
}
