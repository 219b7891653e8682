package server_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/grackle-coord/grackle/internal/syncbuf"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"github.com/grackle-coord/grackle/client"
	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
	"github.com/grackle-coord/grackle/server"
	"github.com/grackle-coord/grackle/server/servertest"
	"github.com/grackle-coord/grackle/tlsutil"
	"github.com/grackle-coord/grackle/tlsutil/tlstest"
)

// pki is a test deployment's certificates: one CA for the client API (it
// signs the nodes' API certificates and the clients'), one for peers.
type pki struct {
	api, peers *tlstest.CA
	clientCert string
	clientKey  string
}

func newPKI(t *testing.T) *pki {
	p := &pki{api: tlstest.NewCA(t, "api-ca"), peers: tlstest.NewCA(t, "peer-ca")}
	p.clientCert, p.clientKey = p.api.Issue("client-alice")
	return p
}

// node configures id for client mutual TLS and peer TLS.
func (p *pki) node(cfg *server.Config) {
	cfg.TLSCertFile, cfg.TLSKeyFile = p.api.Issue(cfg.NodeID + "-api")
	cfg.TLSClientCAFile = p.api.Cert
	cfg.PeerTLSCertFile, cfg.PeerTLSKeyFile = p.peers.Issue(cfg.NodeID + "-peer")
	cfg.PeerTLSCAFile = p.peers.Cert
}

func (p *pki) clientTLS(t *testing.T) *tls.Config {
	c, err := tlsutil.ClientConfig(p.api.Cert, p.clientCert, p.clientKey)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func (p *pki) dial(t *testing.T) grpc.DialOption {
	return grpc.WithTransportCredentials(credentials.NewTLS(p.clientTLS(t)))
}

func bufLogger(buf io.Writer) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{Name: "node", Level: hclog.Info, Output: buf})
}

