package server

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"

	"github.com/grackle-coord/grackle/acl"
	"github.com/grackle-coord/grackle/internal/connlimit"
	"github.com/grackle-coord/grackle/internal/flowwindow"
	"github.com/grackle-coord/grackle/tlsutil"
)

// security is what a node's TLS flags loaded.
type security struct {
	api  *tlsutil.Server // nil: the client API is plaintext
	peer *tlsutil.Peer   // nil: Raft and forwarding are plaintext
}

func loadSecurity(cfg Config) (security, error) {
	var sec security
	var err error
	if cfg.TLSCertFile != "" || cfg.TLSKeyFile != "" || cfg.TLSClientCAFile != "" {
		if sec.api, err = tlsutil.LoadServer(cfg.TLSCertFile, cfg.TLSKeyFile, cfg.TLSClientCAFile); err != nil {
			return sec, err
		}
	}
	if cfg.PeerTLSCertFile != "" || cfg.PeerTLSKeyFile != "" || cfg.PeerTLSCAFile != "" {
		if sec.peer, err = tlsutil.LoadPeer(cfg.PeerTLSCertFile, cfg.PeerTLSKeyFile, cfg.PeerTLSCAFile); err != nil {
			return sec, err
		}
	}
	if sec.api != nil {
		sec.api.Peer = sec.peer
	}
	return sec, nil
}

// peerDialCreds are the credentials a node dials another node's gRPC port
// with (forwarding to the leader, joining): the port's own scheme, and the
// peer identity when the port is TLS and peer TLS is on.
func (sec security) peerDialCreds() credentials.TransportCredentials {
	switch {
	case sec.api == nil:
		return insecure.NewCredentials()
	case sec.peer != nil:
		return tlsutil.ClientCreds(func() *tls.Config {
			c := sec.peer.ClientConfig("")
			c.NextProtos = []string{tlsutil.PeerALPN}
			return c
		}, nil)
	default:
		// No peer identity to offer: verify the leader's API certificate
		// against the system roots (Start warns about this setup).
		return tlsutil.ClientCreds(func() *tls.Config { return &tls.Config{MinVersion: tlsutil.MinVersion} }, nil)
	}
}

// reload re-reads every certificate, key and CA file; a file that does not
// load keeps its old contents in use.
func (sec security) reload() error {
	var errs []error
	if sec.api != nil {
		errs = append(errs, sec.api.Reload())
	}
	if sec.peer != nil {
		errs = append(errs, sec.peer.Reload())
	}
	return errors.Join(errs...)
}

// Reload re-reads the TLS files (what SIGHUP does): new connections get
// the new certificates, established ones stay. A file that fails to load
// is logged and the old one stays in use.
func (s *Server) Reload() error {
	err := s.sec.reload()
	if err != nil {
		s.log.Error("TLS reload: kept the certificates in use", "error", err)
	} else if s.sec.api != nil || s.sec.peer != nil {
		s.log.Info("TLS reload: certificates re-read")
	}
	// Then every other part's hook (OnReload): the log level, ...
	return errors.Join(err, s.runReloadHooks())
}

// ReloadOn calls Reload on each of the signals until ctx ends.
func (s *Server) ReloadOn(ctx context.Context, sigs ...os.Signal) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, sigs...)
	go func() {
		defer signal.Stop(ch)
		for {
			select {
			case <-ctx.Done():
				return
			case <-s.done:
				return
			case <-ch:
				_ = s.Reload()
			}
		}
	}()
}

// limit bounds a listener's open connections: n in all, perAddress from
// one network address, so that one host cannot take every slot (its
// connections past the bound are closed at once, logged at most once a
// minute per port). With a tracker of the port's calls, each new connection
// past nine tenths of n first closes the connection idle longest (no call
// for at least the tracker's MinIdle).
func limit(l net.Listener, n, perAddress int, tracker *connlimit.Idle, port string, log hclog.Logger) net.Listener {
	var last atomic.Int64
	pressure := 0
	if tracker != nil && n > 0 {
		pressure = n * 9 / 10
	}
	return connlimit.New(l, connlimit.Config{Max: n, PerAddress: perAddress, Pressure: pressure, Tracker: tracker, Refused: func(addr string) {
		now := time.Now().Unix()
		if prev := last.Load(); now-prev >= 60 && last.CompareAndSwap(prev, now) {
			log.Warn("refused connections: their address has every connection it may open (repeats are not logged for a minute)",
				"port", port, "remote", addr, "max_per_address", perAddress)
		}
	}})
}

// grpcServerOptions bound handshakes and idle connections.
func (c Config) grpcServerOptions() []grpc.ServerOption {
	return append([]grpc.ServerOption{
		grpc.ConnectionTimeout(c.HandshakeTimeout),
		grpc.KeepaliveParams(keepalive.ServerParameters{MaxConnectionIdle: c.IdleTimeout}),
		// Calls run on a pool of long-lived goroutines instead of a new one
		// each: a new goroutine starts on a small stack and grows it (copies
		// it) on every call, which was 5 % of the leader's CPU under load.
		// A call that finds every worker busy still gets its own goroutine.
		grpc.NumStreamWorkers(streamWorkers),
	}, flowwindow.ServerOptions()...) // no PING per call
}

// pressureIdle is how long a client connection must have had no call
// before it gives way to a new connection on a port nine tenths full.
const pressureIdle = 10 * time.Second

// streamWorkers is the size of the gRPC server's pool of call goroutines:
// above the calls a busy node serves at once (the benchmark's 64 workers,
// each with one call in flight), small beside its memory (a few KiB of
// stack each).
const streamWorkers = 128

// tlsRequired is the answer of a TLS port to a plaintext gRPC client.
func tlsRequired() error {
	st := status.New(codes.FailedPrecondition, tlsutil.TLSRequiredMessage)
	if d, err := st.WithDetails(&errdetails.ErrorInfo{Reason: tlsutil.ReasonTLSRequired, Domain: tlsutil.ErrorDomain}); err == nil {
		st = d
	}
	return st.Err()
}

// plaintextRefuser answers every call on a TLS port's plaintext side with
// tlsRequired.
func (c Config) plaintextRefuser() *grpc.Server {
	return grpc.NewServer(append(c.grpcServerOptions(), grpc.UnknownServiceHandler(func(any, grpc.ServerStream) error {
		return tlsRequired()
	}))...)
}

// requireClientCert guards the HTTP port's endpoints other than /healthz and /readyz
// with mutual TLS: the handshake asks for a client certificate and verifies
// one that is given; this refuses a request that gave none.
func requireClientCert(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthz" && r.URL.Path != "/readyz" && !strings.HasPrefix(r.URL.Path, "/healthz/") &&
			(r.TLS == nil || len(r.TLS.VerifiedChains) == 0) {
			http.Error(w, "a client certificate signed by the client CA is required", http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// aclChecker is the access control of a node: off unless --acl.
type aclChecker struct {
	on bool
	c  *acl.Checker
}

func (a aclChecker) authorize() func(context.Context) error {
	if !a.on {
		return nil
	}
	return a.c.Authorize
}
