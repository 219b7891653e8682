// Package acl decides who may call what when access control is on
// (--acl): every call carries "authorization: Bearer <secret>"; the secret
// is looked up by its SHA-256 among the replicated tokens (package fsm),
// and the token's role and namespace scope must cover what the method
// needs (the table in rules.go). Health and reflection stay open.
//
// The decision is made by the node that serves the call: the leader for
// everything it serves (a follower forwards the caller's token with the
// call, never an identity of its own), the node asked for GetClusterStatus
// and GetNodeInfo, which any valid token may call.
package acl

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/grackle-coord/grackle/apierr"
	"github.com/grackle-coord/grackle/fsm"
)

// ErrorInfo reasons of this package's refusals, in apierr.Domain like every
// other Grackle reason (one domain, so apierr.ReasonOf reads them too).
const (
	ReasonTokenMissing     = "TOKEN_MISSING"
	ReasonTokenUnknown     = "TOKEN_UNKNOWN"
	ReasonPermissionDenied = "PERMISSION_DENIED"
)

// MetadataKey is the call metadata that carries the token.
const MetadataKey = "authorization"

// Tokens finds a token by its secret's SHA-256 (the FSM).
type Tokens interface {
	TokenBySecretHash(sha256 [32]byte) (fsm.Token, bool)
	ACLBootstrapped() bool
}

// Checker checks calls against the replicated tokens.
type Checker struct {
	Tokens Tokens
	// Unsure, if set, is asked when a token is not found: a non-nil error
	// (an Unavailable NOT_LEADER) means this node cannot tell whether the
	// token exists, because it has not applied everything committed yet
	// (restarted and replaying, or just joined), and is answered instead
	// of TOKEN_UNKNOWN, so that a client asks another node rather than
	// give up on a valid token. A node that is caught up still refuses an
	// unknown or revoked token with Unauthenticated.
	Unsure func() error
	// CatchUp, if set, is asked first when a token is not found: true
	// means this node has now applied every write acknowledged before the
	// call (a follower's read index from the leader), so the token is
	// looked up again. A token created on the leader just before a call
	// to a follower is then found there instead of refused.
	CatchUp func(ctx context.Context) bool
	// Changes, if set, is notified when a token is revoked: a stream
	// admitted with a token ends at once when the token goes (otherwise
	// within recheckEvery).
	Changes *Changes
}

type needKey struct{}

// withNeed records what the call needs, for Authorize.
func withNeed(ctx context.Context, n Need) context.Context {
	return context.WithValue(ctx, needKey{}, n)
}

// SecretFrom returns the bearer secret of ctx's incoming metadata.
func SecretFrom(ctx context.Context) string {
	// Only the one key: FromIncomingContext would copy every header of
	// the call (lower-casing each key), on every call that needs a token.
	for _, v := range metadata.ValueFromIncomingContext(ctx, MetadataKey) {
		if scheme, secret, ok := strings.Cut(v, " "); ok && strings.EqualFold(scheme, "bearer") {
			return strings.TrimSpace(secret)
		}
	}
	return ""
}

func refusal(code codes.Code, reason, msg string, md map[string]string) error {
	st := status.New(code, msg)
	if d, err := st.WithDetails(&errdetails.ErrorInfo{Reason: reason, Domain: apierr.Domain, Metadata: md}); err == nil {
		st = d
	}
	return st.Err()
}

// Check decides need for the caller of ctx.
func (c *Checker) Check(ctx context.Context, method string, need Need) error {
	if need.Open {
		return nil
	}
	if need.AnyToken && !c.Tokens.ACLBootstrapped() {
		// No token can exist yet: let clients find the leader, so that
		// `grackle acl bootstrap` can reach it.
		return nil
	}
	secret := SecretFrom(ctx)
	if secret == "" {
		return refusal(codes.Unauthenticated, ReasonTokenMissing,
			"access control is on: this call needs a token (pass --token or set GRACKLE_TOKEN)", nil)
	}
	hash := sha256.Sum256([]byte(secret))
	tok, ok := c.Tokens.TokenBySecretHash(hash)
	if !ok && c.CatchUp != nil && c.CatchUp(ctx) {
		tok, ok = c.Tokens.TokenBySecretHash(hash)
	}
	if !ok {
		if c.Unsure != nil {
			if err := c.Unsure(); err != nil {
				return err
			}
		}
		return refusal(codes.Unauthenticated, ReasonTokenUnknown, "the token is unknown or was revoked", nil)
	}
	if need.AnyToken {
		return nil
	}
	if fsm.RoleRank(tok.Role) >= fsm.RoleRank(need.Role) && (tok.Namespace == fsm.AnyNamespace || tok.Namespace == need.Namespace) {
		return nil
	}
	return refusal(codes.PermissionDenied, ReasonPermissionDenied,
		fmt.Sprintf("token %s (role %s on namespace %q) may not call %s: it needs role %s on namespace %q",
			tok.ID, tok.Role, tok.Namespace, shortMethod(method), need.Role, need.Namespace),
		map[string]string{"role": need.Role, "namespace": need.Namespace, "token_id": tok.ID})
}

