package server

import (
	"fmt"
	"os"
	"strings"

	"github.com/grackle-coord/grackle/internal/gctune"
)

// DefaultGCHeadroom is --gc-headroom's default, "auto": autoGCHeadroom
// unless GOGC is set in the environment (then GOGC alone decides, as
// GOMEMLIMIT wins over --memory-limit's auto).
const DefaultGCHeadroom = "auto"

// autoGCHeadroom is auto's headroom: the heap may grow by 256 MiB between
// collections instead of by as much again as is live (Go's GOGC=100). A
// node holding a million leases has about 0.6 GiB live: with Go's default
// it was resident at 1.3 GiB, with this at 0.9-0.95 (docs/SCALING.md).
// Below 256 MiB live the heap grows by more than Go's default, up to four
// times its live part (gctune.DefaultCeiling): fewer collections inside
// writes' rounds (on a 2-core machine under `grackle bench pairs`, p99
// from 10-11 ms to 6-7 ms; docs/OPERATIONS.md, Memory).
const autoGCHeadroom = 256 << 20

// gcHeadroom is a resolved --gc-headroom.
type gcHeadroom struct {
	bytes   uint64 // 0: leave GOGC alone
	keepEnv bool   // GOGC is set in the environment: its value is the most the tuner sets
	why     string
}

// ceiling is the most GOGC the tuner may set: the environment's GOGC
// (read by current) when the operator set one, else gctune.DefaultCeiling.
func (h gcHeadroom) ceiling(current func() int) int {
	if h.keepEnv {
		return current()
	}
	return gctune.DefaultCeiling
}

// resolveGCHeadroom reads --gc-headroom: auto, a size (512MiB), or "off"
// (Go's own GOGC). An explicit size applies whatever GOGC says, with
// GOGC's value as the most the tuner sets.
func resolveGCHeadroom(spec string, env func(string) (string, bool)) (gcHeadroom, error) {
	spec = strings.TrimSpace(spec)
	switch strings.ToLower(spec) {
	case "off", "none", "0":
		return gcHeadroom{why: "off"}, nil
	case "", DefaultGCHeadroom:
		if v, ok := env("GOGC"); ok && v != "" {
			return gcHeadroom{why: "auto: GOGC=" + v + " from the environment"}, nil
		}
		return gcHeadroom{bytes: autoGCHeadroom, why: "auto"}, nil
	}
	n, err := parseSize(spec)
	if err != nil {
		return gcHeadroom{}, fmt.Errorf("gc-headroom: %q: want auto, off or a size such as 512MiB or 1GiB (B, KiB, MiB, GiB, TiB)", spec)
	}
	v, ok := env("GOGC")
	return gcHeadroom{bytes: uint64(n), keepEnv: ok && v != "", why: "--gc-headroom " + spec}, nil
}

// CheckGCHeadroom reports whether spec is a valid --gc-headroom (the
// command line checks it before anything starts).
func CheckGCHeadroom(spec string) error {
	_, err := resolveGCHeadroom(spec, os.LookupEnv)
	return err
}

// startGCTuner starts the process's GOGC tuner from --gc-headroom (package
// gctune) and says so in the log, as every change it makes. Like the
// memory limit it is process-wide: only Run starts it.
func startGCTuner(spec string, logf func(msg string, args ...interface{})) (*gctune.Tuner, error) {
	h, err := resolveGCHeadroom(spec, os.LookupEnv)
	if err != nil {
		return nil, err
	}
	ceiling := h.ceiling(gctune.CurrentGOGC)
	if h.bytes == 0 {
		logf("gc headroom", "headroom", "none (Go's GOGC)", "from", h.why)
	} else {
		logf("gc headroom", "headroom", formatBytes(int64(h.bytes)), "from", h.why, "floor_gogc", gctune.DefaultFloor, "ceiling_gogc", ceiling)
	}
	return gctune.Start(h.bytes, gctune.DefaultFloor, ceiling, func(live uint64, from, to int) {
		logf("gc headroom: GOGC changed", "live_heap", formatBytes(int64(live)), "from", from, "to", to)
	}), nil
}
