package webui_test

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
	"github.com/grackle-coord/grackle/server"
	"github.com/grackle-coord/grackle/server/servertest"
	"github.com/grackle-coord/grackle/tlsutil"
	"github.com/grackle-coord/grackle/tlsutil/tlstest"
)

// spkiHash is the base64 SHA-256 of a certificate's public key, the form
// Chromium's --ignore-certificate-errors-spki-list takes: the browser
// trusts that one key (the node's, made by the test's CA) and nothing
// else it would not.
func spkiHash(t *testing.T, certFile, keyFile string) string {
	t.Helper()
	kp, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(kp.Leaf.RawSubjectPublicKeyInfo)
	return base64.StdEncoding.EncodeToString(sum[:])
}

// Where the gRPC port requires client certificates, --http-client-cert
// none lets a browser without one open the web view over HTTPS: the page
// asks for an ACL token, says so when the token is unknown, and with a
// good one shows the namespaces; the token stays in the tab's
// sessionStorage (no cookie, nothing in localStorage or the URL).
func TestSignInOverHTTPSWithoutClientCert(t *testing.T) {
	path := chromium(t)
	apiCA, peerCA := tlstest.NewCA(t, "api-ca"), tlstest.NewCA(t, "peer-ca")
	clientCert, clientKey := apiCA.Issue("operator")
	clientTLS, err := tlsutil.ClientConfig(apiCA.Cert, clientCert, clientKey)
	if err != nil {
		t.Fatal(err)
	}
	c := servertest.New(t, grpc.WithTransportCredentials(credentials.NewTLS(clientTLS)))
	cfg := servertest.Config(t, "node1")
	cfg.TLSCertFile, cfg.TLSKeyFile = apiCA.Issue("node1-api")
	cfg.TLSClientCAFile = apiCA.Cert
	cfg.PeerTLSCertFile, cfg.PeerTLSKeyFile = peerCA.Issue("node1-peer")
	cfg.PeerTLSCAFile = peerCA.Cert
	cfg.HTTPAddr, cfg.ACL, cfg.HTTPClientCert = "127.0.0.1:0", true, server.HTTPClientCertNone
	s := c.StartNode(cfg)
	servertest.Eventually(t, "a leader", 20*time.Second, s.IsLeader)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var boot *pb.BootstrapResponse
	servertest.Eventually(t, "the ACL bootstrap", 20*time.Second, func() bool {
		boot, err = pb.NewACLServiceClient(c.Conn(0)).Bootstrap(ctx, &pb.BootstrapRequest{})
		return err == nil
	})
	c.SetToken(boot.Secret)
	ok[*pb.CreateNamespaceResponse](t)(c.Client(0).CreateNamespace(ctx, &pb.CreateNamespaceRequest{Name: "third_parties", Description: "Third-party APIs"}))
	ok[*pb.CreateNamespaceResponse](t)(c.Client(0).CreateNamespace(ctx, &pb.CreateNamespaceRequest{Name: "billing"}))
	rd := ok[*pb.CreateTokenResponse](t)(pb.NewACLServiceClient(c.Conn(0)).CreateToken(ctx, &pb.CreateTokenRequest{Role: "read", Namespace: "*", Description: "dashboards"}))
	c.SetToken("")

	bctx := browser(t, path, chromedp.Flag("ignore-certificate-errors-spki-list", spkiHash(t, cfg.TLSCertFile, cfg.TLSKeyFile)))
	do := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(bctx, steps...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	text := func(sel string) string {
		t.Helper()
		v, err := chromedp.Run(bctx, chromedp.Text(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("text of %s: %v", sel, err)
		}
		return v
	}
	do("the page over HTTPS, asking for a token", chromedp.Navigate("https://"+s.HTTPAddr()+"/ui/"),
		chromedp.WaitVisible(chromedp.CSS(`#login`)))
	if why := text(`#login-why`); !strings.Contains(why, "sign in with an ACL token") {
		t.Fatalf("sign-in prompt %q", why)
	}
	screenshot(t, bctx, "GRACKLE_SIGNIN_SCREENSHOT")

	do("an unknown token", chromedp.SendKeys(chromedp.CSS(`#token`), "grk_not_a_token"),
		chromedp.Click(chromedp.CSS(`#login button[type="submit"]`)),
		chromedp.Poll[chromedp.Void](`document.getElementById('login-why').textContent.includes('unknown or was revoked') && !document.getElementById('login').hidden`))
	if v, err := chromedp.Run(bctx, chromedp.Evaluate[bool](`sessionStorage.getItem("grackle-token") === null`)); err != nil || !v {
		t.Fatalf("the unknown token stayed in sessionStorage (%v)", err)
	}

	do("signed in", chromedp.SendKeys(chromedp.CSS(`#token`), rd.Secret), chromedp.Click(chromedp.CSS(`#login button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#namespaces a[href="#/ns/third_parties"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#namespaces a[href="#/ns/billing"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#members tr[data-node="node1"]`)),
		chromedp.WaitNotVisible(chromedp.CSS(`#login`)),
		chromedp.WaitVisible(chromedp.CSS(`#forget`)))
	where, err := chromedp.Run(bctx, chromedp.Evaluate[string](`JSON.stringify([sessionStorage.getItem("grackle-token") !== null, localStorage.length, document.cookie, location.href.includes("grk_")])`))
	if err != nil || where != `[true,0,"",false]` {
		t.Fatalf("token storage (session, local, cookies, in the URL) = %s (%v)", where, err)
	}

	do("signed out", chromedp.Click(chromedp.CSS(`#forget`)), chromedp.WaitVisible(chromedp.CSS(`#login`)))
	if v, err := chromedp.Run(bctx, chromedp.Evaluate[bool](`sessionStorage.getItem("grackle-token") === null`)); err != nil || !v {
		t.Fatalf("sign out left the token in sessionStorage (%v)", err)
	}
}
