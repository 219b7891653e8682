// Package tlsutil builds Grackle's TLS configurations: the client API's
// (server certificate, optional client CA for mutual TLS), the peers'
// (Raft traffic and follower-to-leader forwarding, both sides verified by
// the peer CA) and the clients'. Certificates and CA files are re-read on
// Reload (SIGHUP): new handshakes see the new files, established
// connections are kept, and a file that does not load is rejected with the
// old one kept in use.
package tlsutil

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"sync/atomic"
	"time"
)

// MinVersion is the lowest TLS version any Grackle endpoint accepts.
const MinVersion = tls.VersionTLS12

// PeerALPN is offered (beside gRPC's "h2") by a node that dials another
// node's gRPC port to forward a call. The gRPC port then authenticates the
// connection as a peer's (peer certificate, peer CA) instead of a client's.
const PeerALPN = "grackle-peer"

// KeyPair is a certificate and its private key, loaded from files.
type KeyPair struct {
	certFile, keyFile string
	cur               atomic.Pointer[tls.Certificate]
}

// LoadKeyPair reads a PEM certificate (chain) and its key.
func LoadKeyPair(certFile, keyFile string) (*KeyPair, error) {
	k := &KeyPair{certFile: certFile, keyFile: keyFile}
	if err := k.Reload(); err != nil {
		return nil, err
	}
	return k, nil
}

// Reload re-reads the files. On error the certificate in use stays.
func (k *KeyPair) Reload() error {
	c, err := tls.LoadX509KeyPair(k.certFile, k.keyFile)
	if err != nil {
		return fmt.Errorf("certificate %s with key %s: %w", k.certFile, k.keyFile, err)
	}
	if c.Leaf == nil {
		if c.Leaf, err = x509.ParseCertificate(c.Certificate[0]); err != nil {
			return fmt.Errorf("certificate %s: %w", k.certFile, err)
		}
	}
	if now := time.Now(); now.After(c.Leaf.NotAfter) {
		return fmt.Errorf("certificate %s expired at %s", k.certFile, c.Leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	k.cur.Store(&c)
	return nil
}

// Certificate is the certificate in use.
func (k *KeyPair) Certificate() *tls.Certificate { return k.cur.Load() }

// CertFile is the certificate's file name.
func (k *KeyPair) CertFile() string { return k.certFile }

// CAPool is a set of CA certificates loaded from a PEM file.
type CAPool struct {
	file string
	cur  atomic.Pointer[x509.CertPool]
}

// LoadCAPool reads a PEM file of one or more CA certificates.
func LoadCAPool(file string) (*CAPool, error) {
	p := &CAPool{file: file}
	if err := p.Reload(); err != nil {
		return nil, err
	}
	return p, nil
}

// Reload re-reads the file. On error the pool in use stays.
func (p *CAPool) Reload() error {
	pool, err := readPool(p.file)
	if err != nil {
		return err
	}
	p.cur.Store(pool)
	return nil
}

func readPool(file string) (*x509.CertPool, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("CA file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("CA file %s: no PEM certificate in it", file)
	}
	return pool, nil
}

// Pool is the CA pool in use.
func (p *CAPool) Pool() *x509.CertPool { return p.cur.Load() }

// Peer is a node's identity towards other nodes: its peer certificate and
// the CA that signs every peer's. Both ends of a peer connection present a
// certificate and verify the other's against the CA.
type Peer struct {
	Cert *KeyPair
	CA   *CAPool
}

// LoadPeer loads the peer certificate, key and CA.
func LoadPeer(certFile, keyFile, caFile string) (*Peer, error) {
	if certFile == "" || keyFile == "" || caFile == "" {
		return nil, errors.New("peer TLS needs all of --peer-tls-cert-file, --peer-tls-key-file and --peer-tls-ca-file")
	}
	k, err := LoadKeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("peer %w", err)
	}
	ca, err := LoadCAPool(caFile)
	if err != nil {
		return nil, fmt.Errorf("peer %w", err)
	}
	return &Peer{Cert: k, CA: ca}, nil
}

// Reload re-reads the peer files; each that fails keeps its old value.
func (p *Peer) Reload() error {
	return errors.Join(p.Cert.Reload(), p.CA.Reload())
}

// ServerConfig accepts connections from peers only.
func (p *Peer) ServerConfig() *tls.Config {
	return &tls.Config{
		MinVersion: MinVersion,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			return p.serverConfig(nil), nil
		},
	}
}

