package server

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeRoot writes files (path -> content) under a temporary root.
func fakeRoot(t *testing.T, files map[string]string) string {
	root := t.TempDir()
	for p, c := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func noEnv(string) (string, bool) { return "", false }

const meminfo16G = "MemTotal:       16777216 kB\nMemFree:         1000 kB\n"

func TestResolveMemoryLimit(t *testing.T) {
	gib := int64(1 << 30)
	for _, c := range []struct {
		name  string
		spec  string
		files map[string]string
		env   map[string]string
		want  int64
		why   string
	}{
		{name: "auto, machine memory", spec: "auto", files: map[string]string{"proc/meminfo": meminfo16G},
			want: int64(float64(16*gib) * 0.9), why: "machine"},
		{name: "auto, cgroup v2 limit, nested", spec: "auto", files: map[string]string{
			"proc/meminfo":     meminfo16G,
			"proc/self/cgroup": "0::/kubepods/pod1/ctr\n",
			"sys/fs/cgroup/kubepods/pod1/ctr/memory.max": "max\n",
			"sys/fs/cgroup/kubepods/pod1/memory.max":     "1073741824\n",
			"sys/fs/cgroup/kubepods/memory.max":          "8589934592\n",
		}, want: int64(float64(gib) * 0.9), why: "cgroup"},
		{name: "auto, cgroup v2 seen as the root in a container", spec: "", files: map[string]string{
			"proc/meminfo":             meminfo16G,
			"proc/self/cgroup":         "0::/\n",
			"sys/fs/cgroup/memory.max": "2147483648\n",
		}, want: int64(float64(2*gib) * 0.9), why: "cgroup"},
		{name: "auto, cgroup v1 without a limit", spec: "auto", files: map[string]string{
			"proc/meminfo":     meminfo16G,
			"proc/self/cgroup": "5:cpu,cpuacct:/x\n4:memory:/process_api/abc\n0::/\n",
			"sys/fs/cgroup/memory/process_api/abc/memory.limit_in_bytes": "9223372036854771712\n",
			"sys/fs/cgroup/memory/memory.limit_in_bytes":                 "9223372036854771712\n",
		}, want: int64(float64(16*gib) * 0.9), why: "machine"},
		{name: "auto, cgroup v1 limit", spec: "AUTO", files: map[string]string{
			"proc/meminfo":     meminfo16G,
			"proc/self/cgroup": "4:memory:/docker/abc\n",
			"sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes": "3221225472\n",
		}, want: int64(float64(3*gib) * 0.9), why: "cgroup"},
		{name: "auto, a cgroup limit above the machine's memory", spec: "auto", files: map[string]string{
			"proc/meminfo":             meminfo16G,
			"proc/self/cgroup":         "0::/\n",
			"sys/fs/cgroup/memory.max": "68719476736\n",
		}, want: int64(float64(16*gib) * 0.9), why: "machine"},
		{name: "auto, nothing known", spec: "auto", want: math.MaxInt64, why: "no cgroup limit"},
		{name: "auto defers to GOMEMLIMIT", spec: "auto", files: map[string]string{"proc/meminfo": meminfo16G},
			env: map[string]string{"GOMEMLIMIT": "700MiB"}, want: 0, why: "GOMEMLIMIT=700MiB"},
		{name: "a size wins over GOMEMLIMIT", spec: "900MiB", env: map[string]string{"GOMEMLIMIT": "700MiB"}, want: 900 << 20, why: "--memory-limit 900MiB"},
		{name: "bytes", spec: "1073741824", want: gib, why: "--memory-limit"},
		{name: "GiB", spec: "2GiB", want: 2 * gib, why: "--memory-limit"},
		{name: "off", spec: "off", env: map[string]string{"GOMEMLIMIT": "700MiB"}, want: math.MaxInt64, why: "off"},
		{name: "percentage", spec: "50%", files: map[string]string{"proc/meminfo": meminfo16G}, want: 8 * gib, why: "50% of 16.0 GiB"},
	} {
		t.Run(c.name, func(t *testing.T) {
			env := func(k string) (string, bool) { v, ok := c.env[k]; return v, ok }
			m, err := resolveMemoryLimit(c.spec, memorySource{root: fakeRoot(t, c.files), env: env})
			if err != nil {
				t.Fatal(err)
			}
			if m.bytes != c.want || !strings.Contains(m.why, c.why) {
				t.Fatalf("got %d (%s), want %d (%s)", m.bytes, m.why, c.want, c.why)
			}
		})
	}
}

func TestResolveMemoryLimitRefuses(t *testing.T) {
	src := memorySource{root: fakeRoot(t, map[string]string{"proc/meminfo": meminfo16G}), env: noEnv}
	for _, spec := range []string{"900M", "1.5GiB", "-1GiB", "GiB", "lots", "0%", "101%", "x%", "900 MiB"} {
		if _, err := resolveMemoryLimit(spec, src); err == nil || !strings.Contains(err.Error(), "memory-limit") {
			t.Errorf("%q: got %v, want an error naming memory-limit", spec, err)
		}
	}
	if _, err := resolveMemoryLimit("50%", memorySource{root: t.TempDir(), env: noEnv}); err == nil {
		t.Error("a percentage of unknown memory was accepted")
	}
}
