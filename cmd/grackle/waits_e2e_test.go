package main

// The waitgroup and barrier commands against a real node (in-process,
// loopback).

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// A wait is woken by the command that completes the group; a retried
// completion counts nothing; new jobs for a completed group fail (exit 1),
// for an expired one exit 5, and a wait for an expired group exits 5.
func TestWaitGroupCommandsE2E(t *testing.T) {
	_, addr := runTestCluster(t)
	env := map[string]string{"GRACKLE_ENDPOINTS": addr}
	wantExit(t, addr, exitOK, "", "waitgroup", "create", "ns", "nightly", "--counter", "150",
		"--expires-at", time.Now().Add(time.Hour).UTC().Format(time.RFC3339)) // (--expires-in counts from the tests' fixed clock)
	done := make(chan cliResult, 1)
	go func() {
		done <- runCLI(t, env, "waitgroup", "wait", "ns", "nightly", "--wait", "30s", "-o", "template={{.outcome}}")
	}()

	var ids []string
	for i := range 150 {
		ids = append(ids, fmt.Sprintf("job-%03d", i))
	}
	file := filepath.Join(t.TempDir(), "jobs")
	if err := os.WriteFile(file, []byte(strings.Join(ids[:140], "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	r := wantExit(t, addr, exitOK, "", "waitgroup", "complete", "ns", "nightly", "--jobs-file", file)
	if !strings.HasSuffix(r.stdout, "140 new of 140 job(s) given; 140 of 150 done, ACTIVE\n") {
		t.Fatalf("complete:\n%s", r.stdout)
	}
	select {
	case r := <-done:
		t.Fatalf("the wait ended before completion: %+v", r)
	case <-time.After(300 * time.Millisecond):
	}
	r = wantExit(t, addr, exitOK, "", append([]string{"waitgroup", "complete", "ns", "nightly", "--metadata", "worker=w2"}, ids[130:]...)...)
	if !strings.HasSuffix(r.stdout, "10 new of 20 job(s) given; 150 of 150 done, COMPLETED\n") {
		t.Fatalf("complete the rest:\n%s", r.stdout)
	}
	select {
	case r := <-done:
		if r.code != 0 || r.stdout != "WAIT_GROUP_WAIT_OUTCOME_COMPLETED\n" {
			t.Fatalf("wait: exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the wait was not woken by the completing command")
	}
	r = wantExit(t, addr, exitOK, "", "waitgroup", "complete", "ns", "nightly", "job-000", "-o", "template={{.newly_completed}}")
	if r.stdout != "0\n" {
		t.Fatalf("retry: %q", r.stdout)
	}
	wantExit(t, addr, exitCallFailed, `grackle: waitgroup complete: wait group "nightly" is completed: it takes no new jobs`, "waitgroup", "complete", "ns", "nightly", "late")
	wantExit(t, addr, exitUsage, `grackle: waitgroup complete: JOB_ID "bad id": may contain only [-_0-9a-zA-Z]`, "waitgroup", "complete", "ns", "nightly", "bad id")
	r = runCLI(t, env, "waitgroup", "jobs", "ns", "nightly", "--limit", "2", "-o", "id")
	if r.code != 0 || r.stdout != "job-000\njob-001\n" || !strings.HasPrefix(r.stderr, "next page: --page-token ") {
		t.Fatalf("jobs: %d %q %q", r.code, r.stdout, r.stderr)
	}
	r = wantExit(t, addr, exitOK, "", "waitgroup", "get", "ns", "nightly")
	if !strings.Contains(r.stdout, "Status:         COMPLETED\n") || !strings.Contains(r.stdout, "Jobs done:      150 of 150 (0 left)\n") {
		t.Fatalf("get:\n%s", r.stdout)
	}
	wantExit(t, addr, exitCallFailed, "grackle: waitgroup update: ", "waitgroup", "update", "ns", "nightly", "--counter", "200")

	// update: the counter lowered to the jobs done completes the group.
	wantExit(t, addr, exitOK, "", "waitgroup", "create", "ns", "shrink", "--counter", "3", "--description", "d")
	wantExit(t, addr, exitOK, "", "waitgroup", "complete", "ns", "shrink", "a", "b")
	r = wantExit(t, addr, exitOK, "", "waitgroup", "update", "ns", "shrink", "--counter", "2")
	if !strings.Contains(r.stdout, "Description:    d\n") || !strings.HasSuffix(r.stdout, "wait group \"shrink\" completed by this update (2 of 2 jobs done)\n") {
		t.Fatalf("update:\n%s", r.stdout)
	}

	// Expiry: the wait exits 5, new jobs exit 5.
	at := time.Now().Add(1500 * time.Millisecond).UTC().Format(time.RFC3339Nano)
	wantExit(t, addr, exitOK, "", "waitgroup", "create", "ns", "soon", "--counter", "2", "--expires-at", at)
	wantExit(t, addr, exitNotAcquired, "grackle: waitgroup wait: TIMED_OUT: wait group \"soon\" has not finished (0 of 2 jobs done",
		"waitgroup", "wait", "ns", "soon", "--wait", "0")
	r = wantExit(t, addr, exitExpired, "grackle: waitgroup wait: EXPIRED: wait group \"soon\" expired at ", "waitgroup", "wait", "ns", "soon", "--wait", "20s")
	if !strings.HasPrefix(r.stdout, "Outcome:        EXPIRED\n") {
		t.Fatalf("expired:\n%s", r.stdout)
	}
	wantExit(t, addr, exitExpired, "grackle: waitgroup complete: ", "waitgroup", "complete", "ns", "soon", "x")

	r = wantExit(t, addr, exitOK, "", "waitgroup", "list", "ns", "-o", "id")
	if r.stdout != "nightly\nshrink\nsoon\n" {
		t.Fatalf("list: %q", r.stdout)
	}
	if got := strings.Join(completions(t, env, "waitgroup", "get", "ns", "s"), " "); got != "shrink soon" {
		t.Errorf("completion: %q", got)
	}
	wantExit(t, addr, exitOK, "", "waitgroup", "delete", "ns", "soon")
	wantExit(t, addr, exitCallFailed, `grackle: waitgroup get: wait group "soon" not found`, "waitgroup", "get", "ns", "soon")
	wantExit(t, addr, exitCallFailed, `grackle: waitgroup wait: wait group "soon" not found`, "waitgroup", "wait", "ns", "soon")
}

// Three shards meet with arrive --wait: the last returns at once, the
// others when it arrives, each printing the generation passed; a retried
// arrival counts nothing; wait times out (3); an update that lowers the
// expected processes to the arrivals trips it.
func TestBarrierCommandsE2E(t *testing.T) {
	_, addr := runTestCluster(t)
	env := map[string]string{"GRACKLE_ENDPOINTS": addr}
	wantExit(t, addr, exitOK, "", "barrier", "create", "ns", "phase", "--expected-processes", "3")
	done := make(chan cliResult, 2)
	for _, s := range []string{"shard-1", "shard-2"} {
		go func() {
			done <- runCLI(t, env, "barrier", "arrive", "ns", "phase", "--process-id", s, "--wait=30s", "-o", "id")
		}()
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		r := wantExit(t, addr, exitOK, "", "barrier", "get", "ns", "phase", "-o", "template={{.barrier.arrived_processes}}")
		if r.stdout == "2\n" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("arrivals: %q", r.stdout)
		}
		time.Sleep(50 * time.Millisecond)
	}
	r := wantExit(t, addr, exitOK, "", "barrier", "arrive", "ns", "phase", "--process-id", "shard-3", "--wait=30s", "-o", "id")
	if r.stdout != "1\n" {
		t.Fatalf("last arrival: %q", r.stdout)
	}
	for range 2 {
		select {
		case r := <-done:
			if r.code != 0 || r.stdout != "1\n" {
				t.Fatalf("waiting arrival: exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("a waiting arrival was not released by the trip")
		}
	}
	r = wantExit(t, addr, exitOK, "", "barrier", "participants", "ns", "phase", "--generation", "1", "-o", "id")
	got := strings.Fields(r.stdout)
	if len(got) != 3 || got[2] != "shard-3" || !slices.Contains(got, "shard-1") || !slices.Contains(got, "shard-2") {
		t.Fatalf("participants of 1: %q", r.stdout)
	}
	// A retried arrival of generation 1, after the trip: counted once.
	r = wantExit(t, addr, exitOK, "", "barrier", "arrive", "ns", "phase", "--process-id", "shard-3", "--generation", "1", "--wait=5s", "-o", "id")
	if r.stdout != "1\n" {
		t.Fatalf("retried arrival: %q", r.stdout)
	}
	r = wantExit(t, addr, exitOK, "", "barrier", "get", "ns", "phase")
	if !strings.Contains(r.stdout, "Generation:     2\n") || !strings.Contains(r.stdout, "Arrived:        0 of 3\n") {
		t.Fatalf("get:\n%s", r.stdout)
	}
	wantExit(t, addr, exitCallFailed, "grackle: barrier arrive: GENERATION_MISMATCH: barrier \"phase\" is at generation 2, not 1",
		"barrier", "arrive", "ns", "phase", "--process-id", "newcomer", "--generation", "1")
	wantExit(t, addr, exitOK, "", "barrier", "arrive", "ns", "phase", "--process-id", "shard-1")
	wantExit(t, addr, exitNotAcquired, "grackle: barrier wait: TIMED_OUT: barrier \"phase\" generation 2 has not tripped within 1s (1 of 3 arrived at generation 2)",
		"barrier", "wait", "ns", "phase", "--wait", "1s")
	wantExit(t, addr, exitCallFailed, `grackle: barrier wait: GENERATION_MISMATCH: barrier "phase" is at generation 2, not 5`, "barrier", "wait", "ns", "phase", "--generation", "5")
	r = wantExit(t, addr, exitOK, "", "barrier", "update", "ns", "phase", "--expected-processes", "1")
	if !strings.HasSuffix(r.stdout, "barrier \"phase\" tripped by this update: generation 2 passed, now at 3\n") {
		t.Fatalf("update:\n%s", r.stdout)
	}
	wantExit(t, addr, exitOK, "", "barrier", "wait", "ns", "phase", "--generation", "2")
	if got := strings.Join(completions(t, env, "barrier", "wait", "ns", ""), " "); got != "phase" {
		t.Errorf("completion: %q", got)
	}
	wantExit(t, addr, exitOK, "", "barrier", "delete", "ns", "phase")
	wantExit(t, addr, exitCallFailed, `grackle: barrier arrive: barrier "phase" not found in namespace "ns"`, "barrier", "arrive", "ns", "phase", "--process-id", "x")
}

// `barrier arrive --wait` alone is the one-line form of a shell script: it
// waits (up to 5m) for the generation its arrival counted in; "--wait 30s"
// is refused with the fix ("--wait=30s"), not run as something else.
func TestBarrierArriveBareWaitE2E(t *testing.T) {
	_, addr := runTestCluster(t)
	wantExit(t, addr, exitOK, "", "barrier", "create", "ns", "solo", "--expected-processes", "1")
	r := wantExit(t, addr, exitOK, "", "barrier", "arrive", "ns", "solo", "--process-id", "p", "--wait", "-o", "id")
	if r.stdout != "1\n" {
		t.Fatalf("bare --wait: %q", r.stdout)
	}
	wantExit(t, addr, exitUsage, "--wait=30s", "barrier", "arrive", "ns", "solo", "--process-id", "p", "--wait", "30s")
}
