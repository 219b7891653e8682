package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
)

// repoFile is a path from the repository root (tests run in e2e/).
func repoFile(p string) string { return filepath.Join("..", p) }

// promtool validates the alert rules and the compose scrape config.
// (Debian's Prometheus is built without Kubernetes service discovery, so
// prometheus.kubernetes.yml cannot be checked here.)
func TestPromtoolChecksRules(t *testing.T) {
	if _, err := exec.LookPath("promtool"); err != nil {
		t.Skip("promtool not installed (Debian package prometheus): skipping the check of deploy/prometheus")
	}
	for _, args := range [][]string{
		{"check", "rules", repoFile("deploy/prometheus/alerts.yml")},
		{"check", "config", repoFile("deploy/prometheus/prometheus.compose.yml")},
	} {
		if out, err := exec.Command("promtool", args...).CombinedOutput(); err != nil {
			t.Errorf("promtool %v: %v\n%s", args, err, out)
		}
	}
}

// alertRules are the shipped alert rules' names and expressions.
func alertRules(t *testing.T) map[string]string {
	var f struct {
		Groups []struct {
			Rules []struct{ Alert, Expr string }
		}
	}
	b, err := os.ReadFile(repoFile("deploy/prometheus/alerts.yml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			out[r.Alert] = r.Expr
		}
	}
	return out
}

// alertQueries are the alert rules' expressions without their
// comparisons: what each alert measures (it must return data even when
// not firing). An expression is "<query> <comparison> <number>", or
// several such joined by "and" (each clause's query is checked).
func alertQueries(t *testing.T) map[string]string {
	cmp := regexp.MustCompile(`\s(>|<|==|!=|>=|<=)\s+[0-9.e+-]+\s*$`)
	out := map[string]string{}
	for name, expr := range alertRules(t) {
		clauses := strings.Split(expr, " and ")
		for i, c := range clauses {
			loc := cmp.FindStringIndex(c)
			if loc == nil {
				t.Fatalf("alert %s: clause %q does not end in a comparison with a number", name, c)
			}
			key := "alert " + name
			if len(clauses) > 1 {
				key += fmt.Sprintf(" clause %d", i+1)
			}
			out[key] = strings.TrimSpace(c[:loc[0]])
		}
	}
	return out
}

