package client

import (
	"math/rand/v2"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/grackle-coord/grackle/apierr"
)

// policy says which Unavailable failures of a call may be retried.
type policy int

const (
	// retryAlways: reads and idempotent writes; any Unavailable is retried.
	retryAlways policy = iota
	// retryIfNotSent: non-idempotent writes; retried only when the error
	// proves the call never reached the Raft log.
	retryIfNotSent
)

// retryable reports whether an Unavailable failure may be retried. A
// non-idempotent write is retried only when the error's reason (package
// apierr) proves the call never reached the Raft log: NOT_LEADER or
// NOT_SENT, set by the node that answered, by a follower that could not
// forward, or by this client's own connection when no transport ever
// carried the request (apierr.DialOptions).
func retryable(pol policy, err error) bool {
	if status.Code(err) != codes.Unavailable {
		return false
	}
	if pol == retryAlways {
		return true
	}
	return apierr.ProvesNotSent(err)
}

// leaderHint is the leader's address an Unavailable failure names: the
// ErrorInfo's metadata (which a forwarding follower passes on unchanged
// with the leader's error), else the grackle-leader-address trailer.
func leaderHint(tr metadata.MD, err error) string {
	if a := apierr.LeaderOf(err).Address; a != "" {
		return a
	}
	if v := tr.Get(leaderAddressKey); len(v) > 0 && v[len(v)-1] != "" {
		return v[len(v)-1]
	}
	return ""
}

// backoff is the wait before retry number attempt (0-based): a random time
// in [d/2, d], d = min(BackoffMax, BackoffBase * 2^attempt).
func (c *Client) backoff(attempt int) time.Duration {
	return jittered(c.cfg.BackoffBase, c.cfg.BackoffMax, attempt)
}

func jittered(base, max time.Duration, attempt int) time.Duration {
	d := base
	for i := 0; i < attempt && d < max; i++ {
		d *= 2
	}
	if d > max {
		d = max
	}
	half := d / 2
	return half + rand.N(d-half+1)
}
