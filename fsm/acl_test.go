package fsm

import (
	"crypto/sha256"
	"testing"

	fsmpb "github.com/grackle-coord/grackle/proto/grackle/fsm/v1"
)

func aclTok(id, secret, role, ns string) *fsmpb.AclToken {
	h := sha256.Sum256([]byte(secret))
	return &fsmpb.AclToken{Id: id, SecretSha256: h[:], Role: role, Namespace: ns, Description: "d " + id}
}

func cBootstrap(t *fsmpb.AclToken) *fsmpb.Command {
	return &fsmpb.Command{Op: &fsmpb.Command_AclBootstrap{AclBootstrap: &fsmpb.AclBootstrap{Token: t}}}
}

func cToken(t *fsmpb.AclToken) *fsmpb.Command {
	return &fsmpb.Command{Op: &fsmpb.Command_AclCreateToken{AclCreateToken: &fsmpb.AclCreateToken{Token: t}}}
}

func cRevokeToken(id string) *fsmpb.Command {
	return &fsmpb.Command{Op: &fsmpb.Command_AclRevokeToken{AclRevokeToken: &fsmpb.AclRevokeToken{Id: id}}}
}

// Bootstrap succeeds once; tokens are found by their secret's hash only;
// bad tokens change nothing; revoke removes; a snapshot keeps all of it.
func TestACLTokens(t *testing.T) {
	h := newHarness(t)
	h.fails(cBootstrap(aclTok("root", "s0", RoleWrite, AnyNamespace)), CodeInvalidArgument, "admin")
	h.ok(cBootstrap(aclTok("root", "s0", RoleAdmin, AnyNamespace)))
	h.fails(cBootstrap(aclTok("root2", "s9", RoleAdmin, AnyNamespace)), CodeFailedPrecondition, "already bootstrapped")
	if !h.f.ACLBootstrapped() {
		t.Fatal("not bootstrapped")
	}
	h.ok(cToken(aclTok("reader", "s1", RoleRead, "ns1")))
	h.fails(cToken(aclTok("reader", "s2", RoleRead, "ns1")), CodeAlreadyExists, "reader")
	h.fails(cToken(aclTok("other", "s1", RoleRead, "ns1")), CodeAlreadyExists, "secret")
	h.fails(cToken(aclTok("bad", "s3", "owner", "ns1")), CodeInvalidArgument, "token.role")
	h.fails(cToken(aclTok("bad", "s3", RoleRead, "a b")), CodeInvalidArgument, "token.namespace")
	h.fails(cToken(&fsmpb.AclToken{Id: "bad", SecretSha256: []byte("short"), Role: RoleRead, Namespace: "x"}), CodeInvalidArgument, "secret_sha256")
	if n := len(h.f.Tokens()); n != 2 {
		t.Fatalf("%d tokens, want 2", n)
	}
	tok, ok := h.f.TokenBySecretHash(sha256.Sum256([]byte("s1")))
	if !ok || tok.ID != "reader" || tok.Role != RoleRead || tok.Namespace != "ns1" {
		t.Fatalf("lookup: %+v %v", tok, ok)
	}
	if _, ok := h.f.TokenBySecretHash(sha256.Sum256([]byte("s2"))); ok {
		t.Fatal("an unknown secret was found")
	}

	before := dumpState(h.f)
	snap := snapshotBytes(t, h.f)
	g := New(Options{TempDir: t.TempDir()})
	if err := restoreBytes(g, snap); err != nil {
		t.Fatal(err)
	}
	if after := dumpState(g); after != before {
		t.Fatalf("restored state differs:\n%s\nwant\n%s", after, before)
	}
	if _, ok := g.TokenBySecretHash(sha256.Sum256([]byte("s1"))); !ok {
		t.Fatal("the restored index lost a token")
	}
	if string(snapshotBytes(t, g)) != string(snap) {
		t.Fatal("the same state gave different snapshot bytes")
	}

	h.ok(cRevokeToken("reader"))
	if r := h.fails(cRevokeToken("reader"), CodeNotFound, "reader"); r.Err.Reason != ReasonTokenNotFound {
		t.Fatalf("reason %q, want %s", r.Err.Reason, ReasonTokenNotFound)
	}
	if _, ok := h.f.TokenBySecretHash(sha256.Sum256([]byte("s1"))); ok {
		t.Fatal("a revoked token is still found")
	}
}
