package client

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/grackle-coord/grackle/apierr"
	"github.com/grackle-coord/grackle/internal/flowwindow"
	"github.com/grackle-coord/grackle/internal/mux"
	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
	"github.com/grackle-coord/grackle/tlsutil"
)

// Defaults of Config.
const (
	DefaultDialTimeout       = 5 * time.Second
	DefaultBackoffBase       = 50 * time.Millisecond
	DefaultBackoffMax        = 2 * time.Second
	DefaultRetryTimeout      = 30 * time.Second
	DefaultMaxAcquireTimeout = 300 * time.Second
)

// leaderChangeWindow and leaderChangeBackoff: a call that fails with
// NOT_LEADER or NOT_SENT (it never reached the Raft log) retries every
// 50-100 ms for its first leaderChangeWindow of failures, the length of a
// leader change (a SIGKILLed leader is replaced in about 0.7 s with the
// server's default timeouts), and with the exponential backoff after that.
const (
	leaderChangeWindow  = 2 * time.Second
	leaderChangeBackoff = 100 * time.Millisecond
)

// leaderAddressKey is the trailer key in which a node names the leader's
// gRPC address on an Unavailable error (the server's rpc.LeaderAddressKey).
const leaderAddressKey = "grackle-leader-address"

// Config configures a Client. Only Endpoints is required.
type Config struct {
	// Endpoints are gRPC addresses ("host:port") of some cluster members.
	// Any member will do: the client finds the leader through them and
	// also dials members and leaders it learns of later.
	Endpoints []string

	// DialTimeout bounds New's first contact with the cluster and each
	// leader-discovery probe of one endpoint. Default 5 s.
	DialTimeout time.Duration

	// TLS, when set, connects with TLS: RootCAs verifies the servers
	// (nil: the system's roots), Certificates is the client certificate
	// for servers that require mutual TLS. Nil: plaintext.
	TLS *tls.Config

	// Token is the access token sent on every call as
	// "authorization: Bearer <token>" (servers started with --acl).
	Token string

	// DialOptions are added to every connection, after the client's own
	// (transport credentials, reconnect backoff), so they can override
	// them. A grpc.WithContextDialer here is ignored: set Dialer instead.
	DialOptions []grpc.DialOption

	// Dialer opens the TCP connection to an address (default: a
	// net.Dialer). The client wraps it to learn which addresses it can
	// reach: a member whose advertised address cannot be dialed or resolved
	// from here is routed around, through the endpoints.
	Dialer func(ctx context.Context, addr string) (net.Conn, error)

	// Observer, when set, receives three events per Semaphore.Acquire and
	// TryAcquire: start, rejected (refused without waiting) and stop (with
	// duration and result); see Observer. client/promobserver exports them
	// as Prometheus metrics.
	Observer Observer

	// Logger receives the client's few log lines (a member address that
	// cannot be reached, so calls go through the endpoints instead; said
	// once per address). Default: no logging.
	Logger hclog.Logger

	// BackoffBase and BackoffMax shape the jittered exponential backoff
	// between retries: the n-th retry waits a random time in [d/2, d] with
	// d = min(BackoffMax, BackoffBase * 2^n). Defaults 50 ms and 2 s.
	// During a leader change (NOT_LEADER, NOT_SENT) the first 2 s of
	// retries wait at most 100 ms each.
	BackoffBase time.Duration
	BackoffMax  time.Duration

	// RetryTimeout bounds how long one call keeps retrying after its first
	// failure, also when its context has no deadline (the context always
	// bounds it too). Default 30 s; negative means only the context does.
	RetryTimeout time.Duration

	// MaxAcquireTimeout is the longest server-side wait one
	// AcquireSemaphore call may ask for (the server's maximum
	// timeout_seconds). Semaphore.Acquire waits longer by calling again.
	// Default 300 s.
	MaxAcquireTimeout time.Duration

	// Unary, when true, sends every call as its own unary gRPC call. By
	// default the client sends unary calls to a member over one
	// multiplexed stream (MuxService) when the member offers it, which
	// costs both ends about a quarter of the CPU per call; results,
	// errors, retries and headers are the same either way, and a member
	// without MuxService gets unary calls.
	Unary bool

	// LeaderOnly, when true, sends every call to the leader. By default
	// a client sends its calls to one of Endpoints chosen at random (its
	// home; followers serve reads and forward writes to the leader on one
	// stream for all their clients), and only waits and watches to the
	// leader: a fleet of clients then spreads its connections over the
	// members instead of holding them all on the leader.
	LeaderOnly bool
}

