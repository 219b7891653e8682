package webui_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
	"github.com/grackle-coord/grackle/server"
	"github.com/grackle-coord/grackle/server/servertest"
)

// chromium finds a Chromium to drive, or skips the test saying why.
func chromium(t *testing.T) string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("no chromium on PATH (Debian package chromium; .ci/run installs it): the web view's browser test is skipped")
	return ""
}

// browser starts a headless Chromium; the context ends it.
func browser(t *testing.T, path string) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.NoSandbox, // CI runs as root
		chromedp.DisableGPU,
		chromedp.WindowSize(1280, 860),
		chromedp.Flag("no-first-run", true),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	ctx, cancelTimeout := context.WithTimeout(ctx, 90*time.Second)
	t.Cleanup(func() { cancelTimeout(); cancelCtx(); cancelAlloc() })
	return ctx
}

// ok fails the test on a call's error.
func ok[T any](t *testing.T) func(T, error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

// The page shows a semaphore's holders live: a holder appears when the
// API grants it, and disappears when it releases.
func TestPageShowsHoldersLive(t *testing.T) {
	path := chromium(t)
	c := servertest.Start(t, 1, func(cfg *server.Config) { cfg.HTTPAddr = "127.0.0.1:0" })
	api := c.Client(0)
	ctx := context.Background()
	ok[*pb.CreateNamespaceResponse](t)(api.CreateNamespace(ctx, &pb.CreateNamespaceRequest{Name: "third_parties", Description: "Third-party APIs"}))
	ok[*pb.CreateSemaphoreResponse](t)(api.CreateSemaphore(ctx, &pb.CreateSemaphoreRequest{NamespaceName: "third_parties", SemaphoreName: "partner_1", Permits: 3, Description: "Partner 1 API"}))
	lease := func(proc string) string {
		return ok[*pb.CreateSemaphoreLeaseResponse](t)(api.CreateSemaphoreLease(ctx, &pb.CreateSemaphoreLeaseRequest{NamespaceName: "third_parties", ProcessId: proc, TtlSeconds: 120})).Lease.LeaseId
	}
	a, b := lease("host-1/pid-100"), lease("host-2/pid-200")
	acquired := ok[*pb.AcquireSemaphoreResponse](t)

	bctx := browser(t, path)
	base := "http://" + c.Nodes[0].HTTPAddr() + "/ui/"
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

	do("the cluster page", chromedp.Navigate(base),
		chromedp.WaitVisible(chromedp.CSS(`#members tr[data-node="node1"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#namespaces a[href="#/ns/third_parties"]`)))
	leader, err := chromedp.Run(bctx, chromedp.AttributeValue(chromedp.CSS(`#leader`), "data-leader"))
	if err != nil || leader.Value != "node1" {
		t.Fatalf("page names leader %q (%v), want node1", leader.Value, err)
	}

	// The namespace: semaphores with permits used/free, leases by process.
	do("the namespace page", chromedp.Navigate(base+"#/ns/third_parties"),
		chromedp.WaitVisible(chromedp.CSS(`#semaphores tr[data-sem="partner_1"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#leases tr[data-lease="`+a+`"]`)))
	if row, leases := text(`#semaphores tr[data-sem="partner_1"]`), text(`#leases`); !strings.Contains(row, "0 / 3 of 3") ||
		!strings.Contains(leases, "host-1/pid-100") || !strings.Contains(leases, "host-2/pid-200") {
		t.Fatalf("namespace page shows %q and leases %q", row, leases)
	}

	// The semaphore, live.
	do("the semaphore page", chromedp.Navigate(base+"#/ns/third_parties/sem/partner_1"),
		chromedp.WaitVisible(chromedp.CSS(`#live.live`)))
	acquired(api.AcquireSemaphore(ctx, &pb.AcquireSemaphoreRequest{NamespaceName: "third_parties", SemaphoreName: "partner_1", LeaseId: a, Weight: 2}))
	do("the new holder", chromedp.WaitVisible(chromedp.CSS(`#holders tr[data-lease="`+a+`"]`)))
	acquired(api.AcquireSemaphore(ctx, &pb.AcquireSemaphoreRequest{NamespaceName: "third_parties", SemaphoreName: "partner_1", LeaseId: b, Weight: 1}))
	do("the second holder", chromedp.WaitVisible(chromedp.CSS(`#holders tr[data-lease="`+b+`"]`)))
	if p := text(`#sem-permits`); p != "3 of 3 permits used, 0 free" {
		t.Fatalf("permits line %q", p)
	}

	// Two more calls wait (FIFO): the page shows the queue in order.
	c3, c4 := lease("host-3/pid-300"), lease("host-4/pid-400")
	waitAcq := func(l string, w int64) {
		go func() {
			_, _ = api.AcquireSemaphore(ctx, &pb.AcquireSemaphoreRequest{NamespaceName: "third_parties", SemaphoreName: "partner_1", LeaseId: l, Weight: w, TimeoutSeconds: 120})
		}()
	}
	waitAcq(c3, 2)
	do("the first waiter", chromedp.WaitVisible(chromedp.CSS(`#waiters tr[data-position="1"][data-process="host-3/pid-300"]`)))
	waitAcq(c4, 1)
	do("the second waiter", chromedp.WaitVisible(chromedp.CSS(`#waiters tr[data-position="2"][data-process="host-4/pid-400"]`)))
	screenshot(t, bctx)

	// The holder of 2 releases: the head (2 permits) is granted, the other
	// waiter moves to the head.
	ok[*pb.ReleaseSemaphoreResponse](t)(api.ReleaseSemaphore(ctx, &pb.ReleaseSemaphoreRequest{NamespaceName: "third_parties", SemaphoreName: "partner_1", LeaseId: a}))
	do("the released holder leaving", chromedp.WaitNotPresent(chromedp.CSS(`#holders tr[data-lease="`+a+`"]`)))
	do("the head granted", chromedp.WaitVisible(chromedp.CSS(`#holders tr[data-lease="`+c3+`"]`)))
	do("the waiter at the head", chromedp.WaitVisible(chromedp.CSS(`#waiters tr[data-position="1"][data-process="host-4/pid-400"]`)),
		chromedp.WaitNotPresent(chromedp.CSS(`#waiters tr[data-position="2"]`)))
	if n := text(`#waiters-count`); n != "(1)" {
		t.Fatalf("waiters count %q", n)
	}
}

// screenshot saves the page: into GRACKLE_UI_SCREENSHOT when set (the
// docs' picture is made that way), else into the test's temp dir.
func screenshot(t *testing.T, ctx context.Context) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	out := os.Getenv("GRACKLE_UI_SCREENSHOT")
	if out == "" {
		out = filepath.Join(t.TempDir(), "ui.png")
	}
	if err := os.WriteFile(out, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Log(fmt.Sprintf("screenshot: %s (%d bytes)", out, len(png)))
}

// With access control on, the page asks for a token, keeps it in
// sessionStorage only, and shows what the token may read.
func TestPageAsksForToken(t *testing.T) {
	path := chromium(t)
	c := servertest.New(t)
	cfg := servertest.Config(t, "node1")
	cfg.ACL, cfg.HTTPAddr = true, "127.0.0.1:0"
	s := c.StartNode(cfg)
	servertest.Eventually(t, "a leader", 20*time.Second, s.IsLeader)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var boot *pb.BootstrapResponse
	servertest.Eventually(t, "the ACL bootstrap", 20*time.Second, func() bool {
		var err error
		boot, err = pb.NewACLServiceClient(c.Conn(0)).Bootstrap(ctx, &pb.BootstrapRequest{})
		return err == nil
	})
	c.SetToken(boot.Secret)
	ok[*pb.CreateNamespaceResponse](t)(c.Client(0).CreateNamespace(ctx, &pb.CreateNamespaceRequest{Name: "secured"}))
	c.SetToken("")

	bctx := browser(t, path)
	if err := chromedp.Do(bctx, chromedp.Navigate("http://"+s.HTTPAddr()+"/ui/"),
		chromedp.WaitVisible(chromedp.CSS(`#login`))); err != nil {
		t.Fatalf("no token form: %v", err)
	}
	if err := chromedp.Do(bctx, chromedp.SendKeys(chromedp.CSS(`#token`), boot.Secret),
		chromedp.Click(chromedp.CSS(`#login button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#namespaces a[href="#/ns/secured"]`)),
		chromedp.WaitNotVisible(chromedp.CSS(`#login`))); err != nil {
		t.Fatalf("with the token: %v", err)
	}
	where, err := chromedp.Run(bctx, chromedp.Evaluate[string](`JSON.stringify([sessionStorage.getItem("grackle-token") !== null, localStorage.length, document.cookie])`))
	if err != nil || where != `[true,0,""]` {
		t.Fatalf("token storage (session, local, cookies) = %s (%v)", where, err)
	}
}
