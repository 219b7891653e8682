// Package cluster runs a Grackle cluster whose nodes have their own network
// addresses: one Linux network namespace per node, a veth pair into a
// bridge in the root namespace, an address per node on a private /24 that
// exists only on this machine. Partitions are iptables DROP rules inside
// the nodes' namespaces; crashes and pauses are signals. Needs root,
// iproute2 and iptables. Everything is torn down by Close (call it in a
// defer; it is safe to call twice).
package cluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/grackle-coord/grackle/apierr"
	"github.com/grackle-coord/grackle/internal/mux"
	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
)

// Config describes the cluster.
type Config struct {
	Nodes  int
	Binary string // the grackle binary
	Dir    string // data dirs and logs
	// Net is the third octet of the 10.231.Net.0/24 subnet (1..254); runs
	// that overlap in time must use different values.
	Net       int
	ExtraArgs []string // appended to every `grackle server`
	Env       []string // extra environment of the server processes
	// Secure, when set, turns on client mutual TLS, peer TLS and access
	// control on every node (secure.go).
	Secure *Secure
	// Unary, when set, has API send every call as its own unary gRPC call;
	// by default the workloads' calls go over each connection's
	// multiplexed stream, as the Go client sends them.
	Unary bool
}

// Node is one member.
type Node struct {
	ID      string
	NS      string // network namespace
	IP      string
	GRPC    string
	Raft    string
	DataDir string
	LogPath string

	cmd    *exec.Cmd
	done   chan struct{}
	paused bool
	joined bool // started with --join (after a membership change)
}

// Cluster is a running set of nodes.
type Cluster struct {
	cfg    Config
	bridge string
	Nodes  []*Node

	sec *secureState // nil: plaintext, no access control

	mu     sync.Mutex
	closed bool
	conns  map[connKey]*grpc.ClientConn
	muxes  map[connKey]*mux.Conn
}

type connKey struct{ addr, token string }

