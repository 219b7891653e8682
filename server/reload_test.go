package server_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/grackle-coord/grackle/internal/syncbuf"

	"github.com/hashicorp/go-hclog"

	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
	"github.com/grackle-coord/grackle/server"
	"github.com/grackle-coord/grackle/server/servertest"
)

// Reload (SIGHUP) applies --log-level-file; hooks registered with
// OnReload run too. The audit trail logs a revoke and an expiry batch
// with the lease ids and no fencing token.
func TestReloadLogLevelAndAudit(t *testing.T) {
	dir := t.TempDir()
	lf := filepath.Join(dir, "level")
	os.WriteFile(lf, []byte("warn\n"), 0o600)
	cfg := servertest.Config(t, "node1")
	cfg.LogLevelFile = lf
	out := &syncbuf.Buffer{}
	log := hclog.New(&hclog.LoggerOptions{Name: "grackle", Level: hclog.Warn, Output: out, JSONFormat: true})
	s, err := server.Start(cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	hooked := 0
	s.OnReload("test", func() error { hooked++; return nil })
	servertest.Eventually(t, "leader", 20*time.Second, s.IsLeader)

	// At warn, audit lines (info) are not written.
	c := servertest.New(t)
	c.Nodes, c.Cfgs = append(c.Nodes, s), append(c.Cfgs, cfg)
	cl := c.Client(0)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	servertest.Eventually(t, "namespace", 20*time.Second, func() bool {
		_, err := cl.CreateNamespace(ctx, &pb.CreateNamespaceRequest{Name: "a"})
		return err == nil
	})
	if err := s.Reload(); err != nil || hooked != 1 {
		t.Fatalf("reload at warn: %v, hook ran %d", err, hooked)
	}
	os.WriteFile(lf, []byte("info\n"), 0o600)
	if err := s.Reload(); err != nil {
		t.Fatal(err)
	}
	if !log.IsInfo() || !strings.Contains(out.String(), `"log level set"`) {
		t.Fatalf("level not info after reload:\n%s", out.String())
	}
	l, err := cl.CreateSemaphoreLease(ctx, &pb.CreateSemaphoreLeaseRequest{NamespaceName: "a", ProcessId: "p", TtlSeconds: 60})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.RevokeSemaphoreLease(ctx, &pb.RevokeSemaphoreLeaseRequest{NamespaceName: "a", LeaseId: l.Lease.LeaseId}); err != nil {
		t.Fatal(err)
	}
	short, err := cl.CreateSemaphoreLease(ctx, &pb.CreateSemaphoreLeaseRequest{NamespaceName: "a", ProcessId: "p", TtlSeconds: 1})
	if err != nil {
		t.Fatal(err)
	}
	servertest.Eventually(t, "audit lines", 20*time.Second, func() bool {
		o := out.String()
		return strings.Contains(o, `"lease revoked"`) && strings.Contains(o, l.Lease.LeaseId) &&
			strings.Contains(o, `"leases expired"`) && strings.Contains(o, "a/"+short.Lease.LeaseId)
	})
	if strings.Contains(out.String(), "fencing") || strings.Contains(out.String(), "token") {
		t.Fatalf("a token in the audit trail:\n%s", out.String())
	}
	// A bad level is refused and the level stays.
	os.WriteFile(lf, []byte("loud\n"), 0o600)
	if err := s.Reload(); err == nil || !log.IsInfo() {
		t.Fatalf("bad level: %v", err)
	}
}
