package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
	"github.com/grackle-coord/grackle/server"
	"github.com/grackle-coord/grackle/server/servertest"
)

// The scrape configuration docs/SECURITY.md gives for a node with
// --http-client-cert none works with a real Prometheus: with the CA and a
// token file (authorization.credentials_file) the target is up; the same
// target without the token is down (401).
func TestPrometheusScrapesWithTokenWithoutClientCert(t *testing.T) {
	if _, err := exec.LookPath("prometheus"); err != nil {
		t.Skip("prometheus not installed (Debian package prometheus): skipping the scrape with a token")
	}
	p := newPKI(t)
	c := servertest.New(t, p.dial(t))
	cfg := servertest.Config(t, "node1")
	p.node(&cfg)
	cfg.HTTPAddr, cfg.ACL, cfg.HTTPClientCert = "127.0.0.1:0", true, server.HTTPClientCertNone
	s := c.StartNode(cfg)
	servertest.Eventually(t, "a leader", 20*time.Second, s.IsLeader)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var boot *pb.BootstrapResponse
	var err error
	servertest.Eventually(t, "the ACL bootstrap", 20*time.Second, func() bool {
		boot, err = pb.NewACLServiceClient(c.Conn(0)).Bootstrap(ctx, &pb.BootstrapRequest{})
		return err == nil
	})
	c.SetToken(boot.Secret)
	rd, err := pb.NewACLServiceClient(c.Conn(0)).CreateToken(ctx, &pb.CreateTokenRequest{Role: "read", Namespace: "*", Description: "prometheus"})
	if err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "grackle-token")
	if err := os.WriteFile(tokenFile, []byte(rd.Secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// The node's certificate names 127.0.0.1 and localhost.
	_, port, _ := net.SplitHostPort(s.HTTPAddr())
	target := "localhost:" + port
	promCfg := fmt.Sprintf(`global: {scrape_interval: 1s}
scrape_configs:
  - job_name: with_token
    scheme: https
    tls_config: {ca_file: %q}
    authorization: {type: Bearer, credentials_file: %q}
    static_configs: [{targets: [%q]}]
  - job_name: without_token
    scheme: https
    tls_config: {ca_file: %q}
    static_configs: [{targets: [%q]}]
`, p.api.Cert, tokenFile, target, p.api.Cert, target)
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(promCfg), 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	web := l.Addr().String()
	l.Close()
	prom := exec.Command("prometheus", "--config.file="+filepath.Join(dir, "prometheus.yml"), "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+web, "--log.level=warn")
	logf, err := os.Create(filepath.Join(dir, "prometheus.log"))
	if err != nil {
		t.Fatal(err)
	}
	prom.Stdout, prom.Stderr = logf, logf
	if err := prom.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = prom.Process.Kill()
		_ = prom.Wait()
		logf.Close()
		if t.Failed() {
			b, _ := os.ReadFile(filepath.Join(dir, "prometheus.log"))
			t.Logf("prometheus log:\n%s", b)
		}
	})

	// up of each job, once Prometheus has scraped both.
	up := func() map[string]string {
		resp, err := http.Get("http://" + web + "/api/v1/query?" + url.Values{"query": {"up"}}.Encode())
		if err != nil {
			return nil
		}
		defer resp.Body.Close()
		var r struct {
			Data struct {
				Result []struct {
					Metric map[string]string
					Value  [2]any
				}
			}
		}
		if json.NewDecoder(resp.Body).Decode(&r) != nil {
			return nil
		}
		out := map[string]string{}
		for _, x := range r.Data.Result {
			out[x.Metric["job"]], _ = x.Value[1].(string)
		}
		return out
	}
	var last map[string]string
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		last = up()
		if last["with_token"] == "1" && last["without_token"] != "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("up = %v after 60s, want with_token 1 (the token scrapes)", last)
		}
	}
	if last["without_token"] != "0" {
		t.Fatalf("up = %v, want without_token 0 (a scrape without the token refused)", last)
	}
	resp, err := http.Get("http://" + web + "/api/v1/targets")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var targets struct {
		Data struct {
			ActiveTargets []struct {
				ScrapePool, LastError string
			}
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&targets); err != nil {
		t.Fatal(err)
	}
	for _, tg := range targets.Data.ActiveTargets {
		if tg.ScrapePool == "without_token" && !strings.Contains(tg.LastError, "401") {
			t.Fatalf("the scrape without a token failed with %q, want a 401", tg.LastError)
		}
	}
}
