package tlsutil

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc/credentials"

	"github.com/grackle-coord/grackle/apierr"
)

// ErrServerNotTLS is the handshake error of a TLS client whose server
// answered in plaintext.
var ErrServerNotTLS = errors.New("the server does not use TLS: drop --cacert, --cert and --key (or start the server with --tls-cert-file)")

// ReasonTLSRequired is the google.rpc.ErrorInfo reason of the error a TLS
// port answers a plaintext client with.
const ReasonTLSRequired = "TLS_REQUIRED"

// ErrorDomain is the ErrorInfo domain of the reasons above: apierr.Domain,
// the one domain of every Grackle reason.
const ErrorDomain = apierr.Domain

// TLSRequiredMessage is that error's message.
const TLSRequiredMessage = "the server expects TLS: pass --cacert (and --cert and --key if it requires client certificates)"

// ClientCreds are gRPC transport credentials for cfg whose handshake
// errors say what is wrong: ErrServerNotTLS when the server answered in
// plaintext. onErr, if not nil, sees every handshake error (a client uses
// it to fail at once instead of retrying a handshake that cannot succeed).
// cfg is read at every handshake through get, so a caller may swap it.
func ClientCreds(get func() *tls.Config, onErr func(error)) credentials.TransportCredentials {
	return &clientCreds{get: get, onErr: onErr, TransportCredentials: credentials.NewTLS(get())}
}

type clientCreds struct {
	credentials.TransportCredentials
	get   func() *tls.Config
	onErr func(error)
}

func (c *clientCreds) ClientHandshake(ctx context.Context, authority string, raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	cfg := c.get().Clone()
	var asked atomic.Bool // the server asked for a certificate this client lacks
	if len(cfg.Certificates) == 0 && cfg.GetClientCertificate == nil {
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			asked.Store(true)
			return &tls.Certificate{}, nil
		}
	}
	conn, info, err := credentials.NewTLS(cfg).ClientHandshake(ctx, authority, raw)
	if err != nil {
		var rh tls.RecordHeaderError
		if errors.As(err, &rh) {
			err = fmt.Errorf("%w (%v)", ErrServerNotTLS, err)
		}
		if c.onErr != nil {
			c.onErr(err)
		}
		return conn, info, err
	}
	if c.onErr != nil {
		// With TLS 1.3 a server's refusal of the client certificate comes
		// after the client's side of the handshake: an alert on the first
		// read, or a reset connection.
		conn = &alertConn{Conn: conn, onErr: c.onErr, asked: asked.Load()}
	}
	return conn, info, nil
}

// ErrClientCertRefused is the error of a client whose certificate (or its
// absence) the server refused.
var ErrClientCertRefused = errors.New("the server refused the TLS connection: it requires a client certificate signed by its client CA (pass --cert and --key)")

type alertConn struct {
	net.Conn
	onErr func(error)
	asked bool
	once  sync.Once
}

func (c *alertConn) fail(err error) {
	if err == nil {
		return
	}
	var alert tls.AlertError
	if errors.As(err, &alert) || c.asked {
		c.once.Do(func() { c.onErr(fmt.Errorf("%w (%v)", ErrClientCertRefused, err)) })
	}
}

func (c *alertConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if err != nil && !errors.Is(err, net.ErrClosed) {
		c.fail(err)
	}
	return n, err
}

func (c *alertConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	if err != nil && !errors.Is(err, net.ErrClosed) {
		c.fail(err)
	}
	return n, err
}

func (c *clientCreds) Clone() credentials.TransportCredentials {
	return &clientCreds{get: c.get, onErr: c.onErr, TransportCredentials: c.TransportCredentials.Clone()}
}

// Permanent reports whether a handshake error cannot go away by retrying:
// the server is not TLS, its certificate does not verify, or it refused
// ours.
func Permanent(err error) bool {
	if err == nil {
		return false
	}
	var (
		rh     tls.RecordHeaderError
		verify *tls.CertificateVerificationError
		alert  tls.AlertError
		ua     x509.UnknownAuthorityError
		host   x509.HostnameError
		inval  x509.CertificateInvalidError
	)
	return errors.Is(err, ErrServerNotTLS) || errors.Is(err, ErrClientCertRefused) || errors.As(err, &rh) || errors.As(err, &verify) ||
		errors.As(err, &alert) || errors.As(err, &ua) || errors.As(err, &host) || errors.As(err, &inval)
}

// Token is per-call credentials that send "authorization: Bearer <token>".
// It also works over plaintext (a loopback development cluster); over a
// network, use it with TLS.
type Token string

// GetRequestMetadata implements credentials.PerRPCCredentials.
func (t Token) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(t)}, nil
}

// RequireTransportSecurity implements credentials.PerRPCCredentials.
func (Token) RequireTransportSecurity() bool { return false }
