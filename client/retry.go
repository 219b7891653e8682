package client

import (
	"math/rand/v2"
	"regexp"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
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

// notSentMarkers are substrings of Unavailable messages that prove the
// call was never appended to the Raft log:
//   - "not the leader": the node does not lead (raft.ErrNotLeader or
//     ErrLeadershipTransferInProgress: raft refused the entry before
//     appending it; or a node that does not lead refused to forward);
//   - "raft is overloaded": raft.ErrEnqueueTimeout, never enqueued;
//   - "cannot reach the leader": a follower failed to build a connection
//     to the leader, so it forwarded nothing;
//   - "Error while dialing", "connection refused": no connection was
//     established (by this client, or by a forwarding follower), so the
//     request was never sent.
var notSentMarkers = []string{
	"not the leader",
	"raft is overloaded",
	"cannot reach the leader",
	"Error while dialing",
	"connection refused",
}

// retryable reports whether an Unavailable failure may be retried.
func retryable(pol policy, st *status.Status) bool {
	if st.Code() != codes.Unavailable {
		return false
	}
	if pol == retryAlways {
		return true
	}
	return provesNotSent(st.Message())
}

func provesNotSent(msg string) bool {
	// An outcome-unknown failure never counts, whatever else it says.
	if strings.Contains(msg, "outcome is unknown") {
		return false
	}
	for _, m := range notSentMarkers {
		if strings.Contains(msg, m) {
			return true
		}
	}
	return false
}

var leaderInMessage = regexp.MustCompile(`the leader is \S+ at ([^\s;,)"]+)`)

// leaderHint extracts the leader's address from an Unavailable failure:
// the trailer the answering node set, else the message (a follower that
// forwarded the call passes the leader's message on, but not its trailer).
func leaderHint(tr metadata.MD, msg string) string {
	if v := tr.Get(leaderAddressKey); len(v) > 0 && v[len(v)-1] != "" {
		return v[len(v)-1]
	}
	ms := leaderInMessage.FindAllStringSubmatch(msg, -1)
	if len(ms) == 0 {
		return ""
	}
	return ms[len(ms)-1][1]
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
