package main

import (
	"bytes"
	"context"
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
	var stdout, stderr bytes.Buffer
	a := &app{
		stdout: &stdout,
		stderr: &stderr,
		lookupEnv: func(k string) (string, bool) {
			v, ok := env[k]
			return v, ok
		},
		now:       func() time.Time { return testNow },
		runServer: runServer,
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	code := a.execute(ctx, args)
	return cliResult{stdout: stdout.String(), stderr: stderr.String(), code: code}
}
