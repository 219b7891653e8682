package rpc

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	"github.com/grackle-coord/grackle/apierr"
	"github.com/grackle-coord/grackle/fsm"
	fsmpb "github.com/grackle-coord/grackle/proto/grackle/fsm/v1"
	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
)

// ACLService: tokens are replicated FSM state; the leader draws the id
// and the secret, and only the secret's SHA-256 goes into the log.

func aclRPC[Req, Resp any](r Req, m func(pb.ACLServiceClient, context.Context, Req, ...grpc.CallOption) (Resp, error)) remote[Resp] {
	return func(ctx context.Context, cc grpc.ClientConnInterface) (Resp, error) {
		return m(pb.NewACLServiceClient(cc), ctx, r)
	}
}

// newToken draws a token id ("tk_" and 16 base62 characters) and a secret
// (256 random bits, base64url).
func newToken() (id, secret string, hash [32]byte) {
	id = "tk_" + randomBase62(16)
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("crypto/rand failed: " + err.Error())
	}
	secret = "grk_" + base64.RawURLEncoding.EncodeToString(b[:])
	return id, secret, sha256.Sum256([]byte(secret))
}

func randomBase62(n int) string {
	const base62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	out := make([]byte, 0, n)
	var b [1]byte
	for len(out) < n {
		if _, err := rand.Read(b[:]); err != nil {
			panic("crypto/rand failed: " + err.Error())
		}
		if b[0] < 248 { // 248 = 4*62: no modulo bias
			out = append(out, base62[b[0]%62])
		}
	}
	return string(out)
}

func tokenProto(t fsm.Token) *pb.Token {
	return &pb.Token{Id: t.ID, Role: t.Role, Namespace: t.Namespace, Description: t.Description, CreatedAt: t.CreatedAt}
}

// Bootstrap creates the first admin token, once per cluster.
func (s *Service) Bootstrap(ctx context.Context, r *pb.BootstrapRequest) (*pb.BootstrapResponse, error) {
	if !s.cfg.ACL {
		// Checked on the node asked and again on the leader a follower
		// forwards to: a token made where access control is off would
		// silently become an admin on "*" once it is turned on.
		return nil, apierr.New(codes.FailedPrecondition, apierr.ACLDisabled, s.cfg.NodeID, apierr.Leader{},
			fmt.Sprintf("node %s runs without access control: start every node with --acl, then bootstrap", s.cfg.NodeID))
	}
	desc := r.Description
	if desc == "" {
		desc = "bootstrap token"
	}
	if err := firstInvalid(fsm.ValidateDescription("description", desc)); err != nil {
		return nil, err
	}
	id, secret, hash := newToken()
	tok := &fsmpb.AclToken{Id: id, SecretSha256: hash[:], Role: fsm.RoleAdmin, Namespace: fsm.AnyNamespace, Description: desc}
	return write(s, ctx, aclRPC(r, pb.ACLServiceClient.Bootstrap),
		&fsmpb.Command{Op: &fsmpb.Command_AclBootstrap{AclBootstrap: &fsmpb.AclBootstrap{Token: tok}}},
		func(res *fsm.Result) *pb.BootstrapResponse {
			return &pb.BootstrapResponse{Secret: secret, Token: &pb.Token{Id: id, Role: tok.Role, Namespace: tok.Namespace,
				Description: desc, CreatedAt: s.tokenCreatedAt(id)}}
		})
}

// CreateToken creates a token; its secret is in this response only.
func (s *Service) CreateToken(ctx context.Context, r *pb.CreateTokenRequest) (*pb.CreateTokenResponse, error) {
	if fsm.RoleRank(r.Role) == 0 {
		return nil, apierr.InvalidField("role", fmt.Sprintf("must be read, write or admin, got %q", r.Role))
	}
	var nsErr error
	if r.Namespace != fsm.AnyNamespace {
		nsErr = fsm.ValidateName("namespace", r.Namespace)
	}
	if err := firstInvalid(nsErr, fsm.ValidateDescription("description", r.Description)); err != nil {
		return nil, err
	}
	id, secret, hash := newToken()
	tok := &fsmpb.AclToken{Id: id, SecretSha256: hash[:], Role: r.Role, Namespace: r.Namespace, Description: r.Description}
	return write(s, ctx, aclRPC(r, pb.ACLServiceClient.CreateToken),
		&fsmpb.Command{Op: &fsmpb.Command_AclCreateToken{AclCreateToken: &fsmpb.AclCreateToken{Token: tok}}},
		func(res *fsm.Result) *pb.CreateTokenResponse {
			return &pb.CreateTokenResponse{Secret: secret, Token: &pb.Token{Id: id, Role: r.Role, Namespace: r.Namespace,
				Description: r.Description, CreatedAt: s.tokenCreatedAt(id)}}
		})
}

// tokenCreatedAt reads a just-applied token's creation time.
func (s *Service) tokenCreatedAt(id string) int64 {
	for _, t := range s.fsm.Tokens() {
		if t.ID == id {
			return t.CreatedAt
		}
	}
	return 0
}

// ListTokens lists the tokens, never their secrets.
func (s *Service) ListTokens(ctx context.Context, r *pb.ListTokensRequest) (*pb.ListTokensResponse, error) {
	return read(s, ctx, aclRPC(r, pb.ACLServiceClient.ListTokens), func(int64) (*pb.ListTokensResponse, error) {
		out := &pb.ListTokensResponse{}
		for _, t := range s.fsm.Tokens() {
			out.Tokens = append(out.Tokens, tokenProto(t))
		}
		return out, nil
	})
}

// RevokeToken removes a token.
func (s *Service) RevokeToken(ctx context.Context, r *pb.RevokeTokenRequest) (*pb.RevokeTokenResponse, error) {
	if err := firstInvalid(fsm.ValidateName("id", r.Id)); err != nil {
		return nil, err
	}
	return write(s, ctx, aclRPC(r, pb.ACLServiceClient.RevokeToken),
		&fsmpb.Command{Op: &fsmpb.Command_AclRevokeToken{AclRevokeToken: &fsmpb.AclRevokeToken{Id: r.Id}}},
		func(*fsm.Result) *pb.RevokeTokenResponse { return &pb.RevokeTokenResponse{} })
}
