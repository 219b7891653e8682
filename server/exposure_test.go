package server

import (
	"errors"
	"os"
	"strings"
	"testing"
)

// Every listener beyond loopback without what protects it, and every join
// beyond loopback without access control, is refused naming the flags
// that fix it, unless --insecure; the default single node passes.
func TestCheckExposure(t *testing.T) {
	apiTLS := func(c *Config) { c.TLSCertFile, c.TLSKeyFile = "api.crt", "api.key" }
	peerTLS := func(c *Config) { c.PeerTLSCertFile, c.PeerTLSKeyFile, c.PeerTLSCAFile = "p.crt", "p.key", "p-ca.crt" }
	acl := func(c *Config) { c.ACL = true }
	insecure := func(c *Config) { c.Insecure = true }
	httpNone := func(c *Config) { c.HTTPClientCert = HTTPClientCertNone }
	addrs := func(grpc, raft, http string) func(*Config) {
		return func(c *Config) { c.GRPCAddr, c.RaftAddr, c.HTTPAddr = grpc, raft, http }
	}
	all := addrs("0.0.0.0:7420", "0.0.0.0:7421", "0.0.0.0:7422")
	join := func(target string) func(*Config) { return func(c *Config) { c.Join = target } }
	for _, c := range []struct {
		name  string
		set   []func(*Config)
		flags []string // the --flags refused, in order; nil: accepted
		fix   []string // words the message must carry
	}{
		{"default single node", nil, nil, nil},
		{"zero config (Start's defaults)", []func(*Config){addrs("", "", "")}, nil, nil},
		{"loopback names", []func(*Config){addrs("localhost:7420", "[::1]:7421", "127.0.0.2:7422")}, nil, nil},
		{"every port on 0.0.0.0, plaintext", []func(*Config){all}, []string{"grpc-addr", "http-addr", "raft-addr"},
			[]string{"--grpc-addr 0.0.0.0:7420", "--tls-cert-file", "--tls-key-file", "--acl", "--http-addr 0.0.0.0:7422",
				"--raft-addr 0.0.0.0:7421", "--peer-tls-cert-file", "--peer-tls-key-file", "--peer-tls-ca-file", "--insecure"}},
		{"wildcard [::]", []func(*Config){addrs("[::]:7420", "127.0.0.1:7421", "")}, []string{"grpc-addr"}, []string{"--grpc-addr [::]:7420"}},
		{"empty host", []func(*Config){addrs(":7420", "127.0.0.1:7421", "")}, []string{"grpc-addr"}, nil},
		{"a host's address", []func(*Config){addrs("127.0.0.1:7420", "10.0.0.1:7421", "")}, []string{"raft-addr"}, []string{"--raft-addr 10.0.0.1:7421"}},
		{"a host name is not resolved", []func(*Config){addrs("127.0.0.1:7420", "127.0.0.1:7421", "n1:7422")}, []string{"http-addr"}, nil},
		{"every layer on", []func(*Config){all, apiTLS, peerTLS, acl}, nil, nil},
		{"TLS without --acl", []func(*Config){all, apiTLS, peerTLS}, []string{"grpc-addr"}, []string{"without --acl", "give --acl"}},
		{"--acl without TLS", []func(*Config){all, peerTLS, acl}, []string{"grpc-addr", "http-addr"}, []string{"without TLS"}},
		{"no peer TLS", []func(*Config){all, apiTLS, acl}, []string{"raft-addr"}, nil},
		{"peer TLS missing its CA", []func(*Config){all, apiTLS, acl, peerTLS, func(c *Config) { c.PeerTLSCAFile = "" }}, []string{"raft-addr"}, nil},
		{"HTTP off", []func(*Config){addrs("127.0.0.1:7420", "127.0.0.1:7421", "")}, nil, nil},
		{"plaintext on 0.0.0.0 with --insecure", []func(*Config){all, insecure}, nil, nil},
		{"HTTP without client certificates, with --acl", []func(*Config){all, apiTLS, peerTLS, acl, httpNone}, nil, nil},
		{"HTTP without client certificates, without --acl", []func(*Config){addrs("127.0.0.1:7420", "127.0.0.1:7421", "0.0.0.0:7422"), apiTLS, httpNone},
			[]string{"http-addr"}, []string{"--http-addr 0.0.0.0:7422", "--http-client-cert none and without --acl", "give --acl", "--http-client-cert require"}},
		{"HTTP without client certificates on loopback", []func(*Config){apiTLS, httpNone}, nil, nil},
		{"HTTP without client certificates, without --acl, --insecure", []func(*Config){all, apiTLS, peerTLS, httpNone, insecure}, nil, nil},
		{"join on loopback", []func(*Config){join("127.0.0.1:7430")}, nil, nil},
		{"join beyond loopback", []func(*Config){join("10.0.0.1:7420")}, []string{"join"},
			[]string{"--join 10.0.0.1:7420", "--acl on every node", "--join-token", "--insecure"}},
		{"join advertising beyond loopback", []func(*Config){addrs("127.0.0.1:7420", "0.0.0.0:7421", ""), peerTLS, join("127.0.0.1:7430"),
			func(c *Config) { c.AdvertiseRaft = "n4:7421" }}, []string{"join"}, nil},
		{"join beyond loopback with --acl", []func(*Config){all, apiTLS, peerTLS, acl, join("10.0.0.1:7420")}, nil, nil},
		{"join beyond loopback with --insecure", []func(*Config){all, insecure, join("10.0.0.1:7420")}, nil, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := DefaultConfig()
			for _, f := range c.set {
				f(&cfg)
			}
			err := CheckExposure(cfg)
			if c.flags == nil {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var xe *ExposureError
			if !errors.As(err, &xe) {
				t.Fatalf("got %v, want an *ExposureError for %v", err, c.flags)
			}
			var got []string
			for _, x := range xe.Exposures {
				got = append(got, x.Flag)
			}
			if strings.Join(got, ",") != strings.Join(c.flags, ",") {
				t.Fatalf("refused %v, want %v (%v)", got, c.flags, err)
			}
			for _, w := range append(c.fix, "--insecure") {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("message lacks %q: %v", w, err)
				}
			}
		})
	}
}

