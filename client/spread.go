package client

// Spreading: by default a client sends its calls to one of its endpoints,
// its home, chosen at random when it is created, rather than all to the
// leader. A fleet of worker processes then spreads its connections over
// the members (as etcd's client balances over its endpoints): a follower
// serves reads itself and forwards writes to the leader on one
// multiplexed stream for all of its clients, so the leader holds a
// handful of connections instead of one per worker, and the cost of each
// connection (its system calls, its TLS, its HTTP/2 framing) falls on
// every member. Waits (a blocking acquire, a wait group's or a barrier's
// wait) and watches still go to the leader, where they are decided: a
// follower would only relay them. Config.LeaderOnly sends every call to
// the leader, as before.
//
// A call that fails Unavailable at the home (it is down, or cannot reach
// a leader) is retried under the usual rules on the leader, and the home
// is left alone for homeRetryAfter.

import (
	"context"
	"math/rand/v2"
	"time"
)

// homeRetryAfter is how long calls go to the leader after the home failed
// one.
const homeRetryAfter = 5 * time.Second

type leaderBoundKey struct{}

// toLeader marks ctx's calls as ones the leader decides (waits): they
// never go to the home.
func toLeader(ctx context.Context) context.Context {
	return context.WithValue(ctx, leaderBoundKey{}, true)
}

func leaderBound(ctx context.Context) bool { return ctx.Value(leaderBoundKey{}) != nil }

// chooseHome picks the home among the given endpoints (none with
// LeaderOnly).
func (c *Client) chooseHome() {
	if c.cfg.LeaderOnly || len(c.given) == 0 {
		return
	}
	c.home = c.given[rand.IntN(len(c.given))]
}

// target is where a call goes: the home, unless the call is the leader's
// or the home failed lately; else the leader (pick).
func (c *Client) target(ctx context.Context) (addr string, home bool, err error) {
	if !leaderBound(ctx) {
		c.mu.Lock()
		h, ok := c.home, c.home != "" && !c.closed && !time.Now().Before(c.homeDownUntil)
		c.mu.Unlock()
		if ok && !c.reach.isDown(h) {
			return h, true, nil
		}
	}
	addr, err = c.pick(ctx)
	return addr, false, err
}

// homeFailed sends calls to the leader for a while.
func (c *Client) homeFailed() {
	c.mu.Lock()
	c.homeDownUntil = time.Now().Add(homeRetryAfter)
	c.mu.Unlock()
}

// Home is the endpoint this client sends its calls to ("" with
// Config.LeaderOnly: every call goes to the leader).
func (c *Client) Home() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.home
}

// waitingIf is toLeader(ctx) for a call that waits (wait true).
func waitingIf(ctx context.Context, wait bool) context.Context {
	if wait {
		return toLeader(ctx)
	}
	return ctx
}
