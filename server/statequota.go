package server

import (
	"fmt"
	"math"
	"runtime/debug"
	"strconv"
	"strings"
)

// DefaultMaxStateBytes is --max-state-bytes' default: half of the Go
// memory limit in force (--memory-limit, GOMEMLIMIT), or
// defaultStateQuotaNoLimit when there is none.
const DefaultMaxStateBytes = "auto"

// defaultStateQuotaNoLimit is the quota "auto" sets on a node without a
// memory limit: a bound well past what a default node holds (a million
// leases account about 0.4 GiB), below what would take a small machine down.
const defaultStateQuotaNoLimit = 2 << 30

// stateQuotaShare is the share of the memory limit "auto" gives the state:
// the accounted size is close to the live heap the state takes, and the
// collector needs room above the live heap, as do the snapshot being
// written, the Raft log's cache and the requests in flight.
const stateQuotaShare = 0.5

// resolveMaxStateBytes reads --max-state-bytes: "auto" (or ""), "off", a
// size (512MiB, 2GiB, 1073741824), or 0 or a negative number (no bound).
// memLimit is the Go memory limit in force (math.MaxInt64: none). The
// result is the replicated Limits.MaxStateBytes (0: no bound).
func resolveMaxStateBytes(spec string, memLimit int64) (int64, error) {
	spec = strings.TrimSpace(spec)
	switch strings.ToLower(spec) {
	case "", DefaultMaxStateBytes:
		if memLimit <= 0 || memLimit == math.MaxInt64 {
			return defaultStateQuotaNoLimit, nil
		}
		return int64(float64(memLimit) * stateQuotaShare), nil
	case "off", "none":
		return 0, nil
	}
	if n, err := strconv.ParseInt(spec, 10, 64); err == nil && n <= 0 {
		return 0, nil
	}
	n, err := parseSize(spec)
	if err != nil {
		return 0, fmt.Errorf("max-state-bytes: %q: want auto, off (or 0), or a size such as 512MiB or 2GiB (B, KiB, MiB, GiB, TiB)", spec)
	}
	return n, nil
}

// CheckMaxStateBytes reports a --max-state-bytes value no server accepts.
func CheckMaxStateBytes(spec string) error {
	_, err := resolveMaxStateBytes(spec, math.MaxInt64)
	return err
}

// currentMemoryLimit is the Go runtime's soft memory limit in force.
func currentMemoryLimit() int64 { return debug.SetMemoryLimit(-1) }