// Start refuses such a configuration before it binds or writes anything.
func TestStartRefusesExposure(t *testing.T) {
	dir := t.TempDir() + "/data"
	cfg := DefaultConfig()
	cfg.DataDir, cfg.GRPCAddr, cfg.RaftAddr, cfg.HTTPAddr = dir, "127.0.0.1:0", "127.0.0.1:0", ""
	cfg.Join = "10.0.0.1:7420" // never dialed: refused first
	s, err := Start(cfg, nil)
	if err == nil {
		s.Close()
		t.Fatal("started")
	}
	var xe *ExposureError
	if !errors.As(err, &xe) {
		t.Fatalf("got %v, want an *ExposureError", err)
	}
	if _, statErr := os.Stat(dir); !os.IsNotExist(statErr) {
		t.Fatalf("data dir made before the refusal: %v", statErr)
	}
}

// --http-client-cert takes require or none, and none needs TLS (it means
// HTTPS without client certificates), whatever --insecure says; each
// refusal names the flags.
func TestCheckHTTPClientCert(t *testing.T) {
	for _, c := range []struct {
		name string
		set  func(*Config)
		want string // "" accepted, else words of the refusal
	}{
		{"default", func(*Config) {}, ""},
		{"empty (Start's default)", func(c *Config) { c.HTTPClientCert = "" }, ""},
		{"require without TLS", func(c *Config) { c.HTTPClientCert = "require" }, ""},
		{"none with TLS", func(c *Config) { c.HTTPClientCert, c.TLSCertFile, c.TLSKeyFile = "none", "a.crt", "a.key" }, ""},
		{"none without TLS", func(c *Config) { c.HTTPClientCert = "none" }, "--http-client-cert none serves the HTTP port over TLS without client certificates: give --tls-cert-file and --tls-key-file"},
		{"none without TLS, --insecure", func(c *Config) { c.HTTPClientCert, c.Insecure = "none", true }, "give --tls-cert-file and --tls-key-file"},
		{"none with a certificate but no key", func(c *Config) { c.HTTPClientCert, c.TLSCertFile = "none", "a.crt" }, "--tls-key-file"},
		{"unknown value", func(c *Config) { c.HTTPClientCert = "optional" }, `--http-client-cert: must be require or none, got "optional"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := DefaultConfig()
			c.set(&cfg)
			err := CheckHTTPClientCert(cfg)
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("got %v, want a refusal with %q", err, c.want)
			case err != nil && strings.Contains(err.Error(), "\n"):
				t.Fatalf("refusal spans lines: %q", err)
			}
		})
	}
}