// dashboardQueries are the expressions of every panel of the dashboard.
func dashboardQueries(t *testing.T) map[string]string {
	var d struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	b, err := os.ReadFile(repoFile("deploy/grafana/grackle.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, p := range d.Panels {
		for i, tg := range p.Targets {
			out[fmt.Sprintf("panel %q target %d", p.Title, i)] = tg.Expr
		}
	}
	if len(out) < 20 {
		t.Fatalf("only %d dashboard queries", len(out))
	}
	return out
}

type promResult struct {
	Status string
	Error  string
	Data   struct {
		ResultType string
		Result     []json.RawMessage
		Groups     []struct {
			Rules []struct {
				Name, Health, LastError string
			}
		}
	}
}

func promGet(t *testing.T, base, path string, q url.Values) (promResult, error) {
	var r promResult
	resp, err := http.Get(base + path + "?" + q.Encode())
	if err != nil {
		return r, err
	}
	defer resp.Body.Close()
	err = json.NewDecoder(resp.Body).Decode(&r)
	return r, err
}

// A real Prometheus scrapes a local 3-node cluster (1 s scrape and rule
// evaluation) under a small workload; every expression the dashboard and
// the alert rules use returns data, and every rule evaluates without
// error.
func TestPrometheusQueriesReturnData(t *testing.T) {
	if _, err := exec.LookPath("prometheus"); err != nil {
		t.Skip("prometheus not installed (Debian package prometheus): skipping the dashboard and alert queries against a real Prometheus")
	}
	p := NewCluster(t, 3, "--snapshot-threshold", "64", "--snapshot-interval", "1s", "--trailing-logs", "32")
	targets := withHTTP(t, p)
	p.StartAll()
	p.WaitLeader(0, 30*time.Second)
	started := time.Now()

	base := startPrometheus(t, targets, repoFile("deploy/prometheus/alerts.yml"))

	// The workload: hand-offs through the queue, lease refreshes,
	// revokes and expiries, and a call that fails (NotFound).
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	a := anyOf(p)
	do := func(fn func(ctx context.Context, c pb.GrackleServiceClient) error) error { return a.Do(ctx, fn) }
	if err := do(func(ctx context.Context, c pb.GrackleServiceClient) error {
		_, err := c.CreateNamespace(ctx, &pb.CreateNamespaceRequest{Name: "prom"})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if err := do(func(ctx context.Context, c pb.GrackleServiceClient) error {
		_, err := c.CreateSemaphore(ctx, &pb.CreateSemaphoreRequest{NamespaceName: "prom", SemaphoreName: "s", Permits: 1})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	lease := func(ttl int64) string {
		var id string
		if err := do(func(ctx context.Context, c pb.GrackleServiceClient) error {
			l, err := c.CreateSemaphoreLease(ctx, &pb.CreateSemaphoreLeaseRequest{NamespaceName: "prom", ProcessId: "w", TtlSeconds: ttl})
			if err == nil {
				id = l.Lease.LeaseId
			}
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return id
	}
	acquire := func(id string, wait int64) {
		do(func(ctx context.Context, c pb.GrackleServiceClient) error {
			_, err := c.AcquireSemaphore(ctx, &pb.AcquireSemaphoreRequest{NamespaceName: "prom", SemaphoreName: "s", LeaseId: id, Weight: 1, TimeoutSeconds: wait})
			return err
		})
	}
	end := time.Now().Add(5 * time.Second)
	for round := 0; time.Now().Before(end) && round < 200; round++ {
		first, second := lease(60), lease(60)
		acquire(first, 0)
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { defer wg.Done(); acquire(second, 5) }() // waits in the queue
		time.Sleep(50 * time.Millisecond)                   // let it queue (the workload's pacing, not a check)
		do(func(ctx context.Context, c pb.GrackleServiceClient) error {
			_, err := c.ReleaseSemaphore(ctx, &pb.ReleaseSemaphoreRequest{NamespaceName: "prom", SemaphoreName: "s", LeaseId: first})
			return err
		})
		wg.Wait()
		do(func(ctx context.Context, c pb.GrackleServiceClient) error {
			_, err := c.RefreshSemaphoreLease(ctx, &pb.RefreshSemaphoreLeaseRequest{NamespaceName: "prom", LeaseId: second, TtlSeconds: 60})
			return err
		})
		for _, id := range []string{first, second} {
			do(func(ctx context.Context, c pb.GrackleServiceClient) error {
				_, err := c.RevokeSemaphoreLease(ctx, &pb.RevokeSemaphoreLeaseRequest{NamespaceName: "prom", LeaseId: id})
				return err
			})
		}
		lease(1) // expires on its own
		do(func(ctx context.Context, c pb.GrackleServiceClient) error {
			_, err := c.GetNamespace(ctx, &pb.GetNamespaceRequest{NamespaceName: "missing"})
			_ = err // NotFound: the error the dashboard's errors panel shows
			return nil
		})
	}

	queries := alertQueries(t)
	for k, v := range dashboardQueries(t) {
		queries[k] = v
	}
	// Every query returns data once a few scrapes have seen the workload.
	deadline := time.Now().Add(30 * time.Second)
	for name, q := range queries {
		for {
			r, err := promGet(t, base, "/api/v1/query", url.Values{"query": {q}})
			if err == nil && r.Status == "success" && len(r.Data.Result) > 0 {
				break
			}
			if err == nil && r.Status == "error" {
				t.Errorf("%s: %q: %s", name, q, r.Error)
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("%s: %q returned no data (err %v)", name, q, err)
				break
			}
			time.Sleep(500 * time.Millisecond)
		}
	}
	t.Logf("cluster up to every query answered: %v (%d queries)", time.Since(started).Round(time.Millisecond), len(queries))
	// Every alert rule is loaded and evaluates cleanly.
	r, err := promGet(t, base, "/api/v1/rules", url.Values{})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, g := range r.Data.Groups {
		for _, rule := range g.Rules {
			n++
			if rule.Health != "ok" {
				t.Errorf("rule %s: health %q %s", rule.Name, rule.Health, rule.LastError)
			}
		}
	}
	if want := len(alertRules(t)); n != want {
		t.Errorf("%d rules loaded, want %d", n, want)
	}
}

// withHTTP gives every node of p an HTTP port and returns their
// addresses (Prometheus's targets).
func withHTTP(t *testing.T, p *Proc) []string {
	ports := FreePorts(t, len(p.Nodes))
	var targets []string
	for i, nd := range p.Nodes {
		addr := fmt.Sprintf("127.0.0.1:%d", ports[i])
		nd.Args = append(nd.Args, "--http-addr", addr)
		targets = append(targets, addr)
	}
	return targets
}

// startPrometheus runs a real Prometheus (1 s scrapes and rule
// evaluations) with the rules file rules, scraping targets as job
// "grackle", until the test ends; it returns its base URL.
func startPrometheus(t *testing.T, targets []string, rules string) string {
	t.Helper()
	dir := t.TempDir()
	rules, err := filepath.Abs(rules)
	if err != nil {
		t.Fatal(err)
	}
	quoted := make([]string, len(targets))
	for i, a := range targets {
		quoted[i] = strconv.Quote(a)
	}
	cfg := fmt.Sprintf(`global: {scrape_interval: 1s, evaluation_interval: 1s}
rule_files: [%q]
scrape_configs:
  - job_name: grackle
    static_configs: [{targets: [%s]}]
`, rules, strings.Join(quoted, ", "))
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	web := fmt.Sprintf("127.0.0.1:%d", FreePorts(t, 1)[0])
	prom := exec.Command("prometheus", "--config.file="+filepath.Join(dir, "prometheus.yml"), "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+web, "--log.level=warn")
	logf, _ := os.Create(filepath.Join(dir, "prometheus.log"))
	prom.Stdout, prom.Stderr = logf, logf
	if err := prom.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		prom.Process.Kill()
		prom.Wait()
		if t.Failed() {
			b, _ := os.ReadFile(filepath.Join(dir, "prometheus.log"))
			t.Logf("prometheus log:\n%s", tail(string(b), 3000))
		}
	})
	return "http://" + web
}
