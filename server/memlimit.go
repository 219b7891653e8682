package server

import (
	"bufio"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
)

// DefaultMemoryLimit is --memory-limit's default: 90 % of the memory the
// node may use (its cgroup's limit, or the machine's memory when that is
// smaller or there is none), unless GOMEMLIMIT is set.
const DefaultMemoryLimit = "auto"

// autoMemoryFraction is the share of the available memory "auto" sets as
// the soft limit: what is left is for the memory the Go runtime does not
// count (mapped files, the kernel's own) and the collector's lag.
const autoMemoryFraction = 0.9

// A node keeps its whole state in the Go heap, and Go's default collector
// (GOGC=100) lets the heap grow to twice what the last collection found
// live: without a limit, a node holding a million leases under write load
// was resident at about 1.3 GiB for about 0.6 GiB of live heap
// (docs/SCALING.md). A soft limit (runtime/debug.SetMemoryLimit) makes the
// collector run sooner as the heap nears it, so the node stays within the
// memory it was given instead of being killed for it.

// memorySource is where "auto" reads the node's memory: the cgroup files
// and /proc (tests replace them).
type memorySource struct {
	root string // "/" (the files are read under root)
	env  func(string) (string, bool)
}

// memoryLimit is a resolved --memory-limit.
type memoryLimit struct {
	bytes int64  // the limit to set; math.MaxInt64: none; 0: leave the runtime's (GOMEMLIMIT) alone
	why   string // where the figure comes from, for the log
}

// resolveMemoryLimit reads --memory-limit: "auto" (DefaultMemoryLimit, or
// ""), "off", a size in GOMEMLIMIT's syntax (900MiB, 2GiB, 1073741824), or
// a percentage of the available memory (75%).
func resolveMemoryLimit(spec string, src memorySource) (memoryLimit, error) {
	spec = strings.TrimSpace(spec)
	switch strings.ToLower(spec) {
	case "", DefaultMemoryLimit:
		if v, ok := src.env("GOMEMLIMIT"); ok && v != "" {
			return memoryLimit{why: "GOMEMLIMIT=" + v + " from the environment"}, nil
		}
		total, from := src.available()
		if total <= 0 {
			return memoryLimit{bytes: math.MaxInt64, why: "auto: no cgroup limit and the machine's memory unknown"}, nil
		}
		return memoryLimit{bytes: int64(float64(total) * autoMemoryFraction),
			why: fmt.Sprintf("auto: %.0f%% of %s (%s)", autoMemoryFraction*100, formatBytes(total), from)}, nil
	case "off", "none", "0":
		return memoryLimit{bytes: math.MaxInt64, why: "off"}, nil
	}
	if p, ok := strings.CutSuffix(spec, "%"); ok {
		pct, err := strconv.ParseFloat(p, 64)
		if err != nil || pct <= 0 || pct > 100 {
			return memoryLimit{}, fmt.Errorf("memory-limit: %q: a percentage must be above 0 and at most 100", spec)
		}
		total, from := src.available()
		if total <= 0 {
			return memoryLimit{}, fmt.Errorf("memory-limit: %q: the available memory is unknown here (no cgroup limit, no /proc/meminfo); give a size", spec)
		}
		return memoryLimit{bytes: int64(float64(total) * pct / 100), why: fmt.Sprintf("%s of %s (%s)", spec, formatBytes(total), from)}, nil
	}
	n, err := parseSize(spec)
	if err != nil {
		return memoryLimit{}, fmt.Errorf("memory-limit: %w", err)
	}
	return memoryLimit{bytes: n, why: "--memory-limit " + spec}, nil
}

