package acl

import (
	"context"
	"crypto/sha256"
	"errors"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
)

// Changes tells a stream's revocation watcher that the tokens changed: the
// node calls Notify when it applies a revoke, and every watcher looks its
// token up again. The zero value is ready.
type Changes struct {
	mu sync.Mutex
	ch chan struct{}
}

// Next returns a channel closed at the next Notify. Take it before
// looking a token up, so that a revoke applied in between is not missed.
func (c *Changes) Next() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ch == nil {
		c.ch = make(chan struct{})
	}
	return c.ch
}

// Notify wakes every watcher waiting on Next.
func (c *Changes) Notify() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ch != nil {
		close(c.ch)
		c.ch = nil
	}
}

// recheckEvery bounds how long a stream outlives its token when a change
// reaches the node without a Notify (a snapshot installed from the leader
// replaces every token at once).
const recheckEvery = 5 * time.Second

// errRevoked is the cause a watcher cancels its stream with.
var errRevoked = errors.New("the stream's token was revoked")

// endOnRevoke cancels a stream (cancel) once the token whose secret hashes
// to hash is no longer found, or returns when ctx ends.
func (c *Checker) endOnRevoke(ctx context.Context, cancel context.CancelCauseFunc, hash [sha256.Size]byte) {
	t := time.NewTimer(recheckEvery)
	defer t.Stop()
	for {
		var changed <-chan struct{}
		if c.Changes != nil {
			changed = c.Changes.Next()
		}
		if _, ok := c.Tokens.TokenBySecretHash(hash); !ok {
			cancel(errRevoked)
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-changed:
		case <-t.C:
			t.Reset(recheckEvery)
		}
	}
}

// revokedRefusal is what a stream ended by its token's revoke answers.
func revokedRefusal() error {
	return refusal(codes.Unauthenticated, ReasonTokenUnknown, "the token of this stream was revoked", nil)
}
