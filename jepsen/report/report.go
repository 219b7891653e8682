// Package report writes the outcome of a fault-injection run: report.txt
// for people, report.json with the same data for tools, and latency.png,
// a plot of every operation's latency over the run with the nemesis
// windows shaded.
package report

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/grackle-coord/grackle/jepsen/check"
	"github.com/grackle-coord/grackle/jepsen/history"
)

// File names written by Write.
const (
	TextFile = "report.txt"
	JSONFile = "report.json"
	PlotFile = "latency.png"
)

// Report is the content of report.json.
type Report struct {
	Verdict string         `json:"verdict"` // check.Overall of the results
	Run     Run            `json:"run"`
	Ops     Counts         `json:"ops"`
	Results []check.Result `json:"results"`
}

// Run are the run's parameters.
type Run struct {
	Seed          int64             `json:"seed"`
	Nodes         int               `json:"nodes"`
	Duration      string            `json:"duration"`
	DurationNS    time.Duration     `json:"duration_ns"`
	NemesisKinds  []string          `json:"nemesis_kinds"`
	Nemeses       []history.Nemesis `json:"nemeses"`
	HealedAt      time.Duration     `json:"healed_at_ns"`
	ServedAgainAt time.Duration     `json:"served_again_at_ns"`
	Permits       map[string]int64  `json:"permits"`
	Meta          map[string]string `json:"meta,omitempty"`
}

// Counts are operation counts.
type Counts struct {
	Total           int                  `json:"total"`
	OK              int                  `json:"ok"`
	Fail            int                  `json:"fail"`
	Info            int                  `json:"info"`
	ByKind          map[string]KindCount `json:"by_kind"`
	AcquireOutcomes map[string]int       `json:"acquire_outcomes"`
	// LockAcquireOutcomes: the lock workload's AcquireLock answers.
	LockAcquireOutcomes map[string]int `json:"lock_acquire_outcomes,omitempty"`
	FenceRejected       int            `json:"fence_writes_rejected"`
	// WaitOutcomes: WaitForWaitGroup and WaitAtBarrier answers, as
	// "wg_wait COMPLETED", "barrier_wait TRIPPED", ...
	WaitOutcomes map[string]int `json:"wait_outcomes,omitempty"`
	// WaitGroups and Barriers the wait workloads created.
	WaitGroups int `json:"wait_groups,omitempty"`
	Barriers   int `json:"barriers,omitempty"`
}

// KindCount counts one kind of operation by outcome.
type KindCount struct {
	Total int `json:"total"`
	OK    int `json:"ok"`
	Fail  int `json:"fail"`
	Info  int `json:"info"`
}

// Build gathers the report's data.
func Build(h *history.History, results []check.Result) Report {
	r := Report{Verdict: check.Overall(results), Results: results}
	r.Run = Run{Seed: h.Seed, Nodes: h.Nodes, Duration: h.Duration.String(), DurationNS: h.Duration,
		Nemeses: h.Nemeses, HealedAt: h.HealedAt, ServedAgainAt: h.ServedAgainAt, Permits: h.Permits, Meta: h.Meta}
	r.Run.NemesisKinds = nemesisKinds(h)
	r.Ops = Counts{ByKind: map[string]KindCount{}, AcquireOutcomes: map[string]int{}, LockAcquireOutcomes: map[string]int{}, WaitOutcomes: map[string]int{},
		WaitGroups: h.WaitGroups, Barriers: h.Barriers}
	for _, o := range h.Ops {
		r.Ops.Total++
		k := r.Ops.ByKind[o.Kind]
		k.Total++
		switch o.Outcome {
		case history.OK:
			r.Ops.OK++
			k.OK++
			if o.Kind == history.Acquire {
				r.Ops.AcquireOutcomes[o.AcquireOutcome]++
			}
			if o.Kind == history.LockAcquire {
				r.Ops.LockAcquireOutcomes[o.AcquireOutcome]++
			}
			if o.WaitOutcome != "" {
				r.Ops.WaitOutcomes[o.Kind+" "+o.WaitOutcome]++
			}
			if o.Kind == history.FenceWrite && !o.Accepted {
				r.Ops.FenceRejected++
			}
		case history.Fail:
			r.Ops.Fail++
			k.Fail++
		case history.Info:
			r.Ops.Info++
			k.Info++
		}
		r.Ops.ByKind[o.Kind] = k
	}
	return r
}

// nemesisKinds are the configured nemeses (Meta["nemeses"]) or else the
// kinds of the recorded windows.
func nemesisKinds(h *history.History) []string {
	var out []string
	if h.Meta != nil && h.Meta["nemeses"] != "" {
		for _, k := range strings.Split(h.Meta["nemeses"], ",") {
			if k = strings.TrimSpace(k); k != "" {
				out = append(out, k)
			}
		}
		return out
	}
	seen := map[string]bool{}
	for _, n := range h.Nemeses {
		if !seen[n.Kind] {
			seen[n.Kind] = true
			out = append(out, n.Kind)
		}
	}
	return out
}

// Write writes report.txt, report.json and latency.png into dir (created
// if needed).
func Write(dir string, h *history.History, results []check.Result) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	rep := Build(h, results)
	if err := writeFile(filepath.Join(dir, TextFile), func(w io.Writer) error { return WriteText(w, rep) }); err != nil {
		return err
	}
	if err := writeFile(filepath.Join(dir, JSONFile), func(w io.Writer) error {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}); err != nil {
		return err
	}
	return writeFile(filepath.Join(dir, PlotFile), func(w io.Writer) error { return WritePlot(w, h) })
}