// parseSize reads a size as GOMEMLIMIT does: a whole number of bytes with
// an optional unit B, KiB, MiB, GiB or TiB.
func parseSize(s string) (int64, error) {
	units := []struct {
		suffix string
		mult   int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"B", 1}}
	num, mult := s, int64(1)
	for _, u := range units {
		if v, ok := strings.CutSuffix(s, u.suffix); ok {
			num, mult = v, u.mult
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n <= 0 || n > math.MaxInt64/mult {
		return 0, fmt.Errorf("%q: want auto, off, a size such as 900MiB or 2GiB (B, KiB, MiB, GiB, TiB), or a percentage such as 75%%", s)
	}
	return n * mult, nil
}

func formatBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	default:
		return fmt.Sprintf("%.0f MiB", float64(n)/(1<<20))
	}
}

// available is the memory this process may use: the smallest memory
// limit of its cgroup and the cgroups above it (v2 memory.max, v1
// memory.limit_in_bytes), or the machine's memory (/proc/meminfo
// MemTotal) when that is smaller or no cgroup sets a limit. 0: unknown.
func (src memorySource) available() (int64, string) {
	total, from := src.meminfo(), "the machine's memory"
	if cg := src.cgroupLimit(); cg > 0 && (total <= 0 || cg < total) {
		total, from = cg, "the cgroup's memory limit"
	}
	return total, from
}

func (src memorySource) read(path string) (string, error) {
	b, err := os.ReadFile(filepath.Join(src.root, path))
	return strings.TrimSpace(string(b)), err
}

func (src memorySource) meminfo() int64 {
	f, err := os.Open(filepath.Join(src.root, "proc/meminfo"))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "MemTotal:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err == nil && kb > 0 {
				return kb << 10
			}
		}
	}
	return 0
}

// cgroupLimit is the smallest memory limit on the way from this process's
// cgroup up to the root, of cgroup v2 and of v1's memory controller; 0:
// none. A container usually sees its own cgroup as the root of the
// mount, so the mount's root file is read too.
func (src memorySource) cgroupLimit() int64 {
	data, err := src.read("proc/self/cgroup")
	if err != nil {
		return 0
	}
	var limit int64
	take := func(v string) {
		if v == "" || v == "max" {
			return
		}
		n, err := strconv.ParseInt(v, 10, 64)
		// v1 says "no limit" with a huge number (a page-rounded 2^63-1).
		if err == nil && n > 0 && n < 1<<62 && (limit == 0 || n < limit) {
			limit = n
		}
	}
	for _, line := range strings.Split(data, "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		var dir, file string
		switch {
		case parts[0] == "0" && parts[1] == "": // v2
			dir, file = "sys/fs/cgroup", "memory.max"
		case hasController(parts[1], "memory"): // v1
			dir, file = "sys/fs/cgroup/memory", "memory.limit_in_bytes"
		default:
			continue
		}
		for p := filepath.Clean("/" + parts[2]); ; p = filepath.Dir(p) {
			v, _ := src.read(filepath.Join(dir, p, file))
			take(v)
			if p == "/" {
				break
			}
		}
	}
	return limit
}

func hasController(list, name string) bool {
	for _, c := range strings.Split(list, ",") {
		if c == name {
			return true
		}
	}
	return false
}

// CheckMemoryLimit reports whether spec is a valid --memory-limit on this
// machine (the command line checks it before anything starts).
func CheckMemoryLimit(spec string) error {
	_, err := resolveMemoryLimit(spec, memorySource{root: "/", env: os.LookupEnv})
	return err
}

// applyMemoryLimit sets the process's soft memory limit from
// --memory-limit and says so in the log. It is process-wide, so only Run
// (the grackle server process) calls it, never Start (tests run many
// nodes in one process).
func applyMemoryLimit(spec string, logf func(msg string, args ...interface{})) error {
	m, err := resolveMemoryLimit(spec, memorySource{root: "/", env: os.LookupEnv})
	if err != nil {
		return err
	}
	if m.bytes != 0 {
		debug.SetMemoryLimit(m.bytes)
	}
	cur := debug.SetMemoryLimit(-1)
	limit := "none"
	if cur != math.MaxInt64 {
		limit = formatBytes(cur)
	}
	logf("memory limit", "limit", limit, "limit_bytes", cur, "from", m.why)
	return nil
}
