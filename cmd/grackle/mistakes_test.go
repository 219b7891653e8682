package main

// The mistakes people make at the command line, against a real node, and
// the exact line each prints: one line, "grackle: <command>: <what went
// wrong>", naming the flag or argument as it was typed (also when the
// server refused the field it became), never gRPC's wrapping ("rpc error:
// code = ... desc = ...") nor a repeated "grackle:".

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/grackle-coord/grackle/server/servertest"
)

type mistake struct {
	args []string
	env  map[string]string
	code int
	line string // the whole of stderr, without its newline ("" for none)
}

// checkMistakes runs each mistake with GRACKLE_ENDPOINTS=addr (unless its
// env says otherwise) and {name} in args, env and line replaced by vars.
func checkMistakes(t *testing.T, addr string, vars map[string]string, mistakes []mistake) {
	t.Helper()
	var pairs []string
	for k, v := range vars {
		pairs = append(pairs, "{"+k+"}", v)
	}
	sub := strings.NewReplacer(pairs...).Replace
	for _, m := range mistakes {
		args := make([]string, len(m.args))
		for i, a := range m.args {
			args[i] = sub(a)
		}
		env := map[string]string{"GRACKLE_ENDPOINTS": addr}
		for k, v := range m.env {
			env[k] = sub(v)
		}
		want := ""
		if m.line != "" {
			want = sub(m.line) + "\n"
		}
		r := runCLI(t, env, args...)
		if r.code != m.code || r.stderr != want {
			t.Errorf("grackle %s\n  exit %d, want %d\n  stderr %q\n    want %q", strings.Join(args, " "), r.code, m.code, r.stderr, want)
		}
		if strings.Contains(r.stderr, "rpc error") || strings.Contains(r.stderr, "desc =") || strings.Count(r.stderr, "grackle") > strings.Count(want, "grackle") {
			t.Errorf("grackle %s: gRPC's wrapping or a repeated prefix in %q", strings.Join(args, " "), r.stderr)
		}
	}
}

