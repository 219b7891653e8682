// Package tlstest makes real certificates for tests with the openssl
// command line (a CA, and leaf certificates it signs), so that the TLS
// code is tested against files an operator's tooling would produce.
package tlstest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// CA is a certificate authority in a test's temporary directory.
type CA struct {
	t    testing.TB
	dir  string
	name string
	// Cert and Key are the CA's PEM files.
	Cert, Key string
}

// NeedOpenSSL skips the test, saying why, when openssl is not installed.
func NeedOpenSSL(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("openssl"); err != nil {
		t.Skip("skipping: the openssl command is not installed (Debian package openssl); these tests make real certificates with it")
	}
}

// NewCA makes a self-signed CA named name.
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	NeedOpenSSL(t)
	dir := filepath.Join(t.TempDir(), name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	ca := &CA{t: t, dir: dir, name: name, Cert: filepath.Join(dir, "ca.crt"), Key: filepath.Join(dir, "ca.key")}
	run(t, "openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
		"-keyout", ca.Key, "-out", ca.Cert, "-days", "2", "-subj", "/CN="+name,
		"-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign")
	return ca
}

// Issue makes a leaf certificate for name, valid for server and client
// authentication, with the subject alternative names sans ("IP:127.0.0.1",
// "DNS:localhost"; default both). It returns the certificate and key files.
func (ca *CA) Issue(name string, sans ...string) (cert, key string) {
	ca.t.Helper()
	if len(sans) == 0 {
		sans = []string{"IP:127.0.0.1", "DNS:localhost"}
	}
	cert = filepath.Join(ca.dir, name+".crt")
	key = filepath.Join(ca.dir, name+".key")
	csr := filepath.Join(ca.dir, name+".csr")
	ext := filepath.Join(ca.dir, name+".ext")
	extText := fmt.Sprintf("subjectAltName=%s\nextendedKeyUsage=serverAuth,clientAuth\nbasicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\n", strings.Join(sans, ","))
	if err := os.WriteFile(ext, []byte(extText), 0o600); err != nil {
		ca.t.Fatal(err)
	}
	run(ca.t, "openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
		"-keyout", key, "-out", csr, "-subj", "/CN="+name)
	run(ca.t, "openssl", "x509", "-req", "-in", csr, "-CA", ca.Cert, "-CAkey", ca.Key, "-CAcreateserial",
		"-out", cert, "-days", "1", "-extfile", ext)
	return cert, key
}

func run(t testing.TB, name string, args ...string) {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}
