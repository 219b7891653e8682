package server_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/grackle-coord/grackle/client"
	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
	"github.com/grackle-coord/grackle/server"
	"github.com/grackle-coord/grackle/server/servertest"
	"github.com/grackle-coord/grackle/tlsutil"
)

// With --http-client-cert none, a node whose gRPC port requires client
// certificates serves its HTTP port over TLS without asking for one: a
// browser without an imported certificate gets the web view's page, and
// the ACL token guards everything with data (the view's API, /status,
// /metrics, the profiles), its refusals worded for a browser; /healthz and
// /readyz stay open; the gRPC port still refuses a client without a
// certificate.
func TestHTTPPortWithoutClientCerts(t *testing.T) {
	p := newPKI(t)
	c := servertest.New(t, p.dial(t))
	cfg := servertest.Config(t, "node1")
	p.node(&cfg)
	cfg.HTTPAddr, cfg.ACL, cfg.Pprof, cfg.HTTPClientCert = "127.0.0.1:0", true, true, server.HTTPClientCertNone
	s := c.StartNode(cfg)
	servertest.Eventually(t, "a leader", 20*time.Second, s.IsLeader)

	// The browser: it trusts the API's CA and has no certificate; the
	// handshake must never ask it for one (a browser would prompt).
	var asked atomic.Bool
	browserTLS, err := tlsutil.ClientConfig(p.api.Cert, "", "")
	if err != nil {
		t.Fatal(err)
	}
	browserTLS.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
		asked.Store(true)
		return &tls.Certificate{}, nil
	}
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: browserTLS}}
	base := "https://" + s.HTTPAddr()
	type answer struct {
		code   int
		body   string
		header http.Header
	}
	get := func(path, secret string) answer {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, base+path, nil)
		if secret != "" {
			req.Header.Set("Authorization", "Bearer "+secret)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return answer{resp.StatusCode, string(b), resp.Header}
	}
	refusal := func(a answer) (reason, message string) {
		t.Helper()
		var r struct{ Reason, Message string }
		if err := json.Unmarshal([]byte(a.body), &r); err != nil {
			t.Fatalf("refusal %d is not JSON: %q", a.code, a.body)
		}
		return r.Reason, r.Message
	}

	for _, path := range []string{"/healthz", "/readyz"} {
		servertest.Eventually(t, path+" ok without a token", 20*time.Second, func() bool { return get(path, "").code == http.StatusOK })
	}
	if a := get("/ui/", ""); a.code != http.StatusOK || !strings.Contains(a.body, `id="login"`) {
		t.Fatalf("GET /ui/ without a certificate or a token: %d, want 200 and the page with its sign-in form; %.200q", a.code, a.body)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var boot *pb.BootstrapResponse
	servertest.Eventually(t, "the ACL bootstrap", 20*time.Second, func() bool {
		boot, err = pb.NewACLServiceClient(c.Conn(0)).Bootstrap(ctx, &pb.BootstrapRequest{})
		return err == nil
	})
	c.SetToken(boot.Secret)
	if _, err := c.Client(0).CreateNamespace(ctx, &pb.CreateNamespaceRequest{Name: "over_https"}); err != nil {
		t.Fatal(err)
	}
	rd, err := pb.NewACLServiceClient(c.Conn(0)).CreateToken(ctx, &pb.CreateTokenRequest{Role: "read", Namespace: "*"})
	if err != nil {
		t.Fatal(err)
	}
	c.SetToken("")

	// The view's data: 401 without a token, in a browser's words.
	a := get("/ui/api/namespaces", "")
	reason, msg := refusal(a)
	if a.code != http.StatusUnauthorized || reason != "TOKEN_MISSING" || !strings.Contains(msg, "sign in with an ACL token") ||
		strings.Contains(msg, "--token") || strings.Contains(msg, "GRACKLE_TOKEN") || !strings.HasPrefix(a.header.Get("WWW-Authenticate"), "Bearer") {
		t.Fatalf("view's data without a token: %d %q %q (WWW-Authenticate %q), want 401 TOKEN_MISSING asking to sign in", a.code, reason, msg, a.header.Get("WWW-Authenticate"))
	}
	a = get("/ui/api/namespaces", "grk_not_a_token")
	if reason, msg := refusal(a); a.code != http.StatusUnauthorized || reason != "TOKEN_UNKNOWN" || !strings.Contains(msg, "sign in with another") {
		t.Fatalf("view's data with an unknown token: %d %q %q", a.code, reason, msg)
	}
	if a := get("/ui/api/namespaces", rd.Secret); a.code != http.StatusOK || !strings.Contains(a.body, "over_https") {
		t.Fatalf("view's data with a read token: %d %.300q, want 200 with the namespace", a.code, a.body)
	}

	// /status and /metrics: the token instead of the certificate.
	for _, path := range []string{"/status", "/metrics"} {
		a := get(path, "")
		reason, msg := refusal(a)
		if a.code != http.StatusUnauthorized || reason != "TOKEN_MISSING" || !strings.Contains(msg, "Authorization: Bearer") || strings.Contains(msg, "--token") {
			t.Fatalf("%s without a token: %d %q %q, want 401 TOKEN_MISSING saying how to send one", path, a.code, reason, msg)
		}
	}
	if a := get("/status", rd.Secret); a.code != http.StatusOK || !strings.Contains(a.body, `"node_id": "node1"`) {
		t.Fatalf("/status with a token: %d %.200q", a.code, a.body)
	}
	if a := get("/metrics", rd.Secret); a.code != http.StatusOK || !strings.Contains(a.body, "grackle_build_info") {
		t.Fatalf("/metrics with a token: %d %.200q", a.code, a.body)
	}
	// The profiles: admin only.
	if a := get("/debug/pprof/", rd.Secret); a.code != http.StatusForbidden {
		t.Fatalf("/debug/pprof/ with a read token: %d, want 403", a.code)
	}
	if a := get("/debug/pprof/", boot.Secret); a.code != http.StatusOK {
		t.Fatalf("/debug/pprof/ with the admin token: %d, want 200", a.code)
	}
	if asked.Load() {
		t.Fatal("the HTTP port asked the browser for a client certificate")
	}

	// The gRPC port keeps mutual TLS.
	noCert, err := tlsutil.ClientConfig(p.api.Cert, "", "")
	if err != nil {
		t.Fatal(err)
	}
	_, err = client.New(ctx, client.Config{Endpoints: []string{s.GRPCAddr()}, TLS: noCert, Token: rd.Secret, DialTimeout: 10 * time.Second})
	if !errors.Is(err, tlsutil.ErrClientCertRefused) {
		t.Fatalf("gRPC without a client certificate: %v, want ErrClientCertRefused", err)
	}
}