func (c Config) withDefaults() Config {
	if c.DialTimeout <= 0 {
		c.DialTimeout = DefaultDialTimeout
	}
	if c.BackoffBase <= 0 {
		c.BackoffBase = DefaultBackoffBase
	}
	if c.BackoffMax <= 0 {
		c.BackoffMax = DefaultBackoffMax
	}
	if c.BackoffMax < c.BackoffBase {
		c.BackoffMax = c.BackoffBase
	}
	if c.RetryTimeout == 0 {
		c.RetryTimeout = DefaultRetryTimeout
	}
	if c.MaxAcquireTimeout < time.Second {
		c.MaxAcquireTimeout = DefaultMaxAcquireTimeout
	}
	if c.Logger == nil {
		c.Logger = hclog.NewNullLogger()
	}
	return c
}

// Client talks to a Grackle cluster. It is safe for concurrent use.
//
// Client implements pb.GrackleServiceClient and pb.ClusterServiceClient:
// each RPC goes to the client's home or to the current leader (spread.go)
// and is retried as the package documentation describes.
type Client struct {
	cfg   Config
	reach *reachability
	log   hclog.Logger

	mu        sync.Mutex
	given     []string                       // the endpoints of Config, the fallback route
	conns     map[string]*grpc.ClientConn    // one per address, kept until Close
	muxes     map[*grpc.ClientConn]*mux.Conn // the multiplexed stream of each connection
	known     []string                       // endpoints, then learned member addresses
	leader    string                         // the leader's address as last learned ("" unknown)
	rr        int                            // round robin over known when no leader is known
	fb        int                            // round robin over given when the leader cannot be dialed
	flight    *discovery                     // the leader discovery under way, if any
	lastProbe time.Time                      // when the last discovery ended
	sessions  map[*Session]struct{}
	closed    bool
	// home is where calls go unless they are the leader's (spread.go);
	// not before homeDownUntil after it failed one.
	home          string
	homeDownUntil time.Time

	life     context.Context // cancelled by Close
	lifeStop context.CancelFunc

	// handshakeErr is the last TLS handshake error that retrying cannot
	// fix (tlsutil.Permanent): New reports it at once.
	handshakeErr atomic.Pointer[error]
}

var (
	_ pb.GrackleServiceClient = (*Client)(nil)
	_ pb.ClusterServiceClient = (*Client)(nil)
)

// New creates a client and makes a first contact with the cluster: it
// returns an error if no endpoint answers GetClusterStatus within
// Config.DialTimeout (or before ctx ends). It does not need a leader to
// exist yet: calls find it when they are made.
func New(ctx context.Context, cfg Config) (*Client, error) {
	cfg = cfg.withDefaults()
	c := &Client{cfg: cfg, reach: newReachability(cfg.Dialer), log: cfg.Logger,
		conns: map[string]*grpc.ClientConn{}, muxes: map[*grpc.ClientConn]*mux.Conn{}, sessions: map[*Session]struct{}{}}
	c.life, c.lifeStop = context.WithCancel(context.Background())
	for _, e := range cfg.Endpoints {
		if e != "" {
			c.learnLocked(e)
		}
	}
	c.given = append([]string(nil), c.known...)
	if len(c.known) == 0 {
		return nil, errors.New("grackle client: no endpoints")
	}
	c.chooseHome()
	for _, e := range c.known {
		if _, err := c.connLocked(e); err != nil {
			c.Close()
			return nil, fmt.Errorf("grackle client: endpoint %q: %w", e, err)
		}
	}
	dctx, cancel := context.WithTimeout(ctx, cfg.DialTimeout)
	defer cancel()
	for attempt := 0; ; attempt++ {
		res := c.probe(dctx)
		if res.answered > 0 {
			c.adopt(res)
			return c, nil
		}
		if err := c.unfixable(res); err != nil {
			c.Close()
			return nil, fmt.Errorf("grackle client: %w", err)
		}
		if err := sleepCtx(dctx, c.backoff(attempt)); err != nil {
			c.Close()
			return nil, status.Errorf(codes.Unavailable, "no endpoint of %v answered within %v (last error: %s)", cfg.Endpoints, cfg.DialTimeout, apierr.HopCause(res.lastErr))
		}
	}
}

