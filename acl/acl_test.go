package acl

import (
	"context"
	"crypto/sha256"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/grackle-coord/grackle/apierr"
	"github.com/grackle-coord/grackle/fsm"
)

type fakeTokens map[[32]byte]fsm.Token

func (f fakeTokens) TokenBySecretHash(h [32]byte) (fsm.Token, bool) { t, ok := f[h]; return t, ok }
func (f fakeTokens) ACLBootstrapped() bool                          { return true }

func withToken(secret string) context.Context {
	return metadata.NewIncomingContext(context.Background(), metadata.Pairs(MetadataKey, "Bearer "+secret))
}

// A node that is not caught up answers an unknown token with its Unsure
// error (Unavailable NOT_LEADER: ask another node), never TOKEN_UNKNOWN;
// a known token is decided as always, and a caught-up node (Unsure nil)
// refuses an unknown token with Unauthenticated.
func TestUnknownTokenOnANodeThatIsBehind(t *testing.T) {
	toks := fakeTokens{sha256.Sum256([]byte("good")): {ID: "t1", Role: fsm.RoleWrite, Namespace: "ns"}}
	behind := apierr.New(codes.Unavailable, apierr.NotLeader, "n2", apierr.Leader{}, "not caught up")
	need := Need{AnyToken: true}

	unsure := &Checker{Tokens: toks, Unsure: func() error { return behind }}
	if err := unsure.Check(withToken("good"), "/grackle.v1.ClusterService/GetClusterStatus", need); err != nil {
		t.Fatalf("known token refused on a node that is behind: %v", err)
	}
	err := unsure.Check(withToken("new"), "/grackle.v1.ClusterService/GetClusterStatus", need)
	if status.Code(err) != codes.Unavailable || apierr.ReasonOf(err) != apierr.NotLeader {
		t.Fatalf("unknown token on a node that is behind: %v, want Unavailable NOT_LEADER", err)
	}

	sure := &Checker{Tokens: toks, Unsure: func() error { return nil }}
	err = sure.Check(withToken("new"), "/grackle.v1.ClusterService/GetClusterStatus", need)
	if status.Code(err) != codes.Unauthenticated || apierr.ReasonOf(err) != ReasonTokenUnknown {
		t.Fatalf("unknown token on a caught-up node: %v, want Unauthenticated TOKEN_UNKNOWN", err)
	}
}

// A token the node does not have yet is looked up again once CatchUp says
// the node applied the leader's read index (a token created on the leader
// just before the call); when CatchUp fails the node decides on its own
// state.
func TestUnknownTokenLookedUpAgainAfterCatchUp(t *testing.T) {
	toks := fakeTokens{}
	c := &Checker{Tokens: toks, CatchUp: func(context.Context) bool {
		toks[sha256.Sum256([]byte("fresh"))] = fsm.Token{ID: "t2", Role: fsm.RoleRead, Namespace: "*"}
		return true
	}}
	if err := c.Check(withToken("fresh"), "/grackle.v1.ClusterService/GetClusterStatus", Need{AnyToken: true}); err != nil {
		t.Fatalf("token created before the call refused after catching up: %v", err)
	}
	c = &Checker{Tokens: fakeTokens{}, CatchUp: func(context.Context) bool { return false }}
	err := c.Check(withToken("other"), "/grackle.v1.ClusterService/GetClusterStatus", Need{AnyToken: true})
	if status.Code(err) != codes.Unauthenticated || apierr.ReasonOf(err) != ReasonTokenUnknown {
		t.Fatalf("unknown token, no catch-up: %v, want Unauthenticated TOKEN_UNKNOWN", err)
	}
}
