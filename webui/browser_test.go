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

// browser starts a headless Chromium (with extra options, if any); the
// context ends it.
func browser(t *testing.T, path string, extra ...chromedp.ExecAllocatorOption) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.NoSandbox, // CI runs as root
		chromedp.DisableGPU,
		chromedp.WindowSize(1280, 860),
		chromedp.Flag("no-first-run", true),
	)
	opts = append(opts, extra...)
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
	screenshot(t, bctx, "GRACKLE_UI_SCREENSHOT")

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

// screenshot saves the page: into the file the environment variable env
// names when set (the docs' pictures are made that way), else into the
// test's temp dir.
func screenshot(t *testing.T, ctx context.Context, env string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	out := os.Getenv(env)
	if out == "" {
		out = filepath.Join(t.TempDir(), "ui.png")
	}
	if err := os.WriteFile(out, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Log(fmt.Sprintf("screenshot: %s (%d bytes)", out, len(png)))
}

// The locks page: a namespace's held locks as a tree by path segment, with
// their holders; a lock's holders and queue live: a holder appears when
// the API grants it, a waiter when it queues, and the head of the queue is
// granted (with its fencing token) when the holders release.
func TestLocksPageLive(t *testing.T) {
	path := chromium(t)
	c := servertest.Start(t, 1, func(cfg *server.Config) { cfg.HTTPAddr = "127.0.0.1:0" })
	api := c.Client(0)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel) // ends the calls still waiting, before the node stops
	const ns = "shop"
	ok[*pb.CreateNamespaceResponse](t)(api.CreateNamespace(ctx, &pb.CreateNamespaceRequest{Name: ns, Description: "Orders and reports"}))
	lease := func(proc string) string {
		return ok[*pb.CreateLockLeaseResponse](t)(api.CreateLockLease(ctx, &pb.CreateLockLeaseRequest{NamespaceName: ns, ProcessId: proc, TtlSeconds: 300})).Lease.LeaseId
	}
	acquire := func(lock, lease string, exclusive bool) *pb.LockHolder {
		t.Helper()
		r := ok[*pb.AcquireLockResponse](t)(api.AcquireLock(ctx, &pb.AcquireLockRequest{NamespaceName: ns, LockName: lock, LeaseId: lease, Exclusive: exclusive}))
		if r.Outcome != pb.AcquireOutcome_ACQUIRE_OUTCOME_ACQUIRED {
			t.Fatalf("%s by %s: %v (%v %v)", lock, lease, r.Outcome, r.Reason, r.BlockingLocks)
		}
		return r.Holder
	}
	// wait acquires in the background (the call blocks while it queues);
	// the grant, when it comes, arrives on the channel.
	wait := func(lock, lease string, exclusive bool) <-chan *pb.AcquireLockResponse {
		got := make(chan *pb.AcquireLockResponse, 1)
		go func() {
			r, err := api.AcquireLock(ctx, &pb.AcquireLockRequest{NamespaceName: ns, LockName: lock, LeaseId: lease, Exclusive: exclusive, TimeoutSeconds: 120})
			if err == nil {
				got <- r
			}
		}()
		return got
	}
	a, cron := lease("host-1/pid-100"), lease("cron/pid-9")
	held := acquire("orders/eu/42", a, true)
	acquire("reports", cron, false)

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

	// Lock leases beside the semaphore leases.
	do("the namespace page", chromedp.Navigate(base+"#/ns/"+ns),
		chromedp.WaitVisible(chromedp.CSS(`#lock-leases tr[data-lease="`+a+`"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#lock-leases tr[data-lease="`+cron+`"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#leases tr.empty`)))

	// The tree: every segment above a held lock, each held lock with its
	// holders.
	do("the locks tab", chromedp.Click(chromedp.CSS(`#tab-locks`)),
		chromedp.WaitVisible(chromedp.CSS(`#locks tr[data-lock="orders/eu/42"][data-lease="`+a+`"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#locks tr.path[data-lock="orders"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#locks tr.path[data-lock="orders/eu"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#locks tr[data-lock="reports"][data-lease="`+cron+`"]`)))
	if row := text(`#locks tr[data-lock="orders/eu/42"]`); !strings.Contains(row, "exclusive") || !strings.Contains(row, "host-1/pid-100") ||
		!strings.Contains(row, fmt.Sprint(held.FencingToken)) {
		t.Fatalf("tree row of orders/eu/42: %q (fencing token %d)", row, held.FencingToken)
	}

	// A lock nobody holds yet, followed live.
	do("the lock page", chromedp.Navigate(base+"#/ns/"+ns+"/locks/orders/us/7"),
		chromedp.WaitVisible(chromedp.CSS(`#lock-live.live`)),
		chromedp.WaitVisible(chromedp.CSS(`#lock-holders tr.empty`)))
	b, c3 := lease("host-2/pid-200"), lease("host-3/pid-300")
	acquire("orders/us/7", b, false)
	do("the new holder", chromedp.WaitVisible(chromedp.CSS(`#lock-holders tr[data-lease="`+b+`"][data-mode="shared"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#locks tr[data-lock="orders/us/7"][data-lease="`+b+`"]`)))
	acquire("orders/us/7", c3, false)
	do("the second shared holder", chromedp.WaitVisible(chromedp.CSS(`#lock-holders tr[data-lease="`+c3+`"][data-mode="shared"]`)))

	// An exclusive request queues behind the shared holders, and a shared
	// one behind it (no writer starvation); then a shared holder asks for
	// exclusive: its upgrade waits at the head. The queue, in order.
	d, e := lease("host-4/pid-400"), lease("host-5/pid-500")
	granted := wait("orders/us/7", d, true)
	do("the waiter", chromedp.WaitVisible(chromedp.CSS(`#lock-waiters tr[data-position="1"][data-process="host-4/pid-400"][data-mode="exclusive"]`)))
	wait("orders/us/7", e, false)
	do("the second waiter", chromedp.WaitVisible(chromedp.CSS(`#lock-waiters tr[data-position="2"][data-process="host-5/pid-500"][data-mode="shared"]`)))
	upgraded := wait("orders/us/7", b, true)
	do("the upgrade at the head", chromedp.WaitVisible(chromedp.CSS(`#lock-waiters tr[data-position="1"][data-lease="`+b+`"][data-mode="exclusive"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#lock-waiters tr[data-position="3"][data-process="host-5/pid-500"]`)))
	if row := text(`#lock-waiters tr[data-position="1"]`); !strings.Contains(row, "upgrade") {
		t.Fatalf("head of the queue %q does not say upgrade", row)
	}
	if n := text(`#lock-waiters-count`); n != "(3)" {
		t.Fatalf("waiters count %q", n)
	}
	screenshot(t, bctx, "GRACKLE_UI_LOCKS_SCREENSHOT")

	grantOf := func(what string, ch <-chan *pb.AcquireLockResponse) *pb.LockHolder {
		t.Helper()
		select {
		case r := <-ch:
			if r.Outcome != pb.AcquireOutcome_ACQUIRE_OUTCOME_ACQUIRED {
				t.Fatalf("%s: %v", what, r.Outcome)
			}
			return r.Holder
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: not granted within 30 s", what)
		}
		return nil
	}
	release := func(l string) {
		ok[*pb.ReleaseLockResponse](t)(api.ReleaseLock(ctx, &pb.ReleaseLockRequest{NamespaceName: ns, LockName: "orders/us/7", LeaseId: l}))
	}

	// The other shared holder releases: the upgrade is granted, the
	// others move up.
	release(c3)
	up := grantOf("the upgrade", upgraded)
	do("the upgraded holder", chromedp.WaitVisible(chromedp.CSS(`#lock-holders tr[data-lease="`+b+`"][data-mode="exclusive"]`)),
		chromedp.WaitNotPresent(chromedp.CSS(`#lock-holders tr[data-lease="`+c3+`"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#lock-waiters tr[data-position="1"][data-process="host-4/pid-400"]`)),
		chromedp.WaitNotPresent(chromedp.CSS(`#lock-waiters tr[data-position="3"]`)))
	if row := text(`#lock-holders tr[data-lease="` + b + `"]`); !strings.Contains(row, fmt.Sprint(up.FencingToken)) {
		t.Fatalf("holder row %q lacks the upgrade's fencing token %d", row, up.FencingToken)
	}

	// It releases: the exclusive head is granted, the shared waiter moves
	// to the head.
	release(b)
	grant := grantOf("the exclusive waiter", granted)
	do("the head granted", chromedp.WaitVisible(chromedp.CSS(`#lock-holders tr[data-lease="`+d+`"][data-mode="exclusive"]`)),
		chromedp.WaitNotPresent(chromedp.CSS(`#lock-holders tr[data-lease="`+b+`"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#lock-waiters tr[data-position="1"][data-process="host-5/pid-500"]`)),
		chromedp.WaitNotPresent(chromedp.CSS(`#lock-waiters tr[data-position="2"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#locks tr[data-lock="orders/us/7"][data-lease="`+d+`"]`)))
	if row := text(`#lock-holders tr[data-lease="` + d + `"]`); !strings.Contains(row, fmt.Sprint(grant.FencingToken)) || grant.FencingToken <= up.FencingToken {
		t.Fatalf("holder row %q, fencing token %d after the upgrade's %d", row, grant.FencingToken, up.FencingToken)
	}
	if st := text(`#lock-state`); !strings.HasPrefix(st, "exclusive, locked since") {
		t.Fatalf("lock state line %q", st)
	}
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

// The wait groups and barriers pages, live by polling: a group's progress
// moves as jobs complete, its status turns completed (another's expired
// at its expires_at), its completed jobs page by page; a barrier's
// arrivals count up in arrival order, and at the trip the generation
// moves on, the arrivals listed under the previous generation.
func TestWaitGroupsAndBarriersPagesLive(t *testing.T) {
	path := chromium(t)
	c := servertest.Start(t, 1, func(cfg *server.Config) { cfg.HTTPAddr = "127.0.0.1:0" })
	api := c.Client(0)
	ctx := context.Background()
	const ns = "batch"
	ok[*pb.CreateNamespaceResponse](t)(api.CreateNamespace(ctx, &pb.CreateNamespaceRequest{Name: ns, Description: "Nightly batch"}))
	group := func(name string, counter int64, expires time.Duration, desc string) {
		var at int64
		if expires > 0 {
			at = time.Now().Add(expires).UnixNano()
		}
		ok[*pb.CreateWaitGroupResponse](t)(api.CreateWaitGroup(ctx, &pb.CreateWaitGroupRequest{NamespaceName: ns, WaitGroupName: name,
			Counter: counter, ExpiresAt: at, Description: desc}))
	}
	complete := func(wg string, ids ...string) {
		t.Helper()
		var jobs []*pb.WaitGroupJob
		for _, id := range ids {
			jobs = append(jobs, &pb.WaitGroupJob{JobId: id, Metadata: map[string]string{"worker": "host-" + id[len(id)-1:]}})
		}
		ok[*pb.CompleteJobsFromWaitGroupResponse](t)(api.CompleteJobsFromWaitGroup(ctx, &pb.CompleteJobsFromWaitGroupRequest{NamespaceName: ns,
			WaitGroupName: wg, Jobs: jobs}))
	}
	group("export", 5, time.Hour, "Tonight's export: one job per shard")
	group("reports", 3, 0, "Daily reports")
	group("retries", 4, 4*time.Second, "Failed jobs retried")
	complete("export", "shard-0", "shard-1")
	complete("reports", "report-1", "report-2", "report-3")
	complete("retries", "retry-1")

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
	visible := func(sel string) chromedp.Action[chromedp.Void] { return chromedp.WaitVisible(chromedp.CSS(sel)) }

	// The list: progress, status, time left; it follows completions.
	do("the wait groups tab", chromedp.Navigate(base+"#/ns/"+ns), chromedp.Click(chromedp.CSS(`#tab-wgs`)),
		visible(`#waitgroups tr[data-wg="export"][data-status="active"][data-completed="2"]`),
		visible(`#waitgroups tr[data-wg="reports"][data-status="completed"][data-completed="3"]`))
	if row := text(`#waitgroups tr[data-wg="export"]`); !strings.Contains(row, "2 / 5 (40%)") || !strings.Contains(row, "left") {
		t.Fatalf("export row %q", row)
	}
	if row := text(`#waitgroups tr[data-wg="reports"]`); !strings.Contains(row, "completed") || !strings.Contains(row, "ago") {
		t.Fatalf("reports row %q", row)
	}
	if _, err := chromedp.Run(bctx, chromedp.Evaluate[bool](`(window.exportLink = document.querySelector('#waitgroups tr[data-wg="export"] a')) !== null`)); err != nil {
		t.Fatal(err)
	}
	complete("export", "shard-2")
	do("a completion shown live", visible(`#waitgroups tr[data-wg="export"][data-completed="3"]`))
	// The refresh changed the row's cells but kept its link (a click in
	// progress is not lost to the poll).
	if same, err := chromedp.Run(bctx, chromedp.Evaluate[bool](`window.exportLink.isConnected && window.exportLink === document.querySelector('#waitgroups tr[data-wg="export"] a')`)); err != nil || !same {
		t.Fatalf("the export link was replaced by a refresh (%v)", err)
	}
	do("an expiry shown live", visible(`#waitgroups tr[data-wg="retries"][data-status="expired"][data-completed="1"]`))

	// A group picked: its progress and completed jobs, live.
	do("the group", chromedp.Click(chromedp.CSS(`#waitgroups tr[data-wg="export"] a`)),
		visible(`#waitgroup[data-completed="3"]`), visible(`#wg-jobs tr[data-job="shard-2"]`))
	if p := text(`#wg-progress`); !strings.HasPrefix(p, "3 of 5 jobs done (60%), 2 to go, ") || !strings.HasSuffix(p, " left") {
		t.Fatalf("progress line %q", p)
	}
	complete("export", "shard-3")
	do("the new job", visible(`#wg-jobs tr[data-job="shard-3"]`), visible(`#waitgroup[data-completed="4"]`))
	if row := text(`#wg-jobs tr[data-job="shard-3"]`); !strings.Contains(row, "worker=host-3") {
		t.Fatalf("job row %q", row)
	}
	screenshot(t, bctx, "GRACKLE_UI_WAITGROUPS_SCREENSHOT")
	complete("export", "shard-4")
	do("completed", visible(`#waitgroup[data-status="completed"][data-completed="5"]`),
		visible(`#waitgroups tr[data-wg="export"][data-status="completed"]`))

	// Paged: two jobs a page.
	do("jobs by pages", chromedp.Navigate(base+"?page_size=2#/ns/"+ns+"/waitgroups/export"),
		visible(`#wg-jobs tr[data-job="shard-1"]`), visible(`#wg-jobs-next`))
	do("the next page", chromedp.Click(chromedp.CSS(`#wg-jobs-next`)),
		visible(`#wg-jobs tr[data-job="shard-3"]`), chromedp.WaitNotPresent(chromedp.CSS(`#wg-jobs tr[data-job="shard-1"]`)))
	if n := text(`#wg-jobs-count`); n != "(3-4 of 5 shown)" {
		t.Fatalf("jobs count %q", n)
	}

	// Barriers.
	barrier := func(name string, expected int64, desc string) {
		ok[*pb.CreateBarrierResponse](t)(api.CreateBarrier(ctx, &pb.CreateBarrierRequest{NamespaceName: ns, BarrierName: name,
			ExpectedProcesses: expected, Description: desc}))
	}
	arrive := func(bar, proc string, gen int64) *pb.ArriveAtBarrierResponse {
		t.Helper()
		return ok[*pb.ArriveAtBarrierResponse](t)(api.ArriveAtBarrier(ctx, &pb.ArriveAtBarrierRequest{NamespaceName: ns, BarrierName: bar,
			ProcessId: proc, ExpectedGeneration: gen, Metadata: map[string]string{"phase": fmt.Sprint(gen)}}))
	}
	barrier("phases", 3, "Shards meet between phases")
	barrier("deploy", 4, "Canary hosts ready")
	arrive("phases", "shard-1", 1)
	arrive("deploy", "canary-1", 1)
	do("the barriers tab", chromedp.Navigate(base+"#/ns/"+ns+"/barriers"),
		visible(`#barriers tr[data-bar="phases"][data-generation="1"][data-arrived="1"]`),
		visible(`#barriers tr[data-bar="deploy"][data-arrived="1"]`))
	arrive("phases", "shard-0", 1)
	do("an arrival shown live", visible(`#barriers tr[data-bar="phases"][data-arrived="2"]`))
	if row := text(`#barriers tr[data-bar="phases"]`); !strings.Contains(row, "2 / 3") {
		t.Fatalf("phases row %q", row)
	}
	do("the barrier", chromedp.Click(chromedp.CSS(`#barriers tr[data-bar="phases"] a`)),
		visible(`#bar-current tr[data-position="1"][data-process="shard-1"]`),
		visible(`#bar-current tr[data-position="2"][data-process="shard-0"]`),
		visible(`#bar-previous tr.empty`))
	if p := text(`#bar-progress`); p != "2 of 3 processes arrived at generation 1, 1 to go" {
		t.Fatalf("progress line %q", p)
	}
	// The last arrival trips it: generation 2 starts empty, generation 1's
	// arrivals listed as the previous one; then one arrives at 2.
	if r := arrive("phases", "shard-2", 1); !r.AllArrived || r.Barrier.Generation != 2 {
		t.Fatalf("the last arrival: %v", r)
	}
	do("the trip", visible(`#barrier[data-generation="2"][data-arrived="0"]`),
		visible(`#bar-previous tr[data-position="3"][data-process="shard-2"]`),
		visible(`#bar-current tr.empty`))
	arrive("phases", "shard-2", 2)
	do("an arrival at generation 2", visible(`#bar-current tr[data-position="1"][data-process="shard-2"]`),
		visible(`#barriers tr[data-bar="phases"][data-generation="2"][data-arrived="1"]`))
	if cur, prev := text(`#bar-cur-gen`), text(`#bar-prev-gen`); cur != "2" || prev != "1" {
		t.Fatalf("generations shown: current %q, previous %q", cur, prev)
	}
	screenshot(t, bctx, "GRACKLE_UI_BARRIERS_SCREENSHOT")
}