func TestMistakes(t *testing.T) {
	_, addr := runTestCluster(t) // namespace ns, semaphore s with 2 permits
	lease := newLease(t, addr)
	meta := []string{"semaphore", "acquire", "ns", "s", "--lease", "{lease}"}
	for i := range 33 {
		meta = append(meta, "--metadata", "k"+strconv.Itoa(i)+"=v")
	}
	checkMistakes(t, addr, map[string]string{"lease": lease, "dead": closedAddr(t)}, []mistake{
		// Refused by the server, said as the flag typed.
		{args: []string{"run", "--namespace", "ns", "--semaphore", "s", "--weight", "25", "--", "true"},
			code: exitUsage, line: "grackle: run: --weight 25: more than the semaphore's 2 permits, so it can never be acquired"},
		{args: []string{"semaphore", "acquire", "ns", "s", "--lease", "{lease}", "--weight", "25"},
			code: exitUsage, line: "grackle: semaphore acquire: --weight 25: more than the semaphore's 2 permits, so it can never be acquired"},
		{args: []string{"semaphore", "acquire", "ns", "s", "--lease", "{lease}", "--wait", "10m"},
			code: exitUsage, line: "grackle: semaphore acquire: --wait 10m: at most 5m0s"},
		{args: []string{"run", "--namespace", "ns", "--semaphore", "s", "--ttl", "5m30s", "--", "true"},
			code: exitUsage, line: "grackle: run: --ttl 5m30s: at most 5m0s"},
		{args: []string{"lease", "create", "ns", "--process-id", "p", "--ttl", "5m30s"},
			code: exitUsage, line: "grackle: lease create: --ttl 5m30s: at most 5m0s"},
		{args: []string{"semaphore", "create", "ns", "big", "--permits", "2000000000"},
			code: exitUsage, line: "grackle: semaphore create: --permits 2000000000: at most 1000000000"},
		{args: []string{"waitgroup", "create", "ns", "g", "--counter", "2000000"},
			code: exitUsage, line: "grackle: waitgroup create: --counter 2000000: at most 1000000"},
		{args: []string{"barrier", "create", "ns", "b", "--expected-processes", "200000"},
			code: exitUsage, line: "grackle: barrier create: --expected-processes 200000: at most 100000"},
		{args: []string{"semaphore", "update", "ns", "s", "--permits", "3", "--expected-version", "99"},
			code: exitUsage, line: "grackle: semaphore update: --expected-version 99: version mismatch"},
		// Refused before any call, in the words the server would use.
		{args: []string{"namespace", "create", "bad name!"},
			code: exitUsage, line: `grackle: namespace create: NAMESPACE "bad name!": may contain only [-_0-9a-zA-Z], found ' ' at byte 3`},
		{args: []string{"semaphore", "acquire", "ns", "s", "--lease", "nosuch"},
			code: exitUsage, line: `grackle: semaphore acquire: --lease nosuch: must be "ls_" followed by 20..61 base62 characters, got "nosuch"`},
		{args: []string{"lock", "acquire", "ns", "a", "--lease", "{lease}"},
			code: exitUsage, line: "grackle: lock acquire: --lease {lease}: a semaphore lease; locks are held under lock leases (ll_...: grackle lock lease create ns --process-id ...)"},
		{args: meta,
			code: exitUsage, line: "grackle: semaphore acquire: --metadata: at most 32 entries, got 33"},
		{args: []string{"semaphore", "acquire", "ns", "s", "--lease", "{lease}", "--wait", "10x"},
			code: exitUsage, line: "grackle: semaphore acquire: --wait 10x: want a duration like 30s, 1m or 250ms (a bare number is seconds)"},
		{args: []string{"semaphore", "acquire", "ns", "s", "--lease", "{lease}", "--weight", "abc"},
			code: exitUsage, line: "grackle: semaphore acquire: --weight abc: want a whole number"},
		{args: []string{"semaphore", "acquire", "ns", "s", "--lease", "{lease}", "--wait", "-1s"},
			code: exitUsage, line: "grackle: semaphore acquire: --wait -1s: must not be negative"},
		{args: []string{"namespace", "list", "--timeout", "0"},
			code: exitUsage, line: "grackle: namespace list: --timeout 0: must be positive"},
		{args: []string{"namespace", "list"}, env: map[string]string{"GRACKLE_TIMEOUT": "soon"},
			code: exitUsage, line: "grackle: namespace list: GRACKLE_TIMEOUT=soon: want a duration like 30s, 1m or 250ms (a bare number is seconds)"},
		{args: []string{"namespace", "list", "--limit", "300"},
			code: exitUsage, line: "grackle: namespace list: --limit 300: must be 0..250 (0: the server's default, 100)"},
		{args: []string{"namespace", "list", "-o", "yaml"},
			code: exitUsage, line: "grackle: namespace list: --output yaml: must be table, json, id or template='{{...}}'"},
		// Unknown flags and commands, with the closest known one.
		{args: []string{"semaphore", "create", "ns", "s2", "--permit", "3"},
			code: exitUsage, line: "grackle: semaphore create: unknown flag: --permit (did you mean --permits?)"},
		{args: []string{"semaphor", "list", "ns"},
			code: exitUsage, line: `grackle: unknown command "semaphor" (did you mean semaphore?); see grackle --help`},
		{args: []string{"semaphore", "craete", "ns", "s2"},
			code: exitUsage, line: `grackle: semaphore: unknown command "craete" (did you mean create?); see grackle semaphore --help`},
		{args: []string{"-x", "namespace", "list"},
			code: exitUsage, line: "grackle: unknown shorthand flag: 'x' in -x"},
		{args: []string{"--endpoint", "{dead}", "namespace", "list"},
			code: exitUsage, line: "grackle: unknown flag: --endpoint (did you mean --endpoints?)"},
		// Global flags before the command work as after it.
		{args: []string{"-q", "cluster", "status", "-o", "id"}, code: exitOK},
		{args: []string{"--quiet", "--timeout", "5s", "-o", "id", "cluster", "status"}, code: exitOK},
		// The call failed: the server's words, and where it helps the fix.
		{args: []string{"semaphore", "acquire", "ns", "nope", "--lease", "{lease}"},
			code: exitCallFailed, line: `grackle: semaphore acquire: semaphore "nope" not found in namespace "ns"`},
		{args: []string{"namespace", "create", "ns"},
			code: exitCallFailed, line: `grackle: namespace create: namespace "ns" already exists`},
		{args: []string{"lease", "refresh", "ns", "ls_NeverCreatedLease0000001"},
			code: exitLeaseLost, line: `grackle: lease refresh: lease "ls_NeverCreatedLease0000001" not found or expired in namespace "ns"; the lease is lost`},
		{args: []string{"namespace", "list", "--timeout", "1s"}, env: map[string]string{"GRACKLE_ENDPOINTS": "{dead}"},
			code: exitCallFailed, line: "grackle: namespace list: no endpoint of [{dead}] answered within 1s (last error: connect: connection refused); is a node running there? check --endpoints or GRACKLE_ENDPOINTS"},
	})
}

