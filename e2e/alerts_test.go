package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
)

// promAlert is one alert of Prometheus's /api/v1/alerts.
type promAlert struct {
	Labels map[string]string
	State  string // "pending", "firing"
}

func promAlerts(t *testing.T, base string) []promAlert {
	t.Helper()
	resp, err := http.Get(base + "/api/v1/alerts")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r struct {
		Status string
		Data   struct{ Alerts []promAlert }
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil || r.Status != "success" {
		t.Fatalf("alerts: %v %v", r.Status, err)
	}
	return r.Data.Alerts
}

// firing reports whether alert name fires with every label of want.
func firing(alerts []promAlert, name string, want map[string]string) bool {
	for _, a := range alerts {
		if a.State != "firing" || a.Labels["alertname"] != name {
			continue
		}
		ok := true
		for k, v := range want {
			ok = ok && a.Labels[k] == v
		}
		if ok {
			return true
		}
	}
	return false
}

func describe(alerts []promAlert) string {
	var out []string
	for _, a := range alerts {
		var ls []string
		for k, v := range a.Labels {
			if k != "alertname" && k != "severity" {
				ls = append(ls, k+"="+v)
			}
		}
		sort.Strings(ls)
		out = append(out, fmt.Sprintf("%s{%s} %s", a.Labels["alertname"], strings.Join(ls, ","), a.State))
	}
	sort.Strings(out)
	return strings.Join(out, "; ")
}

// shortFor copies the shipped rules with every `for:` shortened to d, so
// that a test sees in seconds what an operator is paged for after a minute.
func shortFor(t *testing.T, d string) string {
	b, err := os.ReadFile(repoFile("deploy/prometheus/alerts.yml"))
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`(?m)^(\s+for:)\s*\S+\s*$`)
	if len(re.FindAll(b, -1)) < 5 {
		t.Fatal("the rules file has fewer `for:` lines than expected: the rewrite no longer matches it")
	}
	out := filepath.Join(t.TempDir(), "alerts.yml")
	if err := os.WriteFile(out, re.ReplaceAll(b, []byte("$1 "+d)), 0o600); err != nil {
		t.Fatal(err)
	}
	return out
}