func writeFile(path string, fn func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	if err := fn(f); err != nil {
		f.Close()
		return fmt.Errorf("report: %s: %w", filepath.Base(path), err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	return nil
}

func secs(d time.Duration) string { return fmt.Sprintf("%.3fs", d.Seconds()) }

// WriteText renders the report for people.
func WriteText(w io.Writer, r Report) error {
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	p("Grackle fault-injection run: %s\n\n", strings.ToUpper(r.Verdict))
	p("Run\n")
	p("  seed %d, %d nodes, duration %s\n", r.Run.Seed, r.Run.Nodes, r.Run.Duration)
	kinds := strings.Join(r.Run.NemesisKinds, ", ")
	if kinds == "" {
		kinds = "none"
	}
	p("  nemeses: %s (%d windows)\n", kinds, len(r.Run.Nemeses))
	for _, n := range r.Run.Nemeses {
		p("    %9s .. %9s  %-20s %s\n", secs(n.Start), secs(n.End), n.Kind, n.Detail)
	}
	p("  healed at %s; ", secs(r.Run.HealedAt))
	if r.Run.ServedAgainAt == 0 {
		p("never served again\n")
	} else {
		p("served again at %s (+%s)\n", secs(r.Run.ServedAgainAt), (r.Run.ServedAgainAt - r.Run.HealedAt).Round(time.Millisecond))
	}
	if len(r.Run.Permits) > 0 {
		names := make([]string, 0, len(r.Run.Permits))
		for s := range r.Run.Permits {
			names = append(names, s)
		}
		sort.Strings(names)
		parts := make([]string, len(names))
		for i, s := range names {
			parts[i] = fmt.Sprintf("%s=%d", s, r.Run.Permits[s])
		}
		p("  permits: %s\n", strings.Join(parts, " "))
	}
	if len(r.Run.Meta) > 0 {
		keys := make([]string, 0, len(r.Run.Meta))
		for k := range r.Run.Meta {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			p("  %s: %s\n", k, r.Run.Meta[k])
		}
	}

	p("\nOperations: %d (ok %d, fail %d, info %d)\n", r.Ops.Total, r.Ops.OK, r.Ops.Fail, r.Ops.Info)
	p("  %-17s %8s %8s %8s %8s\n", "kind", "total", "ok", "fail", "info")
	kinds2 := make([]string, 0, len(r.Ops.ByKind))
	for k := range r.Ops.ByKind {
		kinds2 = append(kinds2, k)
	}
	sort.Strings(kinds2)
	for _, k := range kinds2 {
		c := r.Ops.ByKind[k]
		p("  %-17s %8d %8d %8d %8d\n", k, c.Total, c.OK, c.Fail, c.Info)
	}
	for _, a := range []struct {
		what string
		m    map[string]int
	}{{"acquire", r.Ops.AcquireOutcomes}, {"lock acquire", r.Ops.LockAcquireOutcomes}, {"wait", r.Ops.WaitOutcomes}} {
		if len(a.m) == 0 {
			continue
		}
		outs := make([]string, 0, len(a.m))
		for k := range a.m {
			outs = append(outs, k)
		}
		sort.Strings(outs)
		parts := make([]string, len(outs))
		for i, k := range outs {
			parts[i] = fmt.Sprintf("%s %d", k, a.m[k])
		}
		p("  %s answers: %s\n", a.what, strings.Join(parts, ", "))
	}
	if r.Ops.WaitGroups > 0 || r.Ops.Barriers > 0 {
		p("  wait groups created: %d, barriers: %d\n", r.Ops.WaitGroups, r.Ops.Barriers)
	}
	if c, ok := r.Ops.ByKind[history.FenceWrite]; ok {
		p("  fenced writes rejected: %d of %d\n", r.Ops.FenceRejected, c.OK)
	}

	p("\nCheckers\n")
	for _, res := range r.Results {
		v := res.Valid
		if res.Skipped {
			v += " (skipped)"
		}
		p("  %-16s %-18s %d anomalies, %s\n", res.Name, v, len(res.Anomalies), res.Elapsed.Round(time.Millisecond))
		if len(res.Stats) > 0 {
			keys := make([]string, 0, len(res.Stats))
			for k := range res.Stats {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			parts := make([]string, len(keys))
			for i, k := range keys {
				parts[i] = fmt.Sprintf("%s=%d", k, res.Stats[k])
			}
			p("      %s\n", strings.Join(parts, " "))
		}
		for _, n := range res.Notes {
			p("      note: %s\n", n)
		}
	}

	n := 0
	for _, res := range r.Results {
		n += len(res.Anomalies)
	}
	if n == 0 {
		p("\nNo anomalies.\n")
	} else {
		p("\nAnomalies (%d)\n", n)
		i := 0
		for _, res := range r.Results {
			for _, a := range res.Anomalies {
				i++
				p("\n%d. [%s] %s\n", i, res.Name, a.Kind)
				p("   %s\n", a.Description)
				if len(a.Ops) > 0 {
					p("   sub-history (%d ops):\n", len(a.Ops))
				}
				for _, o := range a.Ops {
					p("     %s\n", check.FormatOp(o))
				}
			}
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}
