package server

import (
	"strings"

	"github.com/grackle-coord/grackle/internal/loopback"
)

// Exposure is a port (or the join) that reaches beyond loopback without
// what protects it: anyone who can reach it may call the API (and add
// members), read what it serves, or write to the Raft log.
type Exposure struct {
	Flag  string // the flag that opened it: "grpc-addr", "http-addr", "raft-addr" or "join"
	Addr  string // its address
	Lacks string // what it lacks, in words
	Fix   string // the flags that protect it
}

func (e Exposure) String() string {
	return "--" + e.Flag + " " + e.Addr + " " + e.Lacks + ": give " + e.Fix
}

// Exposures lists what cfg would open beyond loopback unprotected; nil
// for the default single node on loopback. A listen address is beyond
// loopback unless its host is a loopback IP or "localhost" (a wildcard
// such as 0.0.0.0, [::] or an empty host listens on every interface; a
// name is not resolved). The rules:
//
//   - the gRPC port needs client TLS and access control (--acl): without
//     TLS the tokens cross the network in the clear, without --acl anyone
//     who reaches the port may call anything, AddMember included;
//   - the HTTP port needs client TLS (/status, /metrics and the web view
//     are read over it). With --tls-client-ca-file it also asks for a
//     client certificate, except for /healthz and /readyz (they say only
//     ok or why not); with --http-client-cert none it asks for none, so
//     that a browser without an imported certificate reaches the web
//     view, and then it needs --acl as well: the token is what guards
//     /status, /metrics (Prometheus sends one from its scrape config's
//     authorization), the web view's data and the profiles, and without
//     access control there is none to ask for. The page itself (HTML, CSS
//     and JavaScript, no data) stays open: it holds the sign-in form;
//   - the Raft port needs peer TLS: without it anyone who reaches the
//     port can append entries to the log;
//   - a join without access control must stay on loopback: the join
//     target and this node's own addresses (what the members are asked
//     to add), since without --acl AddMember is open to anyone.
func Exposures(cfg Config) []Exposure {
	cfg = cfg.fill()
	apiTLS := cfg.TLSCertFile != "" && cfg.TLSKeyFile != ""
	peerTLS := cfg.PeerTLSCertFile != "" && cfg.PeerTLSKeyFile != "" && cfg.PeerTLSCAFile != ""
	const apiTLSFlags = "--tls-cert-file and --tls-key-file"
	var out []Exposure
	if !loopback.Addr(cfg.GRPCAddr) {
		switch {
		case !apiTLS && !cfg.ACL:
			out = append(out, Exposure{"grpc-addr", cfg.GRPCAddr, "is beyond loopback without TLS and without --acl", apiTLSFlags + " (TLS), and --acl (access control)"})
		case !apiTLS:
			out = append(out, Exposure{"grpc-addr", cfg.GRPCAddr, "is beyond loopback without TLS (tokens would cross the network in the clear)", apiTLSFlags})
		case !cfg.ACL:
			out = append(out, Exposure{"grpc-addr", cfg.GRPCAddr, "is beyond loopback without --acl (anyone who reaches it may call anything, AddMember included)", "--acl"})
		}
	}
	if cfg.HTTPAddr != "" && !loopback.Addr(cfg.HTTPAddr) {
		switch {
		case !apiTLS:
			out = append(out, Exposure{"http-addr", cfg.HTTPAddr, "is beyond loopback without TLS", apiTLSFlags + ` (or --http-addr "" to turn the HTTP port off)`})
		case cfg.HTTPClientCert == HTTPClientCertNone && !cfg.ACL:
			out = append(out, Exposure{"http-addr", cfg.HTTPAddr, "is beyond loopback with --http-client-cert none and without --acl (anyone who reaches it reads /status, /metrics and the web view)",
				"--acl (a token then guards them), or --http-client-cert require"})
		}
	}
	if !loopback.Addr(cfg.RaftAddr) && !peerTLS {
		out = append(out, Exposure{"raft-addr", cfg.RaftAddr, "is beyond loopback without peer TLS (anyone who reaches it can write to the Raft log)",
			"--peer-tls-cert-file, --peer-tls-key-file and --peer-tls-ca-file"})
	}
	if cfg.Join != "" && !cfg.ACL && !(loopback.Addr(cfg.Join) && loopback.Addr(orElse(cfg.AdvertiseRaft, cfg.RaftAddr)) &&
		loopback.Addr(orElse(cfg.AdvertiseGRPC, cfg.GRPCAddr))) {
		out = append(out, Exposure{"join", cfg.Join, "joins beyond loopback without access control (the members would let anyone add members the same way)",
			"--acl on every node, and --join-token here"})
	}
	return out
}

func orElse(v, def string) string {
	if v != "" {
		return v
	}
	return def
}

// ExposureError is Start's refusal of a configuration that opens ports
// (or joins) beyond loopback unprotected, without --insecure.
type ExposureError struct {
	Exposures []Exposure
}

func (e *ExposureError) Error() string {
	parts := make([]string, len(e.Exposures))
	for i, x := range e.Exposures {
		parts[i] = x.String()
	}
	return strings.Join(parts, "; ") + "; or --insecure to accept plaintext without access control (docs/SECURITY.md, Threat model)"
}

// CheckExposure refuses what Exposures lists unless cfg.Insecure says
// the operator chose it (as CockroachDB's --insecure).
func CheckExposure(cfg Config) error {
	if cfg.Insecure {
		return nil
	}
	if x := Exposures(cfg); len(x) > 0 {
		return &ExposureError{Exposures: x}
	}
	return nil
}
