package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// snapshot save through the CLI, inspect it, refuse an altered copy, and
// restore it into a new data dir (refused a second time: state exists).
func TestSnapshotSaveInspectRestoreCLI(t *testing.T) {
	_, addr := runTestCluster(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "b.snap")
	r := runCLI(t, nil, "snapshot", "save", file, "--endpoints", addr)
	if r.code != 0 || !strings.HasPrefix(r.stdout, "saved "+file+": index ") || !strings.Contains(r.stdout, "sha256 ") {
		t.Fatalf("save: code %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	if _, err := os.Stat(file + ".part"); !os.IsNotExist(err) {
		t.Fatalf("save left %s.part behind", file)
	}
	r = runCLI(t, nil, "snapshot", "inspect", file, "-o", "json")
	var ins inspectOut
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &ins) != nil || ins.Namespaces != 1 || ins.Semaphores != 1 || ins.Index == 0 || len(ins.SHA256) != 64 {
		t.Fatalf("inspect: code %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	r = runCLI(t, nil, "snapshot", "inspect", file)
	if r.code != 0 || !strings.Contains(r.stdout, "Semaphores:") || !strings.Contains(r.stdout, ins.SHA256) {
		t.Fatalf("inspect table: %q %q", r.stdout, r.stderr)
	}

	b, _ := os.ReadFile(file)
	b[len(b)/2] ^= 1
	bad := filepath.Join(dir, "bad.snap")
	os.WriteFile(bad, b, 0o600)
	r = runCLI(t, nil, "snapshot", "inspect", bad)
	if r.code != exitCallFailed || !strings.Contains(r.stderr, "snapshot file is corrupt: checksum mismatch") {
		t.Fatalf("altered file: code %d stderr %q", r.code, r.stderr)
	}
	os.WriteFile(bad, b[:len(b)-40], 0o600)
	r = runCLI(t, nil, "snapshot", "restore", bad, "--data-dir", filepath.Join(dir, "x"), "--node-id", "n1", "--initial-members", "n1=127.0.0.1:1=127.0.0.1:2")
	if r.code != exitCallFailed || !strings.Contains(r.stderr, "truncated") {
		t.Fatalf("truncated file: code %d stderr %q", r.code, r.stderr)
	}

	dd := filepath.Join(dir, "data")
	args := []string{"snapshot", "restore", file, "--data-dir", dd, "--node-id", "n1", "--initial-members", "n1=127.0.0.1:1=127.0.0.1:2"}
	r = runCLI(t, nil, args...)
	if r.code != 0 || !strings.Contains(r.stdout, "1 namespaces, 1 semaphores") {
		t.Fatalf("restore: code %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	r = runCLI(t, nil, args...)
	if r.code != exitCallFailed || !strings.Contains(r.stderr, "already holds raft state") {
		t.Fatalf("restore over state: code %d stderr %q", r.code, r.stderr)
	}
	r = runCLI(t, nil, "snapshot", "restore", file, "--data-dir", dd)
	if r.code != exitUsage {
		t.Fatalf("restore without --node-id: code %d stderr %q", r.code, r.stderr)
	}
}
