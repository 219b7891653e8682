package server

import (
	"fmt"
	"net/http"

	"github.com/grackle-coord/grackle/acl"
	"github.com/grackle-coord/grackle/fsm"
	"github.com/grackle-coord/grackle/tlsutil"
)

// The values of --http-client-cert (Config.HTTPClientCert).
const (
	// HTTPClientCertRequire: the HTTP port asks what the gRPC port asks, a
	// certificate of --tls-client-ca-file when that is set, for every
	// endpoint but /healthz and /readyz.
	HTTPClientCertRequire = "require"
	// HTTPClientCertNone: the HTTP port is HTTPS with the server
	// certificate only and asks for no client certificate (so a browser
	// without an imported one reaches the web view); an access token
	// guards /status, /metrics, the web view's data and /debug/pprof/
	// instead, while the gRPC port keeps its mutual TLS (as Consul's
	// verify_incoming_https apart from verify_incoming_rpc).
	HTTPClientCertNone = "none"
)

// CheckHTTPClientCert refuses an --http-client-cert that no node can
// serve as asked, whatever --insecure says: an unknown value, or none
// without TLS (none means HTTPS without client certificates; without
// --tls-cert-file the port would be plaintext, not what was asked). None
// without --acl beyond loopback is an exposure instead (Exposures).
func CheckHTTPClientCert(cfg Config) error {
	switch cfg.HTTPClientCert {
	case "", HTTPClientCertRequire:
		return nil
	case HTTPClientCertNone:
	default:
		return fmt.Errorf("--http-client-cert: must be %s or %s, got %q", HTTPClientCertRequire, HTTPClientCertNone, cfg.HTTPClientCert)
	}
	if cfg.TLSCertFile == "" || cfg.TLSKeyFile == "" {
		return fmt.Errorf("--http-client-cert %s serves the HTTP port over TLS without client certificates: give --tls-cert-file and --tls-key-file too (or drop --http-client-cert)", HTTPClientCertNone)
	}
	return nil
}

// httpWithoutClientCert reports whether the HTTP port is HTTPS that asks
// for no client certificate, its endpoints guarded by tokens.
func (s *Server) httpWithoutClientCert() bool {
	return s.sec.api != nil && s.cfg.HTTPClientCert == HTTPClientCertNone
}

// httpClientCerts is what the HTTP port's TLS asks of clients.
func (s *Server) httpClientCerts() tlsutil.ClientCerts {
	if s.httpWithoutClientCert() {
		return tlsutil.NoClientCert
	}
	return tlsutil.VerifyClientCertIfGiven
}

// pprofNeed is what /debug/pprof/ needs of a token when no client
// certificate guards it: admin on every namespace (a profile shows the
// node's internals and costs it CPU while it is taken).
var pprofNeed = acl.Need{Role: fsm.RoleAdmin, Namespace: fsm.AnyNamespace}

// tokenGuard serves next only to a request whose bearer token meets need
// (when access control is on); method names the call in a refusal.
//
// /metrics takes /status's rule (any valid token, open before the
// cluster's first token exists): it tells no more than /status does (no
// series carries a namespace, semaphore or lease name), and Prometheus
// sends a token as its scrape config's authorization (credentials_file).
func (s *Server) tokenGuard(method string, need acl.Need, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := s.checkHTTPNeed(r, method, need); err != nil {
			writeRefusal(w, err)
			return
		}
		next.ServeHTTP(w, r)
	})
}