// By default the HTTP port of a node with a client CA asks for a client
// certificate, and without one only /healthz and /readyz answer (the
// browser's 403 is what --http-client-cert none removes).
func TestHTTPPortAsksForClientCertByDefault(t *testing.T) {
	p := newPKI(t)
	cfg := servertest.Config(t, "node1")
	p.node(&cfg)
	cfg.HTTPAddr, cfg.ACL = "127.0.0.1:0", true
	s, err := server.Start(cfg, servertest.Logger(t, "node1"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var asked atomic.Bool
	noCert, _ := tlsutil.ClientConfig(p.api.Cert, "", "")
	noCert.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
		asked.Store(true)
		return &tls.Certificate{}, nil
	}
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: noCert}}
	resp, err := hc.Get("https://" + s.HTTPAddr() + "/ui/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || !asked.Load() {
		t.Fatalf("GET /ui/ without a certificate: %d (asked for one: %v), want 403 after being asked", resp.StatusCode, asked.Load())
	}
}

// Start refuses --http-client-cert none without TLS before it binds or
// writes anything.
func TestStartRefusesHTTPClientCertNoneWithoutTLS(t *testing.T) {
	cfg := servertest.Config(t, "node1")
	cfg.DataDir = t.TempDir() + "/data"
	cfg.HTTPAddr, cfg.HTTPClientCert = "127.0.0.1:0", server.HTTPClientCertNone
	s, err := server.Start(cfg, servertest.Logger(t, "node1"))
	if err == nil {
		s.Close()
		t.Fatal("started")
	}
	if !strings.Contains(err.Error(), "--http-client-cert none") || !strings.Contains(err.Error(), "--tls-cert-file") {
		t.Fatalf("refusal %q does not name the flags", err)
	}
	if _, statErr := os.Stat(cfg.DataDir); !os.IsNotExist(statErr) {
		t.Fatalf("data dir made before the refusal: %v", statErr)
	}
}
