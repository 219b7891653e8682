package e2e

// The README's doc test: the shell blocks of the tour and of "Holding
// permits around a command", and the Go program of "From Go", run against
// a real node (the binary built by the test, a node on free ports), so
// that the README cannot drift from what the code does. A command fails
// the test when it exits non-zero, unless its line ends with a comment
// "# exits N" that says which code it must exit with.
//
// The first block of "Running a cluster" runs too, its fixed ports
// (7420, 7421, ...) replaced by free ones. Not run: the grpcurl block (it
// shows placeholders for the lease id, and grpcurl is not a dependency),
// and the compose commands (Docker; `make compose-test` drives the same
// commands from the host).

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// block is one fenced code block of the README.
type block struct {
	section string // the "## " heading it is under
	lang    string
	text    string
}

var fence = regexp.MustCompile("^\\s*```(\\w*)\\s*$")

func readmeBlocks(t *testing.T) []block {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var (
		out     []block
		section string
		cur     *block
		indent  string
	)
	for _, line := range strings.Split(string(b), "\n") {
		if cur != nil {
			if fence.MatchString(line) {
				out = append(out, *cur)
				cur = nil
				continue
			}
			cur.text += strings.TrimPrefix(line, indent) + "\n"
			continue
		}
		if strings.HasPrefix(line, "## ") {
			section = strings.TrimPrefix(line, "## ")
			continue
		}
		if m := fence.FindStringSubmatch(line); m != nil {
			cur = &block{section: section, lang: m[1]}
			indent = line[:len(line)-len(strings.TrimLeft(line, " \t"))]
		}
	}
	return out
}

// commands splits a shell block into commands: continuation lines joined,
// blank and comment lines dropped.
func commands(text string) []string {
	var out []string
	cur := ""
	for _, line := range strings.Split(text, "\n") {
		if cur == "" && (strings.TrimSpace(line) == "" || strings.HasPrefix(strings.TrimSpace(line), "#")) {
			continue
		}
		if strings.HasSuffix(line, "\\") {
			cur += strings.TrimSuffix(line, "\\") + " "
			continue
		}
		out = append(out, cur+line)
		cur = ""
	}
	return out
}

var expectExit = regexp.MustCompile(`#\s*exits\s+(\d+)\s*$`)

// runShell runs cmds in one bash (so variables carry over), in dir with
// env, and fails the test at the first command whose exit code is not the
// expected one.
func runShell(t *testing.T, dir string, env []string, cmds []string) string {
	t.Helper()
	var script strings.Builder
	// Commands started in the background (a README's servers) end with
	// the script.
	script.WriteString("set -u\ntrap 'kill $(jobs -p) 2>/dev/null; wait' EXIT\n")
	for i, c := range cmds {
		want := 0
		if m := expectExit.FindStringSubmatch(c); m != nil {
			want, _ = strconv.Atoi(m[1])
		}
		fmt.Fprintf(&script, "%s\nrc=$?\nif [ $rc -ne %d ]; then echo \"README-STEP %d exited $rc\" >&2; exit 97; fi\n", c, want, i)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", script.String())
	cmd.Dir, cmd.Env = dir, env
	// On the deadline the script's EXIT trap cannot run (bash is killed),
	// so kill its whole process group: the README's background servers
	// too, which would otherwise hold the output pipes open and hang the
	// package until go test's timeout.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err != nil {
		step := regexp.MustCompile(`README-STEP (\d+) exited (\d+)`).FindStringSubmatch(stderr.String())
		if step != nil {
			i, _ := strconv.Atoi(step[1])
			t.Fatalf("README command exited %s:\n  %s\nstdout:\n%s\nstderr:\n%s", step[2], cmds[i], stdout.String(), stderr.String())
		}
		t.Fatalf("shell: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

func TestREADME(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("bash not found: the README's shell blocks need it")
	}
	bin := Binary(t)
	p := NewCluster(t, 1)
	p.Start(0)
	p.WaitLeader(0, 30*time.Second)
	addr := p.Nodes[0].GRPC

	work := t.TempDir()
	// The stand-in for the README's ./sync-partner.sh.
	if err := os.WriteFile(filepath.Join(work, "sync-partner.sh"),
		[]byte("#!/bin/sh\necho \"synced with lease $GRACKLE_LEASE_ID, token $GRACKLE_FENCING_TOKEN\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "PATH="+filepath.Dir(bin)+string(os.PathListSeparator)+os.Getenv("PATH"),
		"GRACKLE_ENDPOINTS="+addr, "HOME="+work)

	var tour, runBlock, goProgram, clusterBlock string
	for _, b := range readmeBlocks(t) {
		switch {
		case b.section == "A tour: the first ten minutes" && b.lang == "sh" && strings.Contains(b.text, "grpcurl"):
			t.Log("not run: the grpcurl block (placeholders for the lease id; grpcurl is not a dependency)")
		case b.section == "A tour: the first ten minutes" && b.lang == "sh":
			tour += b.text
		case b.section == "From Go" && b.lang == "go":
			goProgram = b.text
		case b.section == "Holding permits around a command" && b.lang == "sh":
			runBlock += b.text
		case b.section == "Running a cluster" && b.lang == "sh" && clusterBlock == "":
			clusterBlock = b.text // the first one; the compose commands need Docker
		}
	}
	if tour == "" || runBlock == "" || goProgram == "" || clusterBlock == "" {
		t.Fatalf("README blocks not found (tour %d bytes, run %d, Go %d, cluster %d): did a heading change?",
			len(tour), len(runBlock), len(goProgram), len(clusterBlock))
	}

	t.Run("tour", func(t *testing.T) {
		out := runShell(t, work, env, commands(tour))
		for _, want := range []string{"host-123/pid-4567", `"permits": 20`, "Leader:"} {
			if !strings.Contains(out, want) {
				t.Errorf("the tour's output lacks %q:\n%s", want, out)
			}
		}
	})

	t.Run("Go program", func(t *testing.T) {
		dir := t.TempDir()
		src := regexp.MustCompile(`127\.0\.0\.1:74[0-9]0`).ReplaceAllString(goProgram, addr)
		if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "go", "run", filepath.Join(dir, "main.go"))
		cmd.Dir = ".." // the module's root: the program imports this module's client
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "calling partner 1 with fencing token") {
			t.Fatalf("go run: %v\n%s", err, out)
		}
	})

	t.Run("grackle run", func(t *testing.T) {
		out := runShell(t, work, env, commands(runBlock))
		if !strings.Contains(out, "synced with lease ls_") {
			t.Errorf("the command did not run under the lease:\n%s", out)
		}
	})

	t.Run("a 3-node cluster", func(t *testing.T) {
		// The README's fixed ports (7420, 7421, ...) become free ones.
		ports := map[string]string{}
		free := FreePorts(t, 16)
		text := regexp.MustCompile(`127\.0\.0\.1:74[0-9][0-9]`).ReplaceAllStringFunc(clusterBlock, func(a string) string {
			if _, ok := ports[a]; !ok {
				ports[a] = fmt.Sprintf("127.0.0.1:%d", free[len(ports)])
			}
			return ports[a]
		})
		dir := t.TempDir()
		// Nodes that are still starting: first contact may take a while.
		out := runShell(t, dir, append(env, "GRACKLE_TIMEOUT=30s"), commands(text))
		for _, want := range []string{"Leader:", "n1", "n2", "n3"} {
			if !strings.Contains(out, want) {
				t.Errorf("cluster status lacks %q:\n%s", want, out)
			}
		}
	})
}
