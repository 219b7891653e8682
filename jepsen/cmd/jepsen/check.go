package main

import (
	"fmt"
	"path/filepath"
	"time"

	"github.com/grackle-coord/grackle/jepsen/check"
	"github.com/grackle-coord/grackle/jepsen/history"
	"github.com/grackle-coord/grackle/jepsen/report"
)

// checkAndReport runs every checker, writes the report, prints the
// verdicts and returns the exit code: 1 on any anomaly, 3 when a checker
// could not decide (porcupine timed out), else 0.
func checkAndReport(out string, h *history.History, linTimeout, liveness time.Duration) int {
	results := check.All(h, check.Options{LinearizabilityTimeout: linTimeout, LivenessBound: liveness,
		VisualizationPath: filepath.Join(out, "linearizability.html")})
	if err := report.Write(out, h, results); err != nil {
		fmt.Println("jepsen: report:", err)
	}
	counts := map[string]int{}
	for _, o := range h.Ops {
		counts[o.Outcome]++
	}
	fmt.Printf("jepsen: %d operations (ok %d, fail %d, indeterminate %d), %d nemesis windows\n",
		len(h.Ops), counts["ok"], counts["fail"], counts["info"], len(h.Nemeses))
	for _, r := range results {
		fmt.Printf("jepsen: %-16s %s (%d anomalies)\n", r.Name, r.Valid, len(r.Anomalies))
		for _, a := range r.Anomalies {
			fmt.Printf("jepsen:   %s: %s\n", a.Kind, a.Description)
		}
	}
	overall := check.Overall(results)
	fmt.Printf("jepsen: verdict %s; report in %s\n", overall, out)
	switch overall {
	case "anomaly":
		return 1
	case "unknown":
		return 3
	}
	return 0
}
