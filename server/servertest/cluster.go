// Package servertest starts in-process Grackle clusters (real Raft over TCP
// on loopback, real gRPC) for tests.
package servertest

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/grackle-coord/grackle/fsm"
	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
	"github.com/grackle-coord/grackle/server"
)

// Cluster is a set of in-process nodes.
type Cluster struct {
	t     testing.TB
	Nodes []*server.Server
	Cfgs  []server.Config
	conns map[string]*grpc.ClientConn
	// dial are the options of the test's own connections (default
	// plaintext): TLS credentials, a token.
	dial []grpc.DialOption
	// token, when set, goes with every call of the test's connections
	// (a cluster with access control on).
	token atomic.Pointer[string]
}

// SetToken makes every call of the cluster's test connections carry the
// access token secret ("" for none).
func (c *Cluster) SetToken(secret string) { c.token.Store(&secret) }

// tokenCreds sends the cluster's current token, if any.
type tokenCreds struct{ c *Cluster }

func (t tokenCreds) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	if p := t.c.token.Load(); p != nil && *p != "" {
		return map[string]string{"authorization": "Bearer " + *p}, nil
	}
	return nil, nil
}

func (tokenCreds) RequireTransportSecurity() bool { return false }

// Config returns a test node config: loopback with ephemeral ports,
// timeouts generous enough for the race detector on 2 cores.
func Config(t testing.TB, id string) server.Config {
	cfg := server.DefaultConfig()
	cfg.NodeID = id
	cfg.DataDir = t.TempDir()
	cfg.GRPCAddr = "127.0.0.1:0"
	cfg.RaftAddr = "127.0.0.1:0"
	cfg.HTTPAddr = ""
	// Generous: tests run beside other packages' tests under the race
	// detector on 2 cores, where a 300 ms follower timeout elected falsely
	// in the middle of tests that assume one leader (FIFO order, probes).
	// A test that kills the leader waits a little longer for the next.
	cfg.HeartbeatTimeout = time.Second
	cfg.ElectionTimeout = time.Second
	cfg.LeaderLeaseTimeout = 500 * time.Millisecond
	cfg.LogLevel = "warn"
	// Joining nodes become voters soon after they caught up.
	cfg.PromoteAfter = 200 * time.Millisecond
	// A loaded machine may take long to stop Raft; a node left running
	// past its test would log into a finished test.
	cfg.ShutdownTimeout = 2 * time.Minute
	return cfg
}

// Logger routes a node's logs to t.Log.
func Logger(t testing.TB, id string) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{Name: id, Level: hclog.Warn, Output: testWriter{t: t, end: finishedFlag(t)}})
}

// finished marks the tests that ended (testing.TB -> *testEnd): a node's
// goroutines that still log then (a bounded shutdown left Raft stopping)
// must not call t.Log, which panics after the test.
var finished sync.Map

// testEnd is a test's end, set by its last cleanup. Writes hold mu while
// they call t.Log and the cleanup takes mu to set done, so no t.Log can be
// under way when the test completes (a bare flag checked before t.Log left
// a window: checked, then the test ended, then t.Log panicked).
type testEnd struct {
	mu   sync.Mutex
	done bool
}

func finishedFlag(t testing.TB) *testEnd {
	f, loaded := finished.LoadOrStore(t, new(testEnd))
	e := f.(*testEnd)
	if !loaded {
		t.Cleanup(func() {
			e.mu.Lock()
			e.done = true
			e.mu.Unlock()
		})
	}
	return e
}

type testWriter struct {
	t   testing.TB
	end *testEnd
}

func (w testWriter) Write(p []byte) (int, error) {
	w.end.mu.Lock()
	defer w.end.mu.Unlock()
	if w.end.done {
		return len(p), nil
	}
	w.t.Helper()
	w.t.Log(string(p))
	return len(p), nil
}

// Start starts n nodes: the first bootstraps alone, the others join it.
func Start(t testing.TB, n int, tweak func(*server.Config)) *Cluster {
	t.Helper()
	return StartWith(t, n, tweak)
}

// StartWith is Start with the dial options of the test's own connections
// to the nodes (TLS credentials for a TLS cluster).
func StartWith(t testing.TB, n int, tweak func(*server.Config), dial ...grpc.DialOption) *Cluster {
	t.Helper()
	c := New(t, dial...)
	for i := 0; i < n; i++ {
		cfg := Config(t, fmt.Sprintf("node%d", i+1))
		if i > 0 {
			cfg.Join = c.Nodes[0].GRPCAddr()
		}
		if tweak != nil {
			tweak(&cfg)
		}
		c.StartNode(cfg)
		if i == 0 {
			c.WaitLeader()
		}
	}
	c.WaitMembers(n)
	return c
}

// New returns an empty cluster: start its nodes with StartNode. dial are
// the options of the test's own connections (TLS credentials).
func New(t testing.TB, dial ...grpc.DialOption) *Cluster {
	c := &Cluster{t: t, conns: map[string]*grpc.ClientConn{}, dial: dial}
	finishedFlag(t) // its cleanup runs after Close's (last in, first out)
	// The test's temporary directory (the nodes' data dirs, made later by
	// Config) registers its removal at the first TempDir call: made here,
	// before Close's cleanup, it is removed after the nodes stopped, not
	// under a running node (which writes its log mark until it stops).
	_ = t.TempDir()
	t.Cleanup(c.Close)
	return c
}

