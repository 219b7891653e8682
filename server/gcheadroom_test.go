package server

import (
	"strings"
	"testing"

	"github.com/grackle-coord/grackle/internal/gctune"
)

func TestResolveGCHeadroom(t *testing.T) {
	noEnv := func(string) (string, bool) { return "", false }
	gogc := func(k string) (string, bool) {
		if k == "GOGC" {
			return "200", true
		}
		return "", false
	}
	for _, c := range []struct {
		name, spec string
		env        func(string) (string, bool)
		want       uint64
		keepEnv    bool
		why        string
	}{
		{name: "auto", spec: DefaultGCHeadroom, env: noEnv, want: 256 << 20, why: "auto"},
		{name: "empty is auto", spec: "", env: noEnv, want: 256 << 20, why: "auto"},
		{name: "GOGC wins over auto", spec: "AUTO", env: gogc, want: 0, why: "auto: GOGC=200 from the environment"},
		{name: "a size wins over GOGC, which caps it", spec: "1GiB", env: gogc, want: 1 << 30, keepEnv: true, why: "--gc-headroom 1GiB"},
		{name: "256MiB given is not auto", spec: "256MiB", env: gogc, want: 256 << 20, keepEnv: true, why: "--gc-headroom 256MiB"},
		{name: "a size without GOGC", spec: "512MiB", env: noEnv, want: 512 << 20, why: "--gc-headroom 512MiB"},
		{name: "off", spec: "off", env: noEnv, want: 0, why: "off"},
		{name: "zero is off", spec: "0", env: noEnv, want: 0, why: "off"},
	} {
		got, err := resolveGCHeadroom(c.spec, c.env)
		if err != nil || got.bytes != c.want || got.keepEnv != c.keepEnv || got.why != c.why {
			t.Errorf("%s: resolveGCHeadroom(%q) = %+v, %v; want %d bytes from %q", c.name, c.spec, got, err, c.want, c.why)
		}
	}
	// The ceiling: the environment's GOGC when set, else the default.
	for _, c := range []struct {
		env  func(string) (string, bool)
		want int
	}{{noEnv, gctune.DefaultCeiling}, {gogc, 200}} {
		h, err := resolveGCHeadroom("512MiB", c.env)
		if got := h.ceiling(func() int { return 200 }); err != nil || got != c.want {
			t.Errorf("ceiling = %d, %v; want %d", got, err, c.want)
		}
	}
	for _, spec := range []string{"lots", "-5MiB", "10%", "1.5GiB"} {
		if _, err := resolveGCHeadroom(spec, noEnv); err == nil || !strings.Contains(err.Error(), "gc-headroom") {
			t.Errorf("%q: got %v, want an error naming gc-headroom", spec, err)
		}
	}
}