func run(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

func nsRun(ns string, args ...string) error {
	return run("ip", append([]string{"netns", "exec", ns}, args...)...)
}

// Start builds the network and starts every node with static bootstrap.
func Start(cfg Config) (*Cluster, error) {
	if cfg.Net < 1 || cfg.Net > 254 {
		return nil, fmt.Errorf("cluster: Net must be 1..254")
	}
	c := &Cluster{cfg: cfg, bridge: fmt.Sprintf("grkbr%d", cfg.Net), conns: map[connKey]*grpc.ClientConn{}}
	if err := c.network(); err != nil {
		c.Close()
		return nil, err
	}
	if cfg.Secure != nil {
		if err := c.makeCerts(); err != nil {
			c.Close()
			return nil, err
		}
	}
	var members []string
	for _, n := range c.Nodes {
		members = append(members, n.ID+"="+n.Raft+"="+n.GRPC)
	}
	for i := range c.Nodes {
		if err := c.start(i, "--initial-members", strings.Join(members, ",")); err != nil {
			c.Close()
			return nil, err
		}
	}
	if c.sec != nil {
		if err := c.bootstrap(60 * time.Second); err != nil {
			c.Close()
			return nil, err
		}
	}
	return c, nil
}

// network creates the bridge, one namespace per node and the veth pairs.
func (c *Cluster) network() error {
	c.teardownNetwork() // leftovers of a crashed earlier run with the same Net
	gw := fmt.Sprintf("10.231.%d.1", c.cfg.Net)
	steps := [][]string{
		{"ip", "link", "add", c.bridge, "type", "bridge"},
		{"ip", "addr", "add", gw + "/24", "dev", c.bridge},
		{"ip", "link", "set", c.bridge, "up"},
		// Docker's FORWARD policy drops bridged traffic when br_netfilter
		// is loaded: let our bridge's own traffic through.
		{"iptables", "-I", "FORWARD", "-i", c.bridge, "-o", c.bridge, "-j", "ACCEPT"},
	}
	for _, s := range steps {
		if err := run(s[0], s[1:]...); err != nil {
			return err
		}
	}
	for i := 0; i < c.cfg.Nodes; i++ {
		n := &Node{ID: fmt.Sprintf("n%d", i+1), NS: fmt.Sprintf("grk%d-n%d", c.cfg.Net, i+1), IP: fmt.Sprintf("10.231.%d.%d", c.cfg.Net, 11+i)}
		n.GRPC, n.Raft = n.IP+":7420", n.IP+":7421"
		n.DataDir = filepath.Join(c.cfg.Dir, n.ID)
		n.LogPath = filepath.Join(c.cfg.Dir, n.ID+".log")
		host, peer := fmt.Sprintf("gk%dv%dh", c.cfg.Net, i+1), fmt.Sprintf("gk%dv%dn", c.cfg.Net, i+1)
		for _, s := range [][]string{
			{"ip", "netns", "add", n.NS},
			{"ip", "link", "add", host, "type", "veth", "peer", "name", peer},
			{"ip", "link", "set", host, "master", c.bridge, "up"},
			{"ip", "link", "set", peer, "netns", n.NS},
			{"ip", "netns", "exec", n.NS, "ip", "addr", "add", n.IP + "/24", "dev", peer},
			{"ip", "netns", "exec", n.NS, "ip", "link", "set", peer, "up"},
			{"ip", "netns", "exec", n.NS, "ip", "link", "set", "lo", "up"},
		} {
			if err := run(s[0], s[1:]...); err != nil {
				return err
			}
		}
		c.Nodes = append(c.Nodes, n)
	}
	return nil
}

func (c *Cluster) teardownNetwork() {
	for i := 0; i < 9; i++ {
		_ = run("ip", "netns", "del", fmt.Sprintf("grk%d-n%d", c.cfg.Net, i+1))
		_ = run("ip", "link", "del", fmt.Sprintf("gk%dv%dh", c.cfg.Net, i+1))
	}
	for run("iptables", "-D", "FORWARD", "-i", c.bridge, "-o", c.bridge, "-j", "ACCEPT") == nil {
	}
	_ = run("ip", "link", "del", c.bridge)
}

// start launches node i's server in its namespace with extra flags.
func (c *Cluster) start(i int, extra ...string) error {
	n := c.Nodes[i]
	if err := os.MkdirAll(n.DataDir, 0o700); err != nil {
		return err
	}
	logf, err := os.OpenFile(n.LogPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	args := append([]string{"netns", "exec", n.NS, c.cfg.Binary, "server", "--node-id", n.ID, "--data-dir", n.DataDir,
		"--grpc-addr", n.GRPC, "--raft-addr", n.Raft, "--http-addr", "", "--log-level", "info"}, c.cfg.ExtraArgs...)
	env := append(os.Environ(), c.cfg.Env...)
	if c.sec != nil {
		args = append(args, c.secureArgs(n)...)
		if n.joined {
			env = append(env, c.joinEnv()...)
		}
	} else {
		// The nodes listen on their namespaces' 10.231.x.y addresses,
		// beyond loopback: a plaintext cluster must say so.
		args = append(args, "--insecure")
	}
	args = append(args, extra...)
	cmd := exec.Command("ip", args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = env
	// `ip netns exec` execs the binary in place, so the pid is the server's.
	if err := cmd.Start(); err != nil {
		logf.Close()
		return err
	}
	fmt.Fprintf(logf, "---- started %s (pid %d) %s\n", n.ID, cmd.Process.Pid, time.Now().Format(time.RFC3339Nano))
	n.cmd, n.done, n.paused = cmd, make(chan struct{}), false
	done := n.done
	go func() { cmd.Wait(); logf.Close(); close(done) }()
	return nil
}

// Running reports whether node i's process is up.
func (c *Cluster) Running(i int) bool { return c.Nodes[i].cmd != nil }

// Kill sends SIGKILL to node i and waits for it to exit.
func (c *Cluster) Kill(i int) {
	n := c.Nodes[i]
	if n.cmd == nil {
		return
	}
	_ = n.cmd.Process.Signal(syscall.SIGKILL)
	<-n.done
	n.cmd, n.paused = nil, false
}

// Restart starts a killed node again on its data dir.
func (c *Cluster) Restart(i int) error {
	if c.Nodes[i].cmd != nil {
		return nil
	}
	if c.Nodes[i].joined {
		return c.start(i, "--join", c.joinTarget(i))
	}
	var members []string
	for _, n := range c.Nodes {
		members = append(members, n.ID+"="+n.Raft+"="+n.GRPC)
	}
	return c.start(i, "--initial-members", strings.Join(members, ","))
}

// Pause stops node i with SIGSTOP; Resume continues it.
func (c *Cluster) Pause(i int) {
	if n := c.Nodes[i]; n.cmd != nil && !n.paused {
		_ = n.cmd.Process.Signal(syscall.SIGSTOP)
		n.paused = true
	}
}

// Resume sends SIGCONT to a paused node.
func (c *Cluster) Resume(i int) {
	if n := c.Nodes[i]; n.cmd != nil && n.paused {
		_ = n.cmd.Process.Signal(syscall.SIGCONT)
		n.paused = false
	}
}

// Partition cuts every pair of nodes that are in different groups (both
// directions). Nodes in no group keep all their links (a bridge node is
// listed in two groups).
func (c *Cluster) Partition(groups [][]int) error {
	in := func(g []int, i int) bool {
		for _, x := range g {
			if x == i {
				return true
			}
		}
		return false
	}
	for a := range c.Nodes {
		for b := range c.Nodes {
			if a == b {
				continue
			}
			share, placedA, placedB := false, false, false
			for _, g := range groups {
				placedA = placedA || in(g, a)
				placedB = placedB || in(g, b)
				share = share || (in(g, a) && in(g, b))
			}
			if placedA && placedB && !share {
				if err := nsRun(c.Nodes[a].NS, "iptables", "-A", "INPUT", "-s", c.Nodes[b].IP, "-j", "DROP"); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// Heal removes every partition rule.
func (c *Cluster) Heal() error {
	var first error
	for _, n := range c.Nodes {
		if err := nsRun(n.NS, "iptables", "-F", "INPUT"); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// Endpoints lists every node's gRPC address.
func (c *Cluster) Endpoints() []string {
	var eps []string
	for _, n := range c.Nodes {
		eps = append(eps, n.GRPC)
	}
	return eps
}

// Conn returns a kept-open connection to an address, for the harness's
// own calls (setup, nemeses): on a secure cluster it sends the admin token.
func (c *Cluster) Conn(addr string) *grpc.ClientConn { return c.ConnAs(addr, "") }

// ConnAs is Conn sending token instead (on a secure cluster; "" is the
// admin token). The workloads use a token that may only write to their
// namespace.
func (c *Cluster) ConnAs(addr, token string) *grpc.ClientConn {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := connKey{addr, token}
	if cc, ok := c.conns[k]; ok {
		return cc
	}
	// apierr.DialOptions: a call no connection carried is marked NOT_SENT,
	// so the recorder can count it a certain failure.
	opts := apierr.DialOptions()
	if c.sec != nil {
		opts = append(opts, c.secureDialOptions(token)...)
	} else {
		opts = append(opts, grpc.WithTransportCredentials(insecure.NewCredentials()))
	}
	cc, err := grpc.NewClient(addr, opts...)
	if err != nil {
		panic(err) // only malformed targets fail here
	}
	c.conns[k] = cc
	return cc
}

// API is what the workloads call addr through with token: ConnAs's
// connection, over its multiplexed stream unless Config.Unary.
func (c *Cluster) API(addr, token string) grpc.ClientConnInterface {
	cc := c.ConnAs(addr, token)
	if c.cfg.Unary {
		return cc
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	k := connKey{addr, token}
	if c.muxes == nil {
		c.muxes = map[connKey]*mux.Conn{}
	}
	m, ok := c.muxes[k]
	if !ok {
		m = mux.NewConn(cc)
		c.muxes[k] = m
	}
	return m
}

// Leader asks the running nodes who leads and returns its index (-1).
func (c *Cluster) Leader(ctx context.Context) int {
	for _, n := range c.Nodes {
		if n.cmd == nil || n.paused {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		st, err := pb.NewClusterServiceClient(c.Conn(n.GRPC)).GetClusterStatus(cctx, &pb.GetClusterStatusRequest{})
		cancel()
		if err == nil && st.LeaderId != "" {
			for i, m := range c.Nodes {
				if m.ID == st.LeaderId {
					return i
				}
			}
		}
	}
	return -1
}

// WaitServing waits until a linearizable read succeeds through some node.
func (c *Cluster) WaitServing(ctx context.Context, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		for _, n := range c.Nodes {
			if n.cmd == nil || n.paused {
				continue
			}
			cctx, cancel := context.WithTimeout(ctx, time.Second)
			_, err := pb.NewGrackleServiceClient(c.Conn(n.GRPC)).ListNamespaces(cctx, &pb.ListNamespacesRequest{Limit: 1})
			cancel()
			if err == nil {
				return nil
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("cluster: not serving within %v", within)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (c *Cluster) joinTarget(skip int) string {
	for i, n := range c.Nodes {
		if i != skip && n.cmd != nil && !n.paused {
			return n.GRPC
		}
	}
	return c.Nodes[(skip+1)%len(c.Nodes)].GRPC
}

// Replace removes node i from the membership, wipes it, and adds it back
// as a fresh node that joins through another member.
func (c *Cluster) Replace(ctx context.Context, i int) error {
	n := c.Nodes[i]
	via := c.joinTarget(i)
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	_, err := pb.NewClusterServiceClient(c.Conn(via)).RemoveMember(cctx, &pb.RemoveMemberRequest{NodeId: n.ID})
	cancel()
	if err != nil {
		return fmt.Errorf("remove %s: %w", n.ID, err)
	}
	c.Kill(i)
	if err := os.RemoveAll(n.DataDir); err != nil {
		return err
	}
	n.joined = true
	return c.start(i, "--join", via)
}

// TransferLeadership asks the leader to hand over to any other voter.
func (c *Cluster) TransferLeadership(ctx context.Context) error {
	li := c.Leader(ctx)
	if li < 0 {
		return fmt.Errorf("no leader")
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err := pb.NewClusterServiceClient(c.Conn(c.Nodes[li].GRPC)).TransferLeadership(cctx, &pb.TransferLeadershipRequest{})
	return err
}

// HealAll heals the network, resumes paused nodes and restarts killed ones.
func (c *Cluster) HealAll() error {
	err := c.Heal()
	for i := range c.Nodes {
		c.Resume(i)
		if e := c.Restart(i); e != nil && err == nil {
			err = e
		}
	}
	return err
}

// Close kills every node and removes the network. Logs stay in Dir.
func (c *Cluster) Close() {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	for _, m := range c.muxes {
		m.Close()
	}
	for _, cc := range c.conns {
		cc.Close()
	}
	c.mu.Unlock()
	for i := range c.Nodes {
		if c.Nodes[i].cmd != nil {
			_ = c.Nodes[i].cmd.Process.Signal(syscall.SIGCONT)
		}
		c.Kill(i)
	}
	c.teardownNetwork()
}
