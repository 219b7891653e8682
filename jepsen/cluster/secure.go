package cluster

import (
	"context"
	"crypto/tls"
	"fmt"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grackle-coord/grackle/apierr"
	"github.com/grackle-coord/grackle/client"
	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
	"github.com/grackle-coord/grackle/tlsutil"
)

// Secure runs every node with all of docs/SECURITY.md's layers: client
// mutual TLS, peer TLS and access control. The certificates are made at
// Start by CertScript (deploy/gen-certs.sh) into Dir/certs, each node's
// naming its own address in its namespace; the first token is
// bootstrapped once the nodes are up and every connection of the cluster
// (Conn) sends it.
type Secure struct {
	CertScript string // path of deploy/gen-certs.sh
}

// secureState is what a secure cluster keeps: the files, the client's TLS
// configuration and the admin token.
type secureState struct {
	dir       string
	clientTLS *tls.Config
	admin     atomic.Value // string: the bootstrapped admin token ("" until then)

	mu        sync.Mutex
	handshake []string       // handshake errors that no retry fixes (tlsutil.Permanent)
	refused   map[string]int // harness calls refused Unauthenticated/PermissionDenied, by "method code reason"
}

func (s *secureState) adminToken() string {
	t, _ := s.admin.Load().(string)
	return t
}

// makeCerts runs the certificate script for every node, with the node's
// IP as an extra subject alternative name (peers dial IP:port and check
// the certificate names that host).
func (c *Cluster) makeCerts() error {
	s := &secureState{dir: filepath.Join(c.cfg.Dir, "certs"), refused: map[string]int{}}
	args := []string{c.cfg.Secure.CertScript, s.dir}
	for _, n := range c.Nodes {
		args = append(args, n.ID+"=IP:"+n.IP)
	}
	if out, err := exec.Command("bash", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("certificates: %v: %s", err, strings.TrimSpace(string(out)))
	}
	cfg, err := tlsutil.ClientConfig(filepath.Join(s.dir, "api-ca.crt"), filepath.Join(s.dir, "client.crt"), filepath.Join(s.dir, "client.key"))
	if err != nil {
		return err
	}
	s.clientTLS = cfg
	s.admin.Store("")
	c.sec = s
	return nil
}

// secureArgs are node n's TLS and access-control flags.
func (c *Cluster) secureArgs(n *Node) []string {
	d := c.sec.dir
	f := func(name string) string { return filepath.Join(d, name) }
	return []string{
		"--tls-cert-file", f(n.ID + "-api.crt"), "--tls-key-file", f(n.ID + "-api.key"), "--tls-client-ca-file", f("api-ca.crt"),
		"--peer-tls-cert-file", f(n.ID + "-peer.crt"), "--peer-tls-key-file", f(n.ID + "-peer.key"), "--peer-tls-ca-file", f("peer-ca.crt"),
		"--acl",
	}
}

// joinEnv gives a joining node the admin token (by environment, not a
// flag: flags show in ps).
func (c *Cluster) joinEnv() []string {
	if c.sec == nil {
		return nil
	}
	return []string{"GRACKLE_JOIN_TOKEN=" + c.sec.adminToken()}
}

// newClient is a client of the cluster package with the cluster's TLS and
// admin token.
func (c *Cluster) newClient(ctx context.Context) (*client.Client, error) {
	cfg := client.Config{Endpoints: c.Endpoints(), DialTimeout: 10 * time.Second}
	if c.sec != nil {
		cfg.TLS, cfg.Token = c.sec.clientTLS, c.sec.adminToken()
	}
	return client.New(ctx, cfg)
}

// bootstrap creates the first token (admin on "*") through the leader.
// Bootstrap succeeds once per cluster: an answer lost on the way would
// leave the run without its secret, so any error ends the run.
func (c *Cluster) bootstrap(within time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	cl, err := c.newClient(ctx)
	if err != nil {
		return fmt.Errorf("acl bootstrap: %w", err)
	}
	defer cl.Close()
	r, err := cl.Bootstrap(ctx, &pb.BootstrapRequest{Description: "jepsen harness"})
	if err != nil {
		return fmt.Errorf("acl bootstrap: %w", err)
	}
	c.sec.admin.Store(r.Secret)
	return nil
}

// CreateToken makes a token of role on namespace with the admin token
// and returns its secret. Only for a secure cluster.
func (c *Cluster) CreateToken(ctx context.Context, role, namespace string) (string, error) {
	if c.sec == nil {
		return "", fmt.Errorf("cluster: CreateToken needs a secure cluster")
	}
	cl, err := c.newClient(ctx)
	if err != nil {
		return "", err
	}
	defer cl.Close()
	r, err := cl.CreateToken(ctx, &pb.CreateTokenRequest{Role: role, Namespace: namespace, Description: "jepsen " + role})
	if err != nil {
		return "", fmt.Errorf("create %s token on %s: %w", role, namespace, err)
	}
	return r.Secret, nil
}

// Secured reports whether the cluster runs with TLS and access control.
func (c *Cluster) Secured() bool { return c.sec != nil }

// SecurityFindings are what went wrong with TLS and access control
// outside the recorded operations: handshake errors that no retry fixes
// and the harness's own calls (setup, nemeses, leader lookups) refused
// Unauthenticated or PermissionDenied. Both empty in a clean run.
func (c *Cluster) SecurityFindings() (handshake []string, refused []string) {
	if c.sec == nil {
		return nil, nil
	}
	c.sec.mu.Lock()
	defer c.sec.mu.Unlock()
	handshake = append(handshake, c.sec.handshake...)
	for k, n := range c.sec.refused {
		refused = append(refused, fmt.Sprintf("%s x%d", k, n))
	}
	sort.Strings(refused)
	return handshake, refused
}

// secureDialOptions are the transport credentials and token of a connection:
// token "" sends the admin token (read at each call, so connections made
// before the bootstrap send it too) and counts refusals of the harness's
// calls.
func (c *Cluster) secureDialOptions(token string) []grpc.DialOption {
	s := c.sec
	creds := tlsutil.ClientCreds(func() *tls.Config { return s.clientTLS }, func(err error) {
		if tlsutil.Permanent(err) {
			s.mu.Lock()
			if len(s.handshake) < 20 {
				s.handshake = append(s.handshake, err.Error())
			}
			s.mu.Unlock()
		}
	})
	opts := []grpc.DialOption{grpc.WithTransportCredentials(creds)}
	if token != "" {
		return append(opts, grpc.WithPerRPCCredentials(tlsutil.Token(token)))
	}
	return append(opts, grpc.WithPerRPCCredentials(adminCreds{s}),
		grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, o ...grpc.CallOption) error {
			err := invoker(ctx, method, req, reply, cc, o...)
			if code := status.Code(err); code == codes.Unauthenticated || code == codes.PermissionDenied {
				k := fmt.Sprintf("%s %s %s", method, code, apierr.ReasonOf(err))
				s.mu.Lock()
				s.refused[k]++
				s.mu.Unlock()
			}
			return err
		}))
}

// adminCreds send the admin token once it exists.
type adminCreds struct{ s *secureState }

func (a adminCreds) GetRequestMetadata(ctx context.Context, uri ...string) (map[string]string, error) {
	t := a.s.adminToken()
	if t == "" {
		return nil, nil
	}
	return tlsutil.Token(t).GetRequestMetadata(ctx, uri...)
}

func (adminCreds) RequireTransportSecurity() bool { return true }
