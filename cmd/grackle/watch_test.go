package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/grackle-coord/grackle/server/servertest"
)

// On a terminal, a waiting acquire's status line says where it is in the
// queue; `semaphore waiters` lists it; `semaphore watch` prints the state.
func TestQueueVisibilityCommands(t *testing.T) {
	_, addr := runTestCluster(t)
	holder, other := newLease(t, addr), newLease(t, addr)
	wantExit(t, addr, exitOK, "", "semaphore", "acquire", "ns", "s", "--lease", holder, "--weight", "2")
	env := map[string]string{"GRACKLE_ENDPOINTS": addr}

	done := make(chan cliResult, 1)
	go func() {
		done <- runCLIOpts(t, context.Background(), env, nil, true, "semaphore", "acquire", "ns", "s", "--lease", other, "--wait", "3s", "-o", "id")
	}()
	servertest.Eventually(t, "the waiter listed", 20*time.Second, func() bool {
		r := runCLI(t, env, "semaphore", "waiters", "ns", "s", "-o", "id")
		return r.code == exitOK && strings.TrimSpace(r.stdout) == other
	})
	table := wantExit(t, addr, exitOK, "", "semaphore", "waiters", "ns", "s")
	if !strings.Contains(table.stdout, "POSITION") || !strings.Contains(table.stdout, other) {
		t.Fatalf("waiters table %q", table.stdout)
	}
	w := wantExit(t, addr, exitOK, "", "semaphore", "watch", "ns", "s", "--count", "1", "-o", "json")
	var m struct {
		RaftIndex    string `json:"raft_index"`
		Initial      bool   `json:"initial"`
		WaitersCount string `json:"waiters_count"`
	}
	if err := json.Unmarshal([]byte(w.stdout), &m); err != nil || !m.Initial || m.RaftIndex == "" || m.WaitersCount != "1" {
		t.Fatalf("watch -o json %q (%v)", w.stdout, err)
	}
	line := wantExit(t, addr, exitOK, "", "semaphore", "watch", "ns", "s", "--count", "1")
	if !strings.Contains(line.stdout, "(initial): 2/2 permits held by 1") || !strings.Contains(line.stdout, "1 waiting [1:test×1]") {
		t.Fatalf("watch line %q", line.stdout)
	}

	r := <-done
	if r.code != exitNotAcquired {
		t.Fatalf("acquire: exit %d stderr %q", r.code, r.stderr)
	}
	if !strings.Contains(r.stdout, "position 1 of 1 in the queue") {
		t.Fatalf("the status line never showed the queue position: %q", r.stdout)
	}
	wantExit(t, addr, exitUsage, "count", "semaphore", "watch", "ns", "s", "--count", "-1")
}
