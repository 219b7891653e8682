package main

import (
	"fmt"

	"github.com/grackle-coord/grackle/jepsen/history"
)

// checkAndReport is replaced once the checkers land.
func checkAndReport(out string, h *history.History) int {
	counts := map[string]int{}
	for _, o := range h.Ops {
		counts[o.Kind+"/"+o.Outcome]++
	}
	fmt.Println("jepsen: ops", len(h.Ops), counts, "nemeses", len(h.Nemeses))
	return 0
}