// Close closes every connection. Sessions of the client end with
// ErrClientClosed (their leases are not revoked: close sessions first to
// revoke them). Calls made after Close fail with ErrClientClosed.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.lifeStop()
	conns := c.conns
	c.conns = map[string]*grpc.ClientConn{}
	muxes := c.muxes
	c.muxes = map[*grpc.ClientConn]*mux.Conn{}
	sessions := make([]*Session, 0, len(c.sessions))
	for s := range c.sessions {
		sessions = append(sessions, s)
	}
	c.mu.Unlock()
	for _, s := range sessions {
		s.stopLoop()
		s.end(ErrClientClosed)
	}
	for _, m := range muxes {
		m.Close()
	}
	var errs []error
	for _, cc := range conns {
		if err := cc.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Leader returns the gRPC address of the leader as last learned ("" when
// unknown right now).
func (c *Client) Leader() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.leader
}

// Known returns every address the client knows: its endpoints, then the
// members and leaders it learned of.
func (c *Client) Known() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.known...)
}

func (c *Client) learnLocked(addr string) {
	for _, k := range c.known {
		if k == addr {
			return
		}
	}
	c.known = append(c.known, addr)
}

// connLocked returns the kept connection to addr, creating it (without
// blocking: gRPC connects on first use) if needed.
func (c *Client) connLocked(addr string) (*grpc.ClientConn, error) {
	if cc, ok := c.conns[addr]; ok {
		return cc, nil
	}
	creds := insecure.NewCredentials()
	if c.cfg.TLS != nil {
		cfg := c.cfg.TLS
		creds = tlsutil.ClientCreds(func() *tls.Config { return cfg }, func(err error) {
			if tlsutil.Permanent(err) {
				c.handshakeErr.Store(&err)
			}
		})
	}
	opts := append(apierr.DialOptions(),
		grpc.WithTransportCredentials(creds),
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 2 * time.Second},
			MinConnectTimeout: c.cfg.DialTimeout,
		}),
	)
	opts = append(opts, flowwindow.DialOptions()...) // no PING per call
	if c.cfg.Token != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(tlsutil.Token(c.cfg.Token)))
	}
	opts = append(opts, c.cfg.DialOptions...)
	// Last, so that it is the client's own dialer that connects.
	opts = append(opts, grpc.WithContextDialer(c.reach.dialerFor(addr)))
	cc, err := grpc.NewClient(grpcTarget(addr), opts...)
	if err != nil {
		return nil, err
	}
	c.conns[addr] = cc
	if !c.cfg.Unary {
		c.muxes[cc] = mux.NewConn(cc)
	}
	return cc, nil
}

func (c *Client) conn(addr string) (*grpc.ClientConn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, ErrClientClosed
	}
	return c.connLocked(addr)
}

// api is what a call to addr goes through: the connection's multiplexed
// stream (its unary calls; streams pass through to the connection), or
// the connection itself with Config.Unary.
func (c *Client) api(addr string) (grpc.ClientConnInterface, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, ErrClientClosed
	}
	cc, err := c.connLocked(addr)
	if err != nil {
		return nil, err
	}
	if m := c.muxes[cc]; m != nil {
		return m, nil
	}
	return cc, nil
}

// ---- leader discovery ----

type discovery struct {
	done chan struct{}
	addr string
}

type probeResult struct {
	answered int
	leader   string
	term     uint64
	members  []string
	lastErr  error
	// refused is an answer no retry changes: the server refused the call
	// (plaintext to a TLS port, a missing or unknown token) rather than
	// being unreachable or leaderless.
	refused error
}

// unfixable returns the reason a first contact cannot succeed by trying
// again: a TLS handshake that cannot succeed, or a refusal.
func (c *Client) unfixable(res probeResult) error {
	if p := c.handshakeErr.Load(); p != nil {
		return *p
	}
	return res.refused
}