func (p *Peer) serverConfig(nextProtos []string) *tls.Config {
	return &tls.Config{
		MinVersion:   MinVersion,
		Certificates: []tls.Certificate{*p.Cert.Certificate()},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    p.CA.Pool(),
		NextProtos:   nextProtos,
	}
}

// ClientConfig dials a peer at addr (host:port): the peer's certificate
// must be signed by the peer CA and name host.
func (p *Peer) ClientConfig(addr string) *tls.Config {
	host := addr
	if h, _, err := net.SplitHostPort(addr); err == nil {
		host = h
	}
	return &tls.Config{
		MinVersion: MinVersion,
		ServerName: host,
		RootCAs:    p.CA.Pool(),
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return p.Cert.Certificate(), nil
		},
	}
}

// Server is the client API's TLS: the server certificate and, for mutual
// TLS, the CA that signs client certificates. With Peer set, a connection
// that offers PeerALPN is a forwarding node's and is verified as a peer.
type Server struct {
	Cert     *KeyPair
	ClientCA *CAPool // nil: clients need no certificate
	Peer     *Peer   // nil: no peer connections on this port
}

// LoadServer loads the API's certificate, key and (optional) client CA.
func LoadServer(certFile, keyFile, clientCAFile string) (*Server, error) {
	if certFile == "" || keyFile == "" {
		return nil, errors.New("TLS needs both --tls-cert-file and --tls-key-file")
	}
	k, err := LoadKeyPair(certFile, keyFile)
	if err != nil {
		return nil, err
	}
	s := &Server{Cert: k}
	if clientCAFile != "" {
		if s.ClientCA, err = LoadCAPool(clientCAFile); err != nil {
			return nil, fmt.Errorf("client %w", err)
		}
	}
	return s, nil
}

// Reload re-reads the API's files; each that fails keeps its old value.
func (s *Server) Reload() error {
	err := s.Cert.Reload()
	if s.ClientCA != nil {
		err = errors.Join(err, s.ClientCA.Reload())
	}
	return err
}

// ClientCerts is what a listener of the API asks of its clients when the
// API has a client CA (without one, no listener asks for a certificate).
type ClientCerts int

const (
	// RequireClientCert: no connection without a certificate of the
	// client CA (the gRPC port).
	RequireClientCert ClientCerts = iota
	// VerifyClientCertIfGiven: a certificate is asked for and verified
	// when given, and a connection without one is let in for the handler
	// to decide (the HTTP port, whose /healthz and /readyz stay open to
	// probes without one).
	VerifyClientCertIfGiven
	// NoClientCert: no certificate is asked for, so a browser never
	// prompts for one (the HTTP port with --http-client-cert none, whose
	// endpoints an access token guards instead).
	NoClientCert
)

// Config is the tls.Config of the API's listeners; nextProtos is the ALPN
// list the server speaks ("h2" for gRPC, nil for plain HTTPS), certs what
// it asks of clients when it has a client CA.
func (s *Server) Config(nextProtos []string, certs ClientCerts) *tls.Config {
	return &tls.Config{
		MinVersion: MinVersion,
		NextProtos: nextProtos,
		GetConfigForClient: func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
			if s.Peer != nil && slices.Contains(hello.SupportedProtos, PeerALPN) {
				return s.Peer.serverConfig(nextProtos), nil
			}
			c := &tls.Config{
				MinVersion:   MinVersion,
				Certificates: []tls.Certificate{*s.Cert.Certificate()},
				NextProtos:   nextProtos,
			}
			if s.ClientCA != nil && certs != NoClientCert {
				c.ClientCAs = s.ClientCA.Pool()
				c.ClientAuth = tls.VerifyClientCertIfGiven
				if certs == RequireClientCert {
					c.ClientAuth = tls.RequireAndVerifyClientCert
				}
			}
			return c, nil
		},
	}
}

// ClientConfig is a client's TLS configuration: caFile verifies the server
// ("" = the system's roots), certFile and keyFile are the client's own
// certificate for mutual TLS ("" = none).
func ClientConfig(caFile, certFile, keyFile string) (*tls.Config, error) {
	c := &tls.Config{MinVersion: MinVersion}
	if caFile != "" {
		pool, err := readPool(caFile)
		if err != nil {
			return nil, err
		}
		c.RootCAs = pool
	}
	if (certFile == "") != (keyFile == "") {
		return nil, errors.New("a client certificate needs both --cert and --key")
	}
	if certFile != "" {
		k, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("client certificate %s with key %s: %w", certFile, keyFile, err)
		}
		c.Certificates = []tls.Certificate{k}
	}
	return c, nil
}
