package peerconn

import (
	"context"

	"google.golang.org/grpc/metadata"
)

// ForwardedKey marks a call one member passes on to another (a follower
// to its leader) for its caller: the receiver answers it itself and never
// passes it on again, so a call cannot loop between members that
// disagree on who leads.
const ForwardedKey = "grackle-forwarded"

// TokenKey is the call metadata of the caller's access token (package
// acl's MetadataKey; this package's tests check they agree).
const TokenKey = "authorization"

// Forwarded reports whether the incoming call was passed on by another
// member.
func Forwarded(ctx context.Context) bool {
	return len(metadata.ValueFromIncomingContext(ctx, ForwardedKey)) > 0
}

// OnBehalf returns ctx for a call this node makes to a peer for the
// caller of its incoming call: the caller's access token goes with it, so
// the peer decides on the caller's identity (never one of this node's
// own).
func OnBehalf(ctx context.Context) context.Context {
	for _, v := range metadata.ValueFromIncomingContext(ctx, TokenKey) {
		ctx = metadata.AppendToOutgoingContext(ctx, TokenKey, v)
	}
	return ctx
}

// Forward is OnBehalf for a call passed on to the leader: marked
// ForwardedKey as well.
func Forward(ctx context.Context) context.Context {
	return OnBehalf(metadata.AppendToOutgoingContext(ctx, ForwardedKey, "1"))
}
