//go:build faultinject

package fault

import (
	"os"
	"strings"
	"sync"
)

// In a build with `-tags faultinject`, GRACKLE_FAULT (comma-separated)
// breaks one guarantee on purpose, so the fault-injection suite can show it
// would catch the bug:
//
//	stale-read   reads are answered from the local state machine on any
//	             node, without forwarding or a leadership check
//	early-grant  an acquire that fits in the leader's current view is
//	             acknowledged ACQUIRED before its command commits
//	barrier-early-release  a WaitAtBarrier waiter is released TRIPPED
//	             when one arrival is still missing
//
// Never ship a binary built with this tag.
var (
	faultOnce sync.Once
	faults    map[string]bool
)

func On(name string) bool {
	faultOnce.Do(func() {
		faults = map[string]bool{}
		for _, f := range strings.Split(os.Getenv("GRACKLE_FAULT"), ",") {
			if f = strings.TrimSpace(f); f != "" {
				faults[f] = true
			}
		}
	})
	return faults[name]
}
