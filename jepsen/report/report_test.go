package report

import (
	"encoding/json"
	"image/png"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/grackle-coord/grackle/jepsen/check"
	"github.com/grackle-coord/grackle/jepsen/history"
)

// synthetic is a small run: busy clients with varied latencies, a few
// indeterminate and failed ops, two nemesis windows, and a double grant on
// a 1-permit semaphore.
func synthetic() *history.History {
	rng := rand.New(rand.NewSource(7))
	h := &history.History{Seed: 7, Nodes: 3, Duration: 10 * time.Second,
		Permits: map[string]int64{"lin-0": 1, "lin-1": 2},
		Meta:    map[string]string{"nemeses": "partition-halves,kill", "linear_prefix": "lin-"},
		Nemeses: []history.Nemesis{
			{Kind: "partition-halves", Detail: "n1|n2,n3", Start: 2 * time.Second, End: 4 * time.Second},
			{Kind: "kill", Detail: "n2", Start: 6 * time.Second, End: 7500 * time.Millisecond},
		},
		HealedAt: 10 * time.Second, ServedAgainAt: 10*time.Second + 300*time.Millisecond}
	id := 0
	add := func(o history.Op) {
		id++
		o.ID = id
		o.Namespace = "jepsen"
		h.Ops = append(h.Ops, o)
	}
	add(history.Op{Process: 1, Kind: history.CreateLease, Lease: "ls_a", TTL: 300, Outcome: history.OK, Invoke: 0, Complete: 2 * time.Millisecond})
	add(history.Op{Process: 2, Kind: history.CreateLease, Lease: "ls_b", TTL: 300, Outcome: history.OK, Invoke: 0, Complete: 3 * time.Millisecond})
	// Reads of lin-1 at random, nobody holds it.
	for t := 10 * time.Millisecond; t < 10*time.Second; t += time.Duration(5+rng.Intn(20)) * time.Millisecond {
		lat := time.Duration(200+rng.Intn(20000)) * time.Microsecond
		if t > 2*time.Second && t < 4*time.Second {
			lat *= 40
		}
		o := history.Op{Process: 3 + rng.Intn(4), Kind: history.GetSemaphore, Semaphore: "lin-1", Invoke: t, Complete: t + lat, Outcome: history.OK}
		switch rng.Intn(40) {
		case 0:
			o.Outcome, o.Error = history.Fail, "Unavailable: no leader is known"
		case 1:
			o.Kind, o.Outcome, o.Complete, o.Lease, o.Weight = history.Acquire, history.Info, 0, "ls_c", 1
		}
		add(o)
	}
	// The double grant.
	add(history.Op{Process: 1, Kind: history.Acquire, Semaphore: "lin-0", Lease: "ls_a", Weight: 1, Outcome: history.OK,
		AcquireOutcome: history.Acquired, Token: 11, Invoke: 5 * time.Second, Complete: 5*time.Second + 4*time.Millisecond})
	add(history.Op{Process: 2, Kind: history.Acquire, Semaphore: "lin-0", Lease: "ls_b", Weight: 1, Outcome: history.OK,
		AcquireOutcome: history.Acquired, Token: 12, Invoke: 5100 * time.Millisecond, Complete: 5102 * time.Millisecond})
	add(history.Op{Process: 1, Kind: history.FenceWrite, Semaphore: "lin-0", Lease: "ls_a", Token: 11, Accepted: true, Outcome: history.OK,
		Invoke: 5005 * time.Millisecond, Complete: 5005 * time.Millisecond})
	return h
}

func TestWrite(t *testing.T) {
	h := synthetic()
	results := check.All(h, check.Options{LinearizabilityTimeout: 10 * time.Second})
	if check.Overall(results) != check.Invalid {
		t.Fatalf("the synthetic history should have an anomaly: %+v", results)
	}
	dir := filepath.Join(t.TempDir(), "out")
	if err := Write(dir, h, results); err != nil {
		t.Fatal(err)
	}

	txt, err := os.ReadFile(filepath.Join(dir, TextFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"ANOMALY", "seed 7", "3 nodes", "partition-halves", "double-grant", "not-linearizable",
		"acquire jepsen/lin-0 lease=ls_b", "get", "Operations:"} {
		if !strings.Contains(string(txt), want) {
			t.Errorf("report.txt lacks %q:\n%s", want, txt)
		}
	}

	var rep Report
	js, err := os.ReadFile(filepath.Join(dir, JSONFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(js, &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Verdict != check.Invalid || rep.Run.Seed != 7 || rep.Ops.Total != len(h.Ops) || len(rep.Results) != len(results) {
		t.Errorf("report.json: verdict %s seed %d ops %d results %d", rep.Verdict, rep.Run.Seed, rep.Ops.Total, len(rep.Results))
	}
	if rep.Ops.ByKind[history.GetSemaphore].Fail == 0 || rep.Ops.Info == 0 {
		t.Errorf("counts: %+v", rep.Ops)
	}

	f, err := os.Open(filepath.Join(dir, PlotFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	if b := img.Bounds(); b.Dx() != PlotWidth || b.Dy() != PlotHeight {
		t.Errorf("plot is %v, want %dx%d", b, PlotWidth, PlotHeight)
	}
	// Something was drawn in the plot area in an op kind's colour.
	found := false
	want := kindColors[history.GetSemaphore]
	for y := top; y < bottom && !found; y++ {
		for x := left; x < right; x++ {
			r, g, b, _ := img.At(x, y).RGBA()
			if uint8(r>>8) == want.R && uint8(g>>8) == want.G && uint8(b>>8) == want.B {
				found = true
				break
			}
		}
	}
	if !found {
		t.Error("no get marker in the plot")
	}
	if os.Getenv("REPORT_KEEP") != "" {
		t.Logf("report in %s", dir)
		_ = os.CopyFS(os.Getenv("REPORT_KEEP"), os.DirFS(dir))
	}
}

func TestWriteEmptyHistory(t *testing.T) {
	h := &history.History{Seed: 1, Nodes: 3, Duration: time.Second}
	dir := t.TempDir()
	if err := Write(dir, h, check.All(h, check.Options{})); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{TextFile, JSONFile, PlotFile} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Error(err)
		}
	}
}
