package main

import (
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/grackle-coord/grackle/server"
	"github.com/grackle-coord/grackle/server/servertest"
	"github.com/grackle-coord/grackle/tlsutil"
	"github.com/grackle-coord/grackle/tlsutil/tlstest"
)

// The CLI's --cacert/--cert/--key (and their GRACKLE_* variables) talk to a
// mutual-TLS node; without them the error says what to pass.
func TestCLIWithTLS(t *testing.T) {
	ca := tlstest.NewCA(t, "api-ca")
	cert, key := ca.Issue("cli")
	tc, err := tlsutil.ClientConfig(ca.Cert, cert, key)
	if err != nil {
		t.Fatal(err)
	}
	c := servertest.StartWith(t, 1, func(cfg *server.Config) {
		cfg.TLSCertFile, cfg.TLSKeyFile = ca.Issue(cfg.NodeID)
		cfg.TLSClientCAFile = ca.Cert
	}, grpc.WithTransportCredentials(credentials.NewTLS(tc)))
	addr := c.Nodes[0].GRPCAddr()

	r := runCLI(t, nil, "namespace", "create", "tls_ns", "--endpoints", addr, "--cacert", ca.Cert, "--cert", cert, "--key", key)
	if r.code != 0 {
		t.Fatalf("with flags: exit %d, stderr %q", r.code, r.stderr)
	}
	env := map[string]string{"GRACKLE_ENDPOINTS": addr, "GRACKLE_CACERT": ca.Cert, "GRACKLE_CERT": cert, "GRACKLE_KEY": key}
	r = runCLI(t, env, "namespace", "get", "tls_ns", "-o", "id")
	if r.code != 0 || strings.TrimSpace(r.stdout) != "tls_ns" {
		t.Fatalf("with environment: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}

	r = runCLI(t, nil, "cluster", "status", "--endpoints", addr)
	if r.code != exitCallFailed || !strings.Contains(r.stderr, "the server expects TLS: pass --cacert") {
		t.Fatalf("plaintext against TLS: exit %d, stderr %q", r.code, r.stderr)
	}
	r = runCLI(t, nil, "cluster", "status", "--endpoints", addr, "--cacert", ca.Cert)
	if r.code != exitCallFailed || !strings.Contains(r.stderr, "pass --cert and --key") {
		t.Fatalf("no client certificate against mutual TLS: exit %d, stderr %q", r.code, r.stderr)
	}
	r = runCLI(t, nil, "cluster", "status", "--endpoints", addr, "--cacert", ca.Cert, "--cert", cert)
	if r.code != exitUsage || !strings.Contains(r.stderr, "--cert and --key") {
		t.Fatalf("--cert without --key: exit %d, stderr %q", r.code, r.stderr)
	}

	plain := servertest.Start(t, 1, nil)
	r = runCLI(t, nil, "cluster", "status", "--endpoints", plain.Nodes[0].GRPCAddr(), "--cacert", ca.Cert)
	if r.code != exitCallFailed || !strings.Contains(r.stderr, "the server does not use TLS") {
		t.Fatalf("TLS against plaintext: exit %d, stderr %q", r.code, r.stderr)
	}
}