// probe asks every known address for the cluster status, in parallel. It
// returns once every address answered, or shortly after the first answer
// that names a leader (to let answers with a newer term arrive), or when
// ctx or the probe timeout ends. The answer with the highest term wins.
func (c *Client) probe(ctx context.Context) probeResult {
	c.mu.Lock()
	addrs := append([]string(nil), c.known...)
	c.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, c.cfg.DialTimeout)
	defer cancel()
	type answer struct {
		st  *pb.GetClusterStatusResponse
		err error
	}
	ch := make(chan answer, len(addrs))
	for _, a := range addrs {
		go func(a string) {
			cc, err := c.conn(a)
			if err != nil {
				ch <- answer{err: err}
				return
			}
			st, err := pb.NewClusterServiceClient(cc).GetClusterStatus(ctx, &pb.GetClusterStatusRequest{})
			ch <- answer{st, err}
		}(a)
	}
	var res probeResult
	var grace <-chan time.Time
	members := map[string]bool{}
	for n := 0; n < len(addrs); n++ {
		var a answer
		select {
		case a = <-ch:
		case <-grace:
			n = len(addrs)
			continue
		case <-ctx.Done():
			if res.lastErr == nil {
				res.lastErr = ctx.Err()
			}
			n = len(addrs)
			continue
		}
		if a.err != nil {
			res.lastErr = a.err
			switch status.Code(a.err) {
			case codes.FailedPrecondition, codes.Unauthenticated, codes.PermissionDenied:
				res.refused = a.err
			}
			continue
		}
		res.answered++
		for _, m := range a.st.Members {
			if m.GrpcAddress != "" {
				members[m.GrpcAddress] = true
			}
		}
		if a.st.LeaderAddress != "" && (res.leader == "" || a.st.Term > res.term) {
			res.leader, res.term = a.st.LeaderAddress, a.st.Term
			if grace == nil {
				grace = time.After(30 * time.Millisecond)
			}
		}
	}
	for m := range members {
		res.members = append(res.members, m)
	}
	sort.Strings(res.members)
	return res
}

// adopt records what a probe learned.
func (c *Client) adopt(res probeResult) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, m := range res.members {
		c.learnLocked(m)
	}
	if res.leader != "" {
		c.learnLocked(res.leader)
		c.leader = res.leader
	}
}

// discover finds the leader: one probe at a time for the whole client;
// concurrent callers share its result. It returns "" if no node knows a
// leader right now (or ctx ended first).
func (c *Client) discover(ctx context.Context) string {
	c.mu.Lock()
	f := c.flight
	if f == nil {
		f = &discovery{done: make(chan struct{})}
		c.flight = f
		go func() {
			res := c.probe(c.life)
			c.adopt(res)
			c.mu.Lock()
			c.lastProbe = time.Now()
			c.flight = nil
			f.addr = res.leader
			c.mu.Unlock()
			close(f.done)
		}()
	}
	c.mu.Unlock()
	select {
	case <-f.done:
		return f.addr
	case <-ctx.Done():
		return ""
	}
}

// rediscoverAfter spaces the background leader discoveries of a client
// whose calls go through the endpoints.
const rediscoverAfter = 2 * time.Second

// rediscoverSoon starts a leader discovery in the background, unless one
// ran less than rediscoverAfter ago or runs now.
func (c *Client) rediscoverSoon() {
	c.mu.Lock()
	due := c.flight == nil && !c.closed && time.Since(c.lastProbe) >= rediscoverAfter
	c.mu.Unlock()
	if due {
		go c.discover(c.life)
	}
}

// pick returns the address a call should go to: the leader if known, else
// the one discovery finds, else (no node knows a leader) the next known
// address, whose answer may name the leader.
func (c *Client) pick(ctx context.Context) (string, error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return "", ErrClientClosed
	}
	if l := c.leader; l != "" {
		c.mu.Unlock()
		return c.route(l), nil
	}
	c.mu.Unlock()
	if a := c.discover(ctx); a != "" {
		return c.route(a), nil
	}
	if err := ctx.Err(); err != nil {
		return "", status.FromContextError(err).Err()
	}
	c.mu.Lock()
	l := c.leader
	if l == "" {
		// Round robin over the known addresses this client can reach.
		l = c.known[c.rr%len(c.known)]
		for i := 0; i < len(c.known) && c.reach.isDown(l); i++ {
			c.rr++
			l = c.known[c.rr%len(c.known)]
		}
		c.rr++
	}
	c.mu.Unlock()
	return c.route(l), nil
}

// route returns where a call meant for the leader at addr goes: addr
// itself, unless this client has never been able to dial it (it does not
// resolve here, or the network refuses it); then one of the endpoints given
// in Config (round robin, those that can be dialed first), which forward to
// the leader. An address that was reached before and fails now is a node
// that went away: the call goes there, fails, and the client looks for the
// new leader, as it does without any of this.
func (c *Client) route(addr string) string {
	if !c.reach.isDown(addr) || !c.reach.neverConnected(addr) {
		return addr
	}
	// The leader may have changed without this client noticing (calls
	// through a follower succeed either way): look again now and then.
	c.rediscoverSoon()
	c.mu.Lock()
	var to string
	for i := 0; i < len(c.given); i++ {
		e := c.given[(c.fb+i)%len(c.given)]
		if e != addr && !c.reach.isDown(e) {
			to = e
			c.fb += i + 1
			break
		}
	}
	if to == "" {
		// Every endpoint failed its last dial too: try them in turn.
		to = c.given[c.fb%len(c.given)]
		c.fb++
	}
	c.mu.Unlock()
	if to != addr && c.reach.firstFallback(addr) {
		c.logFallback(addr)
	}
	return to
}