// The shipped alert rules (their `for:` shortened to 2 s) in a real
// Prometheus scraping a real 3-node cluster: none fires while it is
// healthy; with a follower killed (kill -9) and writes it misses, the
// member's target is down, it is unreachable, the quorum is at risk, and
// the leader reports it out of contact and lagging; with a second member
// killed the leader steps down and GrackleNoLeader fires, and it keeps
// firing once the last node is gone too (no target left to scrape).
func TestPrometheusAlertsFireWhenMembersDie(t *testing.T) {
	if _, err := exec.LookPath("prometheus"); err != nil {
		t.Skip("prometheus not installed (Debian package prometheus): skipping the alerts against a real Prometheus")
	}
	p := NewCluster(t, 3)
	targets := withHTTP(t, p)
	p.StartAll()
	leaderID := p.WaitLeader(0, 30*time.Second)
	li := p.Index(leaderID)
	base := startPrometheus(t, targets, shortFor(t, "2s"))
	began := time.Now()

	await := func(what string, within time.Duration, cond func([]promAlert) bool) time.Duration {
		t.Helper()
		start := time.Now()
		var last []promAlert
		for {
			if last = promAlerts(t, base); cond(last) {
				return time.Since(start)
			}
			if time.Since(start) > within {
				t.Fatalf("%s: not within %v; alerts: %s", what, within, describe(last))
			}
			time.Sleep(250 * time.Millisecond)
		}
	}
	query := func(q string) bool {
		r, err := promGet(t, base, "/api/v1/query", map[string][]string{"query": {q}})
		return err == nil && r.Status == "success" && len(r.Data.Result) > 0
	}

	// Healthy: every target scraped and every member reachable, then five
	// evaluations (each 1 s) without any alert, pending or firing.
	deadline := time.Now().Add(60 * time.Second)
	for !query(`count(up{job="grackle"} == 1) == 3`) || !query(`count(max by (member) (grackle_member_reachable) == 1) == 3`) {
		if time.Now().After(deadline) {
			t.Fatal("the healthy cluster is not seen whole by Prometheus within 60 s")
		}
		time.Sleep(250 * time.Millisecond)
	}
	// Before its first scrapes Prometheus sees no leader (and may have
	// GrackleNoLeader pending or, with `for:` this short, firing): that
	// ends at the next evaluation.
	await("no alert once the cluster is seen whole", 30*time.Second, func(a []promAlert) bool { return len(a) == 0 })
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(500 * time.Millisecond) {
		if a := promAlerts(t, base); len(a) > 0 {
			t.Fatalf("alerts on a healthy cluster: %s", describe(a))
		}
	}

	t.Logf("healthy and quiet, seen by Prometheus %v after it started", time.Since(began).Round(100*time.Millisecond))

	// A follower dies; writes go on without it.
	vi := (li + 1) % 3
	victim := p.Nodes[vi].ID
	p.Kill9(vi)
	killed := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	api := pb.NewGrackleServiceClient(p.Dial(li))
	var wg sync.WaitGroup
	var writes sync.Map
	stop := make(chan struct{})
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 1500; i++ { // bounded: 6,000 writes at most
				select {
				case <-stop:
					return
				default:
				}
				cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
				_, err := api.CreateNamespace(cctx, &pb.CreateNamespaceRequest{Name: fmt.Sprintf("w%d-%d", w, i)})
				ccancel()
				if err != nil {
					writes.Store("error", err)
					return
				}
			}
		}()
	}
	lagging := fmt.Sprintf(`max(grackle_member_replication_lag_entries{member=%q}) > 1000`, victim)
	for !query(lagging) && ctx.Err() == nil {
		if _, failed := writes.Load("error"); failed {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	t.Logf("the leader reports %s lagging by 1000 entries %v after the kill", victim, time.Since(killed).Round(100*time.Millisecond))
	if err, failed := writes.Load("error"); failed {
		t.Fatalf("writes with one member down: %v", err)
	}
	want := map[string]map[string]string{
		"GrackleMemberDown":        {"instance": targets[vi]},
		"GrackleMemberUnreachable": {"member": victim},
		"GrackleQuorumAtRisk":      {},
		"GrackleVoterOutOfContact": {"member": victim},
		"GrackleVoterLagging":      {"member": victim},
	}
	seen := map[string]time.Duration{}
	await("every member alert firing", 60*time.Second, func(a []promAlert) bool {
		for name, labels := range want {
			if _, ok := seen[name]; !ok && firing(a, name, labels) {
				seen[name] = time.Since(killed).Round(100 * time.Millisecond)
				t.Logf("%s %v firing %v after the kill", name, labels, seen[name])
			}
		}
		return len(seen) == len(want)
	})
	if a := promAlerts(t, base); firing(a, "GrackleNoLeader", nil) {
		t.Fatalf("GrackleNoLeader with a leader in place: %s", describe(a))
	}
	shootAlerts(t, base)

	// A second member dies: no majority, no leader.
	p.Kill9((li + 2) % 3)
	took := await("GrackleNoLeader", 60*time.Second, func(a []promAlert) bool { return firing(a, "GrackleNoLeader", nil) })
	t.Logf("GrackleNoLeader firing %v after the second kill", took.Round(100*time.Millisecond))
	// The last one too: nothing left to scrape, and it still fires (an
	// evaluation after every target was seen down).
	p.Kill9(li)
	killed = time.Now()
	deadline = time.Now().Add(30 * time.Second)
	for !query(`count(up{job="grackle"} == 0) == 3`) {
		if time.Now().After(deadline) {
			t.Fatal("Prometheus does not see every target down within 30 s")
		}
		time.Sleep(250 * time.Millisecond)
	}
	allDown := time.Now()
	t.Logf("every target seen down %v after the last kill", time.Since(killed).Round(100*time.Millisecond))
	for time.Since(allDown) < 3*time.Second { // three evaluations and more
		if a := promAlerts(t, base); !firing(a, "GrackleNoLeader", nil) {
			t.Fatalf("GrackleNoLeader stopped firing with every node gone: %s", describe(a))
		}
		time.Sleep(500 * time.Millisecond)
	}
	if !query(`ALERTS{alertname="GrackleNoLeader",alertstate="firing"}`) {
		t.Fatal("no firing GrackleNoLeader series with every node gone")
	}
}

// shootAlerts saves Prometheus's alerts page, with the alerts firing,
// into the file GRACKLE_ALERTS_SCREENSHOT names (when set, and a Chromium
// is installed): how the pictures of the alerts are made.
func shootAlerts(t *testing.T, base string) {
	out := os.Getenv("GRACKLE_ALERTS_SCREENSHOT")
	if out == "" {
		return
	}
	path, err := exec.LookPath("chromium")
	if err != nil {
		t.Logf("GRACKLE_ALERTS_SCREENSHOT set, but no chromium: %v", err)
		return
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.WindowSize(1280, 1400))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	ctx, cancelCtx := chromedp.NewContext(actx)
	defer cancelCtx()
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	page := base + "/alerts"
	if resp, err := http.Get(page); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusNotFound {
			page = base + "/classic/alerts" // Debian's build serves only the classic pages
		}
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(page), chromedp.WaitVisible(chromedp.CSS(`body`))); err != nil {
		t.Logf("alerts page: %v", err)
		return
	}
	// Open every firing alert's details (the page folds them).
	_, _ = chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => { document.querySelectorAll('.alert_header, .card-header').forEach((e) => e.click()); return true })()`))
	time.Sleep(time.Second) // let the page render what was opened (a picture, not a check)
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Logf("screenshot: %v", err)
		return
	}
	if err := os.WriteFile(out, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s (%d bytes)", out, len(png))
}
