package webui_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/grackle-coord/grackle/server"
	"github.com/grackle-coord/grackle/server/servertest"
)

// The cluster page shows a member that was stopped as unreachable, in a
// red row and a banner naming it and what is left of the quorum, within
// 5 s (the node's probes about once a second, the page's poll), and as
// reachable again once it is back.
func TestClusterPageShowsMemberDown(t *testing.T) {
	path := chromium(t)
	c := servertest.Start(t, 3, func(cfg *server.Config) {
		cfg.HTTPAddr = "127.0.0.1:0"
		cfg.MemberProbeTimeout = 5 * time.Second // a live member is slow to answer under -race on a loaded machine
	})
	li := c.WaitLeader()
	fi := c.Follower()
	stopped := c.Cfgs[fi].NodeID
	bctx := browser(t, path)
	// shown polls the page until every selector matches a visible
	// element, and returns how long that took.
	shown := func(what string, within time.Duration, sels ...string) time.Duration {
		t.Helper()
		js := "[" + strings.Join(func() []string {
			var out []string
			for _, s := range sels {
				out = append(out, "(e => !!e && !e.hidden && e.offsetParent !== null)(document.querySelector("+strconv.Quote(s)+"))")
			}
			return out
		}(), ",") + "].every(Boolean)"
		start := time.Now()
		for {
			ok, err := chromedp.Run(bctx, chromedp.Evaluate[bool](js))
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			if ok {
				return time.Since(start)
			}
			if time.Since(start) > within {
				t.Fatalf("%s: not within %v", what, within)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	row := func(id, reach string) string {
		return `#members tr[data-node="` + id + `"][data-reachability="` + reach + `"]`
	}
	if err := chromedp.Do(bctx, chromedp.Navigate("http://"+c.Nodes[li].HTTPAddr()+"/ui/")); err != nil {
		t.Fatal(err)
	}
	shown("every member reachable on the page", 60*time.Second,
		row(c.Cfgs[li].NodeID, "self"), row(stopped, "reachable"), row(c.Cfgs[3-li-fi].NodeID, "reachable"))
	if ok, _ := chromedp.Run(bctx, chromedp.Evaluate[bool](`document.getElementById("members-alert").hidden`)); !ok {
		t.Fatal("the banner shows while every member is reachable")
	}

	cfg := c.Cfgs[fi]
	cfg.RaftAddr, cfg.GRPCAddr = c.Nodes[fi].RaftAddr(), c.Nodes[fi].GRPCAddr()
	c.StopNode(fi)
	took := shown("the stopped member shown unreachable", 5*time.Second,
		`#members tr.down[data-node="`+stopped+`"][data-reachability="unreachable"]`, `#members-alert`)
	t.Logf("the page shows %s unreachable %v after it stopped", stopped, took.Round(time.Millisecond))
	banner, err := chromedp.Run(bctx, chromedp.Text(chromedp.CSS(`#members-alert`)))
	if err != nil || !strings.Contains(banner, "Unreachable: "+stopped) || !strings.Contains(banner, "2 of 3 voters reachable: one more failure loses the quorum") {
		t.Fatalf("banner %q (%v)", banner, err)
	}
	cells, err := chromedp.Run(bctx, chromedp.Text(chromedp.CSS(`#members tr[data-node="`+stopped+`"]`)))
	if err != nil || !strings.Contains(cells, "unreachable") || !strings.Contains(cells, "silent") {
		t.Fatalf("row of the stopped member %q (%v)", cells, err)
	}
	screenshot(t, bctx, "GRACKLE_UI_MEMBER_DOWN_SCREENSHOT")

	c.StartNode(cfg)
	shown("the member reachable again", 30*time.Second, row(stopped, "reachable"))
	if ok, _ := chromedp.Run(bctx, chromedp.Evaluate[bool](`document.getElementById("members-alert").hidden`)); !ok {
		t.Fatal("the banner stays once every member is back")
	}
}
