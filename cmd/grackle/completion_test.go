package main

import (
	"context"
	"strings"
	"testing"
	"time"

	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
)

// completions runs cobra's hidden __complete (what the shell scripts call)
// and returns the names offered (the lines before the ":directive" line).
func completions(t *testing.T, env map[string]string, args ...string) []string {
	t.Helper()
	r := runCLI(t, env, append([]string{"__complete"}, args...)...)
	if r.code != 0 {
		t.Fatalf("__complete %q: exit %d stderr %q", args, r.code, r.stderr)
	}
	var out []string
	for _, l := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		if strings.HasPrefix(l, ":") || l == "" {
			continue
		}
		out = append(out, l)
	}
	return out
}

func TestCompletionAsksTheCluster(t *testing.T) {
	c, addr := runTestCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl := c.Client(0)
	for _, ns := range []string{"payments", "partners"} {
		if _, err := cl.CreateNamespace(ctx, &pb.CreateNamespaceRequest{Name: ns}); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range []string{"partner_1", "partner_2", "other"} {
		if _, err := cl.CreateSemaphore(ctx, &pb.CreateSemaphoreRequest{NamespaceName: "partners", SemaphoreName: s, Permits: 1}); err != nil {
			t.Fatal(err)
		}
	}
	env := map[string]string{"GRACKLE_ENDPOINTS": addr}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"semaphore", "get", ""}, "ns partners payments"},
		{[]string{"semaphore", "get", "pa"}, "partners payments"},
		{[]string{"semaphore", "get", "partners", ""}, "other partner_1 partner_2"},
		{[]string{"semaphore", "acquire", "partners", "partner_"}, "partner_1 partner_2"},
		{[]string{"semaphore", "get", "partners", "other", ""}, ""},
		{[]string{"namespace", "delete", "p"}, "partners payments"},
		{[]string{"lease", "list", ""}, "ns partners payments"},
		// A create completes the namespace, not the new name.
		{[]string{"semaphore", "create", "partners", ""}, ""},
		{[]string{"namespace", "create", ""}, ""},
		{[]string{"run", "--namespace", "pay"}, "payments"},
		{[]string{"run", "--namespace", "partners", "--semaphore", "o"}, "other"},
		// The flag wins over the environment, as for every command.
		{[]string{"semaphore", "get", "--endpoints", addr, "pay"}, "payments"},
	} {
		if got := strings.Join(completions(t, env, tc.args...), " "); got != tc.want {
			t.Errorf("%q: got %q, want %q", tc.args, got, tc.want)
		}
	}
	// No cluster: nothing offered, no error in the shell.
	if got := completions(t, map[string]string{"GRACKLE_ENDPOINTS": closedAddr(t)}, "semaphore", "get", ""); len(got) != 0 {
		t.Errorf("unreachable cluster: %q", got)
	}
	// The shell scripts themselves.
	for _, sh := range []string{"bash", "zsh", "fish", "powershell"} {
		r := runCLI(t, nil, "completion", sh)
		if r.code != 0 || !strings.Contains(r.stdout, "__complete") {
			t.Errorf("completion %s: exit %d, %.100q", sh, r.code, r.stdout)
		}
	}
}
