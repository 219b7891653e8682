package fsm

import (
	"fmt"

	"google.golang.org/protobuf/proto"

	fsmpb "github.com/grackle-coord/grackle/proto/grackle/fsm/v1"

	bolt "go.etcd.io/bbolt"
)

// Access control state: tokens are replicated like everything else, so
// that every node decides the same and a revoke is seen everywhere once
// committed. Only the SHA-256 of a secret is stored; the leader generates
// the id and the secret and proposes the hash (the FSM stays deterministic).

// Roles, from least to most.
const (
	RoleRead  = "read"
	RoleWrite = "write"
	RoleAdmin = "admin"
)

// AnyNamespace scopes a token to every namespace.
const AnyNamespace = "*"

type tokenRec struct {
	id, hash, role, ns, desc string // hash: the 32 bytes of the secret's SHA-256
	createdAt                int64
}

// Token is a stored access token (never its secret).
type Token struct {
	ID, Role, Namespace, Description string
	CreatedAt                        int64 // Unix nanoseconds
}

func (t tokenRec) public() Token {
	return Token{ID: t.id, Role: t.role, Namespace: t.ns, Description: t.desc, CreatedAt: t.createdAt}
}

// RoleRank orders the roles (0 for an unknown one).
func RoleRank(role string) int {
	switch role {
	case RoleRead:
		return 1
	case RoleWrite:
		return 2
	case RoleAdmin:
		return 3
	}
	return 0
}

func validateToken(t *fsmpb.AclToken) *Error {
	if t == nil {
		return invalid("token: must be set")
	}
	if err := ValidateName("token.id", t.GetId()); err != nil {
		return err.(*Error)
	}
	if len(t.GetSecretSha256()) != 32 {
		return invalid("token.secret_sha256: must be 32 bytes, got %d", len(t.GetSecretSha256()))
	}
	if RoleRank(t.GetRole()) == 0 {
		return invalid("token.role: must be read, write or admin, got %q", t.GetRole())
	}
	if t.GetNamespace() != AnyNamespace {
		if err := ValidateName("token.namespace", t.GetNamespace()); err != nil {
			return err.(*Error)
		}
	}
	if err := ValidateDescription("token.description", t.GetDescription()); err != nil {
		return err.(*Error)
	}
	return nil
}

func (a *applier) putToken(t *fsmpb.AclToken) *Error {
	if err := validateToken(t); err != nil {
		return err
	}
	if _, ok := a.s.tokens.Get(tokenRec{id: t.Id}); ok {
		return &Error{Code: CodeAlreadyExists, Msg: fmt.Sprintf("token %s already exists", t.Id)}
	}
	h := string(t.SecretSha256)
	if _, ok := a.s.tokenIdx[h]; ok {
		return &Error{Code: CodeAlreadyExists, Msg: "a token with this secret already exists"}
	}
	a.s.tokens.Set(tokenRec{id: t.Id, hash: h, role: t.Role, ns: t.Namespace, desc: t.Description, createdAt: a.now})
	a.s.tokenIdx[h] = t.Id
	return nil
}

func (a *applier) aclBootstrap(c *fsmpb.AclBootstrap) *Error {
	if a.s.aclBootstrapped {
		return &Error{Code: CodeFailedPrecondition, Msg: "access control is already bootstrapped (Bootstrap succeeds once per cluster)"}
	}
	if c.GetToken().GetRole() != RoleAdmin || c.GetToken().GetNamespace() != AnyNamespace {
		return invalid("token: the bootstrap token must be admin on %q", AnyNamespace)
	}
	if err := a.putToken(c.GetToken()); err != nil {
		return err
	}
	a.s.aclBootstrapped = true
	return nil
}

// aclCreateToken is refused at the state quota; aclBootstrap is not: it
// succeeds once per cluster, and an operator locked out of a full cluster
// could not free anything.
func (a *applier) aclCreateToken(c *fsmpb.AclCreateToken) *Error {
	if err := validateToken(c.GetToken()); err != nil {
		return err
	}
	if err := a.s.overQuota(); err != nil {
		return err
	}
	return a.putToken(c.GetToken())
}

func (a *applier) aclRevokeToken(c *fsmpb.AclRevokeToken) *Error {
	t, ok := a.s.tokens.Get(tokenRec{id: c.GetId()})
	if !ok {
		return notFound(ReasonTokenNotFound, "token %q not found", c.GetId())
	}
	a.s.tokens.Delete(t)
	delete(a.s.tokenIdx, t.hash)
	return nil
}

// TokenBySecretHash returns the token whose secret hashes to sha256.
func (f *FSM) TokenBySecretHash(sha256 [32]byte) (Token, bool) {
	s, done := f.read()
	defer done()
	id, ok := s.tokenIdx[string(sha256[:])]
	if !ok {
		return Token{}, false
	}
	t, ok := s.tokens.Get(tokenRec{id: id})
	return t.public(), ok
}

// Tokens lists the tokens in id order (never their secrets).
func (f *FSM) Tokens() []Token {
	s, done := f.read()
	defer done()
	var out []Token
	s.tokens.Scan(func(t tokenRec) bool {
		out = append(out, t.public())
		return true
	})
	return out
}

// ACLBootstrapped reports whether the first admin token was created.
func (f *FSM) ACLBootstrapped() bool {
	s, done := f.read()
	defer done()
	return s.aclBootstrapped
}

// ---- snapshot ----

func appendToken(b []byte, t tokenRec) ([]byte, error) {
	return marshalDet.MarshalAppend(b, &fsmpb.TokenRecord{CreatedAt: t.createdAt, Token: &fsmpb.AclToken{
		Id: t.id, SecretSha256: []byte(t.hash), Role: t.role, Namespace: t.ns, Description: t.desc}})
}

func loadTokens(tx *bolt.Tx, st *state) error {
	if tx.Bucket(bucketTokens) == nil {
		return nil // a snapshot from before access control
	}
	var last string
	return eachRecord(tx, bucketTokens, func(rec []byte) error {
		var r fsmpb.TokenRecord
		if err := proto.Unmarshal(rec, &r); err != nil {
			return fmt.Errorf("token record: %w", err)
		}
		if err := validateToken(r.Token); err != nil {
			return fmt.Errorf("token record: %s", err.Msg)
		}
		t := tokenRec{id: r.Token.Id, hash: string(r.Token.SecretSha256), role: r.Token.Role, ns: r.Token.Namespace,
			desc: r.Token.Description, createdAt: r.CreatedAt}
		if st.tokens.Len() > 0 && last >= t.id {
			return fmt.Errorf("token %q out of order", t.id)
		}
		if _, dup := st.tokenIdx[t.hash]; dup {
			return fmt.Errorf("token %q: secret hash shared with another token", t.id)
		}
		last = t.id
		st.tokens.Set(t)
		st.tokenIdx[t.hash] = t.id
		return nil
	})
}

// checkTokens: the hash index mirrors the tokens table, one entry each.
func (s *state) checkTokens() error {
	if s.tokenIdx == nil {
		return nil // a persist view carries no indexes
	}
	if len(s.tokenIdx) != s.tokens.Len() {
		return fmt.Errorf("token index has %d entries for %d tokens", len(s.tokenIdx), s.tokens.Len())
	}
	var err error
	s.tokens.Scan(func(t tokenRec) bool {
		if s.tokenIdx[t.hash] != t.id {
			err = fmt.Errorf("token %q missing from the hash index", t.id)
		}
		return err == nil
	})
	return err
}