// The token mistakes, against a node started with --acl.
func TestMistakesWithACL(t *testing.T) {
	c := servertest.New(t)
	cfg := servertest.Config(t, "node1")
	cfg.ACL = true
	s := c.StartNode(cfg)
	servertest.Eventually(t, "a leader", 20*time.Second, s.IsLeader)
	addr := s.GRPCAddr()
	ep := map[string]string{"GRACKLE_ENDPOINTS": addr}
	r := runCLI(t, ep, "acl", "bootstrap", "-o", "id")
	root := strings.TrimSpace(r.stdout)
	if r.code != 0 || root == "" {
		t.Fatalf("bootstrap: exit %d, stderr %q", r.code, r.stderr)
	}
	adm := map[string]string{"GRACKLE_ENDPOINTS": addr, "GRACKLE_TOKEN": root}
	if r := runCLI(t, adm, "namespace", "create", "ns"); r.code != 0 {
		t.Fatalf("namespace create: exit %d, stderr %q", r.code, r.stderr)
	}
	r = runCLI(t, adm, "acl", "token", "create", "--role", "read", "--namespace", "ns", "-o", "json")
	var tok struct {
		Secret string `json:"secret"`
		Token  struct {
			ID string `json:"id"`
		} `json:"token"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &tok); err != nil || r.code != 0 {
		t.Fatalf("token create: exit %d, %v, stdout %q stderr %q", r.code, err, r.stdout, r.stderr)
	}
	checkMistakes(t, addr, map[string]string{"reader": tok.Secret, "reader_id": tok.Token.ID}, []mistake{
		{args: []string{"namespace", "list"},
			code: exitCallFailed, line: "grackle: namespace list: access control is on: this call needs a token (pass --token or set GRACKLE_TOKEN)"},
		{args: []string{"acl", "bootstrap"},
			code: exitCallFailed, line: "grackle: acl bootstrap: access control is already bootstrapped (Bootstrap succeeds once per cluster)"},
		{args: []string{"namespace", "list", "--token", "grk_wrong"},
			code: exitCallFailed, line: "grackle: namespace list: the token is unknown or was revoked (check --token)"},
		{args: []string{"namespace", "list"}, env: map[string]string{"GRACKLE_TOKEN": "grk_wrong"},
			code: exitCallFailed, line: "grackle: namespace list: the token is unknown or was revoked (check GRACKLE_TOKEN)"},
		{args: []string{"semaphore", "create", "ns", "s", "--permits", "1", "--token", "{reader}"},
			code: exitCallFailed, line: `grackle: semaphore create: token {reader_id} (role read on namespace "ns") may not call GrackleService/CreateSemaphore: it needs role write on namespace "ns"`},
		{args: []string{"acl", "token", "create", "--role", "reader", "--namespace", "ns"}, env: map[string]string{"GRACKLE_TOKEN": root},
			code: exitUsage, line: "grackle: acl token create: --role reader: must be read, write or admin"},
	})
}