// StartNode starts one more node with cfg (also to restart a stopped one).
func (c *Cluster) StartNode(cfg server.Config) *server.Server {
	c.t.Helper()
	s, err := server.Start(cfg, Logger(c.t, cfg.NodeID))
	if err != nil {
		c.t.Fatalf("start %s: %v", cfg.NodeID, err)
	}
	for i, x := range c.Cfgs {
		if x.NodeID == cfg.NodeID {
			c.Nodes[i], c.Cfgs[i] = s, cfg
			return s
		}
	}
	c.Nodes = append(c.Nodes, s)
	c.Cfgs = append(c.Cfgs, cfg)
	return s
}

// Eventually polls cond until it holds or the generous deadline passes.
func Eventually(t testing.TB, what string, within time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", within, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// WaitLeader waits until some running node leads and has a ready API,
// and returns its index.
func (c *Cluster) WaitLeader() int {
	c.t.Helper()
	idx := -1
	Eventually(c.t, "a leader", 20*time.Second, func() bool {
		for i, s := range c.Nodes {
			if s != nil && s.IsLeader() {
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				_, err := c.Client(i).ListNamespaces(ctx, &pb.ListNamespacesRequest{})
				cancel()
				if err == nil {
					idx = i
					return true
				}
			}
		}
		return false
	})
	return idx
}

// WaitMembers waits until the leader's configuration has n members, all
// voters (a joining node is a nonvoter until the leader promoted it), and
// every running node knows a leader.
func (c *Cluster) WaitMembers(n int) {
	c.t.Helper()
	Eventually(c.t, fmt.Sprintf("%d members", n), 30*time.Second, func() bool {
		li := -1
		for i, s := range c.Nodes {
			if s != nil && s.IsLeader() {
				li = i
			}
		}
		if li < 0 {
			return false
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		st, err := c.ClusterClient(li).GetClusterStatus(ctx, &pb.GetClusterStatusRequest{})
		if err != nil || len(st.Members) != n {
			return false
		}
		for _, m := range st.Members {
			if m.Suffrage != "voter" {
				return false
			}
		}
		for i, s := range c.Nodes {
			if s == nil {
				continue
			}
			st, err := c.ClusterClient(i).GetClusterStatus(ctx, &pb.GetClusterStatusRequest{})
			if err != nil || st.LeaderAddress == "" {
				return false
			}
		}
		return true
	})
}

func (c *Cluster) conn(i int) *grpc.ClientConn {
	addr := c.Nodes[i].GRPCAddr()
	if cc, ok := c.conns[addr]; ok {
		return cc
	}
	opts := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithPerRPCCredentials(tokenCreds{c})}
	cc, err := grpc.NewClient(addr, append(opts, c.dial...)...)
	if err != nil {
		c.t.Fatal(err)
	}
	c.conns[addr] = cc
	return cc
}

// Client is a GrackleService client connected to node i.
func (c *Cluster) Client(i int) pb.GrackleServiceClient { return pb.NewGrackleServiceClient(c.conn(i)) }

// ClusterClient is a ClusterService client connected to node i.
func (c *Cluster) ClusterClient(i int) pb.ClusterServiceClient {
	return pb.NewClusterServiceClient(c.conn(i))
}

// Conn is the raw connection to node i.
func (c *Cluster) Conn(i int) *grpc.ClientConn { return c.conn(i) }

// Leader returns the index of the node that currently leads (-1: none).
func (c *Cluster) Leader() int {
	for i, s := range c.Nodes {
		if s != nil && s.IsLeader() {
			return i
		}
	}
	return -1
}

// Follower returns the index of some running non-leader (-1: none).
func (c *Cluster) Follower() int {
	for i, s := range c.Nodes {
		if s != nil && !s.IsLeader() {
			return i
		}
	}
	return -1
}

// StopNode stops node i (its data dir stays, for a restart).
func (c *Cluster) StopNode(i int) {
	if s := c.Nodes[i]; s != nil {
		if cc, ok := c.conns[s.GRPCAddr()]; ok {
			cc.Close()
			delete(c.conns, s.GRPCAddr())
		}
		s.Close()
		c.Nodes[i] = nil
	}
}

// Close stops every node.
func (c *Cluster) Close() {
	for _, cc := range c.conns {
		cc.Close()
	}
	c.conns = map[string]*grpc.ClientConn{}
	for i := range c.Nodes {
		c.StopNode(i)
	}
}

// TransferLeadership asks node i to hand leadership to target (""
// for any voter), asking again while it is refused: a leader transfers
// only once its term is rpc.MinTransferInterval old, and a refusal changes
// nothing. Tests use it to force a leader change.
func (c *Cluster) TransferLeadership(ctx context.Context, i int, target string) (*pb.TransferLeadershipResponse, error) {
	for {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		res, err := c.ClusterClient(i).TransferLeadership(cctx, &pb.TransferLeadershipRequest{NodeId: target})
		cancel()
		if status.Code(err) != codes.FailedPrecondition {
			return res, err
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// QueueLen is the number of calls waiting on a semaphore on node i (0
// unless it leads): those the leader decided must wait, not acquires whose
// own command is still in flight. Tests use it to wait for a known queue
// order.
func (c *Cluster) QueueLen(i int, ns, sem string) int {
	if c.Nodes[i] == nil {
		return 0
	}
	t := c.Nodes[i].API.Leader().Term()
	if t == nil {
		return 0
	}
	return t.WaiterCounts()[fsm.SemKey{Namespace: ns, Semaphore: sem}]
}