// logFallback says once why calls meant for addr go through the given
// endpoints. A name that does not resolve here is how a container
// network's members look from its host: the endpoints forward, nothing is
// wrong, so it is said at info (the CLI shows warnings only). A member that
// resolves but does not answer is down, or a failover is under way.
func (c *Client) logFallback(addr string) {
	err := c.reach.lastError(addr)
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		c.log.Info("the leader's advertised address does not resolve from here (a container network's name?); its calls go through the given endpoints, which forward them",
			"address", addr, "error", err, "endpoints", c.given)
		return
	}
	c.log.Warn("the leader does not answer at its advertised address (down, or a failover under way); calls go through the given endpoints meanwhile",
		"address", addr, "error", err, "endpoints", c.given)
}

// noteUnavailable updates the leader after an Unavailable failure of a
// call sent to addr. It reports whether the error named a new leader.
func (c *Client) noteUnavailable(addr, hint string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if hint != "" && hint != addr {
		c.learnLocked(hint)
		changed := c.leader != hint
		c.leader = hint
		return changed
	}
	if c.leader == addr {
		c.leader = ""
	}
	return false
}

// forgetLeader drops the known leader (after a leadership transfer).
func (c *Client) forgetLeader() {
	c.mu.Lock()
	c.leader = ""
	c.mu.Unlock()
}

// ---- calls ----

// invoke runs one call on the home or the leader (spread.go) with the
// retry policy pol. do makes
// one attempt on cc with the given call options (the caller's, plus one
// that captures the trailer).
func (c *Client) invoke(ctx context.Context, pol policy, opts []grpc.CallOption,
	do func(ctx context.Context, cc grpc.ClientConnInterface, opts []grpc.CallOption) error) error {
	var firstFail time.Time
	redirected := false
	for attempt := 0; ; attempt++ {
		addr, home, err := c.target(ctx)
		if err != nil {
			return err
		}
		cc, err := c.api(addr)
		if err != nil {
			return err
		}
		var tr metadata.MD
		callOpts := append(append(make([]grpc.CallOption, 0, len(opts)+1), opts...), grpc.Trailer(&tr))
		err = do(ctx, cc, callOpts)
		if err == nil {
			return nil
		}
		st := status.Convert(err)
		if st.Code() != codes.Unavailable {
			return err
		}
		if home {
			c.homeFailed()
		}
		newLeader := c.noteUnavailable(addr, leaderHint(tr, err))
		// A call on a connection that was never established did not reach
		// any server, whatever the policy.
		if !retryable(pol, err) && !c.reach.neverConnected(addr) {
			return err
		}
		if c.isClosed() {
			return ErrClientClosed
		}
		if ctx.Err() != nil {
			return err
		}
		now := time.Now()
		if firstFail.IsZero() {
			firstFail = now
		}
		if c.cfg.RetryTimeout > 0 && now.Sub(firstFail) >= c.cfg.RetryTimeout {
			return err
		}
		d := c.backoff(attempt)
		if apierr.ProvesNotSent(err) && now.Sub(firstFail) < leaderChangeWindow {
			// Between leaders: the call was refused or never carried, so
			// it is safe to try again soon, and the new leader is usually
			// there within a second. Exponential backoff alone would have
			// the call sleep through it (after 4 retries it waits 0.4-0.8
			// s), so for the first leaderChangeWindow retries come every
			// 50-100 ms.
			d = min(d, jittered(leaderChangeBackoff, leaderChangeBackoff, 0))
		}
		if newLeader && !redirected {
			// The error named a leader we were not using: go there now.
			d, redirected = 0, true
		}
		if serr := sleepCtx(ctx, d); serr != nil {
			return status.Errorf(status.FromContextError(serr).Code(), "%v while retrying; last error: %s", serr, apierr.HopCause(err))
		}
	}
}

func (c *Client) isClosed() bool { return c.life.Err() != nil }

func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
