package main

import (
	"strings"
	"testing"
	"time"

	"github.com/grackle-coord/grackle/server/servertest"
)

// grackle acl bootstrap|token create|list|revoke, and --token/GRACKLE_TOKEN
// on the other commands.
func TestCLIACL(t *testing.T) {
	c := servertest.New(t)
	cfg := servertest.Config(t, "node1")
	cfg.ACL = true
	s := c.StartNode(cfg)
	servertest.Eventually(t, "a leader", 20*time.Second, s.IsLeader)
	addr := s.GRPCAddr()
	ep := map[string]string{"GRACKLE_ENDPOINTS": addr}

	r := runCLI(t, ep, "acl", "bootstrap", "-o", "id")
	root := strings.TrimSpace(r.stdout)
	if r.code != 0 || !strings.HasPrefix(root, "grk_") {
		t.Fatalf("bootstrap: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if r := runCLI(t, ep, "acl", "bootstrap", "--token", root); r.code != exitCallFailed || !strings.Contains(r.stderr, "already bootstrapped") {
		t.Fatalf("second bootstrap: exit %d, stderr %q", r.code, r.stderr)
	}
	// Without a token too: the answer is Bootstrap's own, not "this call
	// needs a token".
	if r := runCLI(t, ep, "acl", "bootstrap"); r.code != exitCallFailed ||
		r.stderr != "grackle: acl bootstrap: access control is already bootstrapped (Bootstrap succeeds once per cluster)\n" {
		t.Fatalf("second bootstrap without a token: exit %d, stderr %q", r.code, r.stderr)
	}
	if r := runCLI(t, ep, "namespace", "create", "ns1"); r.code != exitCallFailed ||
		r.stderr != "grackle: namespace create: access control is on: this call needs a token (pass --token or set GRACKLE_TOKEN)\n" {
		t.Fatalf("no token: exit %d, stderr %q", r.code, r.stderr)
	}
	if r := runCLI(t, ep, "namespace", "create", "ns1", "--token", root); r.code != 0 {
		t.Fatalf("with --token: exit %d, stderr %q", r.code, r.stderr)
	}
	adm := map[string]string{"GRACKLE_ENDPOINTS": addr, "GRACKLE_TOKEN": root}
	r = runCLI(t, adm, "acl", "token", "create", "--role", "read", "--namespace", "ns1", "--description", "dashboards", "-o", "id")
	reader := strings.TrimSpace(r.stdout)
	if r.code != 0 || !strings.HasPrefix(reader, "grk_") {
		t.Fatalf("token create: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	r = runCLI(t, adm, "acl", "token", "list")
	if r.code != 0 || !strings.Contains(r.stdout, "dashboards") || !strings.Contains(r.stdout, "read") ||
		strings.Contains(r.stdout, reader) || strings.Contains(r.stdout, root) {
		t.Fatalf("token list: exit %d, stdout %q", r.code, r.stdout)
	}
	ids := strings.Fields(runCLI(t, adm, "acl", "token", "list", "-o", "id").stdout)
	if len(ids) != 2 {
		t.Fatalf("token ids: %q", ids)
	}
	rd := map[string]string{"GRACKLE_ENDPOINTS": addr, "GRACKLE_TOKEN": reader}
	if r := runCLI(t, rd, "namespace", "get", "ns1"); r.code != 0 {
		t.Fatalf("read token get: exit %d, stderr %q", r.code, r.stderr)
	}
	r = runCLI(t, rd, "semaphore", "create", "ns1", "s", "--permits", "1")
	if r.code != exitCallFailed || !strings.Contains(r.stderr, `needs role write on namespace "ns1"`) {
		t.Fatalf("read token writing: exit %d, stderr %q", r.code, r.stderr)
	}
	if r := runCLI(t, map[string]string{"GRACKLE_ENDPOINTS": addr, "GRACKLE_TOKEN": "grk_wrong"}, "namespace", "get", "ns1"); r.code != exitCallFailed || !strings.Contains(r.stderr, "unknown or was revoked") {
		t.Fatalf("unknown token: exit %d, stderr %q", r.code, r.stderr)
	}
	var readerID string
	// Revoke the read token (the one whose description is "dashboards").
	list := runCLI(t, adm, "acl", "token", "list").stdout
	for _, line := range strings.Split(list, "\n") {
		if strings.Contains(line, "dashboards") {
			readerID = strings.Fields(line)[0]
		}
	}
	if r := runCLI(t, adm, "acl", "token", "revoke", readerID); r.code != 0 {
		t.Fatalf("revoke %s: exit %d, stderr %q", readerID, r.code, r.stderr)
	}
	if r := runCLI(t, rd, "namespace", "get", "ns1"); r.code != exitCallFailed ||
		r.stderr != "grackle: namespace get: the token is unknown or was revoked (check GRACKLE_TOKEN)\n" {
		t.Fatalf("revoked token: exit %d, stderr %q", r.code, r.stderr)
	}
}