// A 3-node cluster with peer TLS (Raft and forwarding) and client mutual
// TLS: writes through a follower reach every node.
func TestTLSClusterPeerTLSAndClientMTLS(t *testing.T) {
	p := newPKI(t)
	c := servertest.StartWith(t, 3, p.node, p.dial(t))
	f := c.Follower()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// Forwarded by a follower to the leader over peer TLS.
	if _, err := c.Client(f).CreateNamespace(ctx, &pb.CreateNamespaceRequest{Name: "tls_ns"}); err != nil {
		t.Fatalf("create through follower %d: %v", f, err)
	}
	servertest.Eventually(t, "every node applied the namespace", 20*time.Second, func() bool {
		for _, s := range c.Nodes {
			if s.FSM.Counts().Namespaces != 1 {
				return false
			}
		}
		return true
	})

	// The Go client with mutual TLS.
	cli, err := client.New(ctx, client.Config{Endpoints: []string{c.Nodes[f].GRPCAddr()}, TLS: p.clientTLS(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	if _, err := cli.GetNamespace(ctx, &pb.GetNamespaceRequest{NamespaceName: "tls_ns"}); err != nil {
		t.Fatal(err)
	}

	// A client without a certificate is refused by the handshake.
	noCert, err := tlsutil.ClientConfig(p.api.Cert, "", "")
	if err != nil {
		t.Fatal(err)
	}
	_, err = client.New(ctx, client.Config{Endpoints: []string{c.Nodes[0].GRPCAddr()}, TLS: noCert, DialTimeout: 10 * time.Second})
	if !errors.Is(err, tlsutil.ErrClientCertRefused) {
		t.Fatalf("a client without a certificate: %v, want ErrClientCertRefused", err)
	}
	t.Logf("no client certificate: %v", err)
}

// A node whose peer certificate comes from another CA can neither join
// through the gRPC port nor talk Raft, and the refusing node logs why.
func TestPeerFromAnotherCARefused(t *testing.T) {
	p := newPKI(t)
	var logs syncbuf.Buffer
	cfg := servertest.Config(t, "node1")
	p.node(&cfg)
	s, err := server.Start(cfg, bufLogger(&logs))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	rogueCA := tlstest.NewCA(t, "rogue-ca")
	rogueCert, rogueKey := rogueCA.Issue("rogue-peer")
	rogueKP, err := tlsutil.LoadKeyPair(rogueCert, rogueKey)
	if err != nil {
		t.Fatal(err)
	}
	// The rogue trusts the real peer CA (it only lacks a certificate of it).
	realCA, err := tlsutil.LoadCAPool(p.peers.Cert)
	if err != nil {
		t.Fatal(err)
	}
	rogue := &tlsutil.Peer{Cert: rogueKP, CA: realCA}

	// Raft: a forged connection is refused in the handshake.
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", s.RaftAddr(), rogue.ClientConfig(s.RaftAddr()))
	if err == nil {
		// TLS 1.3: the client may finish before the server's verdict; the
		// server's alert arrives on the first read.
		_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		_, err = conn.Read(make([]byte, 1))
		conn.Close()
	}
	if err == nil {
		t.Fatal("the Raft port accepted a peer certificate from another CA")
	}
	servertest.Eventually(t, "the refusal logged with its reason", 10*time.Second, func() bool {
		l := logs.String()
		return strings.Contains(l, "refused a Raft connection") && strings.Contains(l, "certificate signed by unknown authority")
	})

	// Plaintext bytes on the Raft port (a forged AppendEntries) never reach Raft.
	raw, err := net.Dial("tcp", s.RaftAddr())
	if err != nil {
		t.Fatal(err)
	}
	_, _ = raw.Write([]byte{0x00, 0x81, 0xa4, 'T', 'e', 'r', 'm', 0x01})
	_ = raw.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err = raw.Read(make([]byte, 64))
	raw.Close()
	if err == nil {
		t.Fatal("the Raft port answered plaintext")
	}

	// Joining through the gRPC port as a peer: refused.
	creds := tlsutil.ClientCreds(func() *tls.Config {
		c := rogue.ClientConfig("")
		c.NextProtos = []string{tlsutil.PeerALPN}
		return c
	}, nil)
	cc, err := grpc.NewClient(s.GRPCAddr(), grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = pb.NewClusterServiceClient(cc).AddMember(ctx, &pb.AddMemberRequest{NodeId: "rogue", RaftAddress: "127.0.0.1:1", GrpcAddress: "127.0.0.1:2"})
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("AddMember with a rogue peer certificate: %v, want Unavailable (handshake refused)", err)
	}
	if n := len(s.FSM.Members()); n > 1 {
		t.Fatalf("the cluster has %d members after a rogue join", n)
	}
}

// Plaintext against TLS, and TLS against plaintext, fail at once with an
// error that says so.
func TestPlaintextAgainstTLSFailsFastAndClearly(t *testing.T) {
	p := newPKI(t)
	c := servertest.StartWith(t, 1, p.node, p.dial(t))
	addr := c.Nodes[0].GRPCAddr()
	ctx := context.Background()
	const dialTimeout = 30 * time.Second

	start := time.Now()
	_, err := client.New(ctx, client.Config{Endpoints: []string{addr}, DialTimeout: dialTimeout})
	if err == nil {
		t.Fatal("a plaintext client connected to a TLS server")
	}
	if time.Since(start) >= dialTimeout {
		t.Fatalf("the plaintext client gave up only at its dial timeout: %v", err)
	}
	st, _ := status.FromError(err)
	if st.Code() != codes.FailedPrecondition || reason(st) != tlsutil.ReasonTLSRequired {
		t.Fatalf("plaintext against TLS: %v (code %s, reason %q), want FailedPrecondition with reason %s", err, st.Code(), reason(st), tlsutil.ReasonTLSRequired)
	}
	if !strings.Contains(err.Error(), "the server expects TLS: pass --cacert") {
		t.Fatalf("message does not say what to do: %v", err)
	}

	plain := servertest.Start(t, 1, nil)
	start = time.Now()
	_, err = client.New(ctx, client.Config{Endpoints: []string{plain.Nodes[0].GRPCAddr()}, TLS: p.clientTLS(t), DialTimeout: dialTimeout})
	if !errors.Is(err, tlsutil.ErrServerNotTLS) {
		t.Fatalf("TLS against plaintext: %v, want ErrServerNotTLS", err)
	}
	if time.Since(start) >= dialTimeout {
		t.Fatalf("the TLS client gave up only at its dial timeout: %v", err)
	}
}

func reason(st *status.Status) string {
	for _, d := range st.Details() {
		if ei, ok := d.(*errdetails.ErrorInfo); ok {
			return ei.Reason
		}
	}
	return ""
}

// servedSerial handshakes with addr and returns the serial number of the
// certificate the server presented.
func servedSerial(t *testing.T, addr string, p *pki) string {
	t.Helper()
	cfg := p.clientTLS(t)
	cfg.NextProtos = []string{"h2", "http/1.1"}
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, cfg)
	if err != nil {
		t.Fatalf("TLS dial %s: %v", addr, err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber.String()
}

func fileSerial(t *testing.T, file string) string {
	t.Helper()
	kp, err := tls.LoadX509KeyPair(file, strings.TrimSuffix(file, ".crt")+".key")
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(kp.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	return leaf.SerialNumber.String()
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	// Write beside and rename, as certificate tooling does.
	if err := os.WriteFile(to+".tmp", b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(to+".tmp", to); err != nil {
		t.Fatal(err)
	}
}

// SIGHUP re-reads the certificate: new connections get the new one, the
// established connection keeps working, and a bad file is rejected with a
// log line while the certificate in use stays.
func TestSIGHUPSwapsCertificate(t *testing.T) {
	p := newPKI(t)
	var logs syncbuf.Buffer
	cfg := servertest.Config(t, "node1")
	cfg.HTTPAddr = "127.0.0.1:0"
	p.node(&cfg)
	oldCert, oldKey := cfg.TLSCertFile, cfg.TLSKeyFile
	// The node serves copies, which the test replaces.
	cfg.TLSCertFile, cfg.TLSKeyFile = t.TempDir()+"/api.crt", t.TempDir()+"/api.key"
	copyFile(t, oldCert, cfg.TLSCertFile)
	copyFile(t, oldKey, cfg.TLSKeyFile)
	s, err := server.Start(cfg, bufLogger(&logs))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// A reload hook runs after the certificates were re-read: the event
	// that a SIGHUP's reload is done.
	reloaded := make(chan struct{}, 4)
	s.OnReload("test", func() error { reloaded <- struct{}{}; return nil })
	waitReload := func() {
		t.Helper()
		select {
		case <-reloaded:
		case <-time.After(30 * time.Second):
			t.Fatal("SIGHUP: no reload within 30s")
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s.ReloadOn(ctx, syscall.SIGHUP)

	cli, err := client.New(ctx, client.Config{Endpoints: []string{s.GRPCAddr()}, TLS: p.clientTLS(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	if got, want := servedSerial(t, s.GRPCAddr(), p), fileSerial(t, oldCert); got != want {
		t.Fatalf("served serial %s, want %s", got, want)
	}

	newCert, newKey := p.api.Issue("node1-api-renewed")
	copyFile(t, newCert, cfg.TLSCertFile)
	copyFile(t, newKey, cfg.TLSKeyFile)
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	want := fileSerial(t, newCert)
	waitReload()
	if got := servedSerial(t, s.GRPCAddr(), p); got != want {
		t.Fatalf("served serial %s after reload, want %s", got, want)
	}
	if got := servedSerial(t, s.HTTPAddr(), p); got != want {
		t.Fatalf("HTTP port serves serial %s after reload, want %s", got, want)
	}
	// The connection made before the reload still works.
	cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
	defer ccancel()
	if _, err := cli.ListNamespaces(cctx, &pb.ListNamespacesRequest{}); err != nil {
		t.Fatalf("established connection after reload: %v", err)
	}

	// A damaged file is rejected; the renewed certificate stays.
	if err := os.WriteFile(cfg.TLSCertFile, []byte("-----BEGIN CERTIFICATE-----\ngarbage\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitReload()
	// The operator is told (the log names what happened) ...
	if !strings.Contains(logs.String(), "TLS reload: kept the certificates in use") {
		t.Fatalf("the rejected reload is not logged: %s", logs.String())
	}
	// ... and the certificate in use stays.
	if got := servedSerial(t, s.GRPCAddr(), p); got != want {
		t.Fatalf("after a bad reload the server serves serial %s, want %s (the one in use)", got, want)
	}
}

// The HTTP port: TLS, /healthz open to probes without a certificate, the
// rest behind mutual TLS, and a plaintext request told to use HTTPS.
func TestHTTPPortTLS(t *testing.T) {
	p := newPKI(t)
	cfg := servertest.Config(t, "node1")
	cfg.HTTPAddr = "127.0.0.1:0"
	p.node(&cfg)
	s, err := server.Start(cfg, servertest.Logger(t, "node1"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	url := "https://" + s.HTTPAddr()
	noCert, _ := tlsutil.ClientConfig(p.api.Cert, "", "")
	anon := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: noCert}}
	mtls := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: p.clientTLS(t)}}
	get := func(c *http.Client, u string) int {
		t.Helper()
		resp, err := c.Get(u)
		if err != nil {
			t.Fatalf("GET %s: %v", u, err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	servertest.Eventually(t, "healthz ok", 20*time.Second, func() bool { return get(anon, url+"/healthz") == http.StatusOK })
	if code := get(anon, url+"/status"); code != http.StatusForbidden {
		t.Fatalf("/status without a client certificate: %d, want 403", code)
	}
	if code := get(mtls, url+"/status"); code != http.StatusOK {
		t.Fatalf("/status with a client certificate: %d, want 200", code)
	}
	plain := &http.Client{Timeout: 10 * time.Second}
	if code := get(plain, "http://"+s.HTTPAddr()+"/healthz"); code != http.StatusBadRequest {
		t.Fatalf("plaintext HTTP to the TLS port: %d, want 400", code)
	}
}
