package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/grackle-coord/grackle/version"
)

func TestVersionOutput(t *testing.T) {
	want := version.Get().String() + "\n"
	for _, args := range [][]string{{"version"}, {"--version"}} {
		r := runCLI(t, nil, args...)
		if r.code != 0 || r.stdout != want || !strings.HasPrefix(r.stdout, "grackle ") {
			t.Errorf("%v: code %d stdout %q stderr %q, want %q", args, r.code, r.stdout, r.stderr, want)
		}
	}
	r := runCLI(t, nil, "version", "--json")
	var got version.Info
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil || got != version.Get() || got.GoVersion == "" {
		t.Errorf("version --json: %q (%v)", r.stdout, err)
	}
}
