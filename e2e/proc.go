// Package e2e runs the real grackle binary as separate processes on
// loopback: kill -9, SIGSTOP/SIGCONT and restarts of real nodes.
package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// Binary builds cmd/grackle once per test binary and returns its path.
func Binary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "grackle-e2e-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "grackle")
		cmd := exec.Command("go", "build", "-o", binPath, "github.com/grackle-coord/grackle/cmd/grackle")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// FreePorts returns n loopback ports that were free a moment ago.
func FreePorts(t testing.TB, n int) []int {
	t.Helper()
	var ls []net.Listener
	var ports []int
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	for _, l := range ls {
		l.Close()
	}
	return ports
}

// Node is one grackle server process.
type Node struct {
	ID       string
	GRPC     string
	Raft     string
	DataDir  string
	Args     []string
	Env      []string // added to this process's environment (e.g. GOMEMLIMIT)
	LogPath  string
	cmd      *exec.Cmd
	waitDone chan struct{}
}

// Proc manages node processes for one test and kills them all at the end.
type Proc struct {
	t     testing.TB
	bin   string
	Nodes []*Node
}

// NewCluster prepares n nodes with static bootstrap (--initial-members).
func NewCluster(t testing.TB, n int, extra ...string) *Proc {
	t.Helper()
	p := &Proc{t: t, bin: Binary(t)}
	ports := FreePorts(t, 2*n)
	var members []string
	for i := 0; i < n; i++ {
		nd := &Node{ID: fmt.Sprintf("n%d", i+1), GRPC: fmt.Sprintf("127.0.0.1:%d", ports[2*i]), Raft: fmt.Sprintf("127.0.0.1:%d", ports[2*i+1]),
			DataDir: filepath.Join(t.TempDir(), "data")}
		members = append(members, nd.ID+"="+nd.Raft+"="+nd.GRPC)
		p.Nodes = append(p.Nodes, nd)
	}
	for _, nd := range p.Nodes {
		nd.Args = append([]string{"server", "--node-id", nd.ID, "--data-dir", nd.DataDir, "--grpc-addr", nd.GRPC, "--raft-addr", nd.Raft,
			"--http-addr", "", "--log-level", "warn"}, extra...)
		if n > 1 {
			nd.Args = append(nd.Args, "--initial-members", strings.Join(members, ","))
		}
		nd.LogPath = filepath.Join(t.TempDir(), nd.ID+".log")
	}
	t.Cleanup(p.KillAll)
	return p
}

// Start starts (or restarts) node i.
func (p *Proc) Start(i int) {
	p.t.Helper()
	nd := p.Nodes[i]
	logf, err := os.OpenFile(nd.LogPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		p.t.Fatal(err)
	}
	cmd := exec.Command(p.bin, nd.Args...)
	if len(nd.Env) > 0 {
		cmd.Env = append(os.Environ(), nd.Env...)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		p.t.Fatal(err)
	}
	nd.cmd = cmd
	nd.waitDone = make(chan struct{})
	go func() { cmd.Wait(); logf.Close(); close(nd.waitDone) }()
}

// StartAll starts every node.
func (p *Proc) StartAll() {
	for i := range p.Nodes {
		p.Start(i)
	}
}

// Signal sends sig to node i.
func (p *Proc) Signal(i int, sig syscall.Signal) {
	if nd := p.Nodes[i]; nd.cmd != nil && nd.cmd.Process != nil {
		nd.cmd.Process.Signal(sig)
	}
}

// Kill9 kills node i with SIGKILL and waits for it to exit.
func (p *Proc) Kill9(i int) {
	nd := p.Nodes[i]
	if nd.cmd == nil {
		return
	}
	nd.cmd.Process.Signal(syscall.SIGCONT)
	nd.cmd.Process.Kill()
	<-nd.waitDone
	nd.cmd = nil
}

// KillAll kills every node; on failure it prints their logs.
func (p *Proc) KillAll() {
	for i := range p.Nodes {
		p.Kill9(i)
	}
	if p.t.Failed() {
		for _, nd := range p.Nodes {
			b, _ := os.ReadFile(nd.LogPath)
			p.t.Logf("---- log of %s ----\n%s", nd.ID, tail(string(b), 4000))
		}
	}
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}

// Dial connects to node i's gRPC address.
func (p *Proc) Dial(i int) *grpc.ClientConn {
	p.t.Helper()
	cc, err := grpc.NewClient(p.Nodes[i].GRPC, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		p.t.Fatal(err)
	}
	p.t.Cleanup(func() { cc.Close() })
	return cc
}

// WaitLeader waits until node i answers a linearizable read, and returns
// the leader's id as i sees it.
func (p *Proc) WaitLeader(i int, within time.Duration) string {
	p.t.Helper()
	cc := p.Dial(i)
	deadline := time.Now().Add(within)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := pb.NewGrackleServiceClient(cc).ListNamespaces(ctx, &pb.ListNamespacesRequest{})
		var st *pb.GetClusterStatusResponse
		if err == nil {
			st, err = pb.NewClusterServiceClient(cc).GetClusterStatus(ctx, &pb.GetClusterStatusRequest{})
		}
		cancel()
		if err == nil && st.LeaderId != "" {
			return st.LeaderId
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("node %s: no serving leader within %v: %v", p.Nodes[i].ID, within, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Index returns the index of the node with id.
func (p *Proc) Index(id string) int {
	for i, nd := range p.Nodes {
		if nd.ID == id {
			return i
		}
	}
	return -1
}

func readFile(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}
