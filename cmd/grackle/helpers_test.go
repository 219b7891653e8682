package main

import (
	"bytes"
	"context"
	"io"
	"testing"
	"time"

	"github.com/grackle-coord/grackle/server"
)

// testNow is the clock of every test: 2023-09-27T14:55:00Z.
var testNow = time.Date(2023, 9, 27, 14, 55, 0, 0, time.UTC)

// cliResult is what one run of the command line produced.
type cliResult struct {
	stdout, stderr string
	code           int
}

// runCLI runs the command line in-process with env as the environment and
// a stub in place of server.Run (it fails the test if called).
func runCLI(t *testing.T, env map[string]string, args ...string) cliResult {
	t.Helper()
	return runCLIServer(t, env, func(context.Context, server.Config) error {
		t.Errorf("server.Run called by %q", args)
		return nil
	}, args...)
}

func runCLIServer(t *testing.T, env map[string]string, runServer func(context.Context, server.Config) error, args ...string) cliResult {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	return runCLIOpts(t, ctx, env, runServer, false, args...)
}

// runCLIOpts runs the command line with ctx (cancel it to interrupt),
// stdout seen as a terminal when term.
func runCLIOpts(t *testing.T, ctx context.Context, env map[string]string, runServer func(context.Context, server.Config) error, term bool, args ...string) cliResult {
	t.Helper()
	if runServer == nil {
		runServer = func(context.Context, server.Config) error {
			t.Errorf("server.Run called by %q", args)
			return nil
		}
	}
	var stdout, stderr bytes.Buffer
	a := &app{
		isTerminal: func(io.Writer) bool { return term },
		stdout:     &stdout,
		stderr:     &stderr,
		lookupEnv: func(k string) (string, bool) {
			v, ok := env[k]
			return v, ok
		},
		now:       func() time.Time { return testNow },
		runServer: runServer,
	}
	code := a.execute(ctx, args)
	return cliResult{stdout: stdout.String(), stderr: stderr.String(), code: code}
}