func shortMethod(m string) string {
	m = strings.TrimPrefix(m, "/")
	return strings.TrimPrefix(m, "grackle.v1.")
}

type methodKey struct{}

// Authorize checks the need the interceptor recorded in ctx. The API calls
// it where it serves a call on the leader, after the leader has applied
// every committed entry, so that the leader decides with the newest
// tokens (and a node that became leader between the interceptor and the
// handler still checks). A call that reached it without a recorded need
// is refused: the check fails closed.
func (c *Checker) Authorize(ctx context.Context) error {
	n, ok := ctx.Value(needKey{}).(Need)
	if !ok {
		return status.Error(codes.Internal, "access control: no rule was looked up for this call")
	}
	if n.Checked {
		return nil
	}
	m, _ := ctx.Value(methodKey{}).(string)
	return c.Check(ctx, m, n)
}

// UnaryInterceptor looks up each call's need. It checks at once where the
// decision is this node's (GetClusterStatus, or this node leads); a call a
// follower will forward is left to the leader.
func (c *Checker) UnaryInterceptor(isLeader func() bool) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		need := NeedFor(info.FullMethod, req)
		if !need.Open && (need.AnyToken || isLeader()) {
			if err := c.Check(ctx, info.FullMethod, need); err != nil {
				return nil, err
			}
		}
		ctx = context.WithValue(withNeed(ctx, need), methodKey{}, info.FullMethod)
		return handler(ctx, req)
	}
}

// StreamInterceptor checks a server stream's need when its request
// arrives: on this node, except for a relayed stream (Need.Relayed) on a
// node that does not lead, which is left to the node that serves it.
func (c *Checker) StreamInterceptor(isLeader func() bool) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		if NeedFor(info.FullMethod, nil).Open {
			return handler(srv, ss)
		}
		// A stream lives as long as its token: once admitted, a watcher
		// ends it when the token is revoked (a unary call is checked
		// whole, but a watch would otherwise run on for hours).
		ctx, cancel := context.WithCancelCause(ss.Context())
		defer cancel(nil)
		cs := &checkedStream{ServerStream: ss, ctx: ctx, c: c, method: info.FullMethod, isLeader: isLeader,
			admitted: func(hash [sha256.Size]byte) { go c.endOnRevoke(ctx, cancel, hash) }}
		err := handler(srv, cs)
		if errors.Is(context.Cause(ctx), errRevoked) {
			return revokedRefusal()
		}
		return err
	}
}

type checkedStream struct {
	grpc.ServerStream
	ctx      context.Context // the stream's, canceled when its token is revoked
	c        *Checker
	method   string
	isLeader func() bool
	admitted func(hash [sha256.Size]byte)
	received bool
	need     Need // of the request, once received; Checked once checked
}

func (s *checkedStream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	if !s.received {
		s.received = true
		s.need = NeedFor(s.method, m)
		if !s.need.Relayed || s.isLeader == nil || s.isLeader() {
			if err := s.c.Check(s.ctx, s.method, s.need); err != nil {
				return err
			}
			s.need.Checked = true
			// A relayed stream that this node does not check is ended by
			// the leader that serves it; a stream admitted before any
			// token existed (no secret) has nothing to revoke.
			if secret := SecretFrom(s.ctx); secret != "" && s.admitted != nil {
				s.admitted(sha256.Sum256([]byte(secret)))
			}
		}
	}
	return nil
}

func (s *checkedStream) Context() context.Context {
	// Filled in RecvMsg, which a server-streaming handler calls first; a
	// stream whose request has not arrived has nothing to authorize yet
	// and Authorize refuses it (no rule looked up).
	if !s.received {
		return s.ctx
	}
	return context.WithValue(withNeed(s.ctx, s.need), methodKey{}, s.method)
}
