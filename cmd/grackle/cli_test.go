package main

import (
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParseMetadata(t *testing.T) {
	for _, tc := range []struct {
		in   []string
		want map[string]string
		err  string
	}{
		{in: nil, want: nil},
		{in: []string{"team=payments"}, want: map[string]string{"team": "payments"}},
		{in: []string{"a=1", "b=x=y,z", "c="}, want: map[string]string{"a": "1", "b": "x=y,z", "c": ""}},
		{in: []string{"novalue"}, err: `--metadata novalue: want key=value`},
		{in: []string{"=v"}, err: `--metadata =v: empty key`},
		{in: []string{"k=1", "k=2"}, err: `--metadata k=2: key "k" given twice`},
		{in: []string{"k=" + strings.Repeat("v", 257)}, err: `--metadata: metadata["k"]: values must be at most 256 bytes, got 257`},
	} {
		got, err := parseMetadata(tc.in)
		if tc.err != "" {
			if err == nil || err.Error() != tc.err {
				t.Errorf("%q: err %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%q: got %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

func TestEnvName(t *testing.T) {
	if got := envName("max-semaphores-per-namespace"); got != "GRACKLE_MAX_SEMAPHORES_PER_NAMESPACE" {
		t.Errorf("got %q", got)
	}
}

// Bad input never reaches the network: one line on stderr, exit 2. The
// endpoint is a port nothing listens on, so a call would fail with exit 1.
func TestUsageErrors(t *testing.T) {
	const lease = "ls_NfKKeiPbP18NFeU3lLGrRWWgDJRB"
	for _, tc := range []struct {
		args   []string
		env    map[string]string
		stderr string
	}{
		{[]string{"semaphore", "create", "third_parties", "partner_1", "--permits", "0"},
			nil, "grackle: semaphore create: --permits 0: must be at least 1"},
		{[]string{"semaphore", "create", "third_parties", "partner_1"},
			nil, "grackle: semaphore create: --permits is required (at least 1)"},
		{[]string{"semaphore", "create", "third_parties"},
			nil, "grackle: semaphore create: want arguments NAMESPACE SEMAPHORE, got 1"},
		{[]string{"semaphore", "create", "", "partner_1", "--permits", "1"},
			nil, "grackle: semaphore create: NAMESPACE: must not be empty"},
		{[]string{"semaphore", "create", "ns", "s", "--permits", "many"},
			nil, `grackle: semaphore create: --permits many: want a whole number`},
		{[]string{"semaphore", "acquire", "ns", "s"},
			nil, "grackle: semaphore acquire: --lease is required (create one with: grackle lease create ns --process-id ...)"},
		{[]string{"semaphore", "acquire", "ns", "s", "--lease", "ls_x"},
			nil, `grackle: semaphore acquire: --lease ls_x: must be "ls_" followed by 20..61 base62 characters, got "ls_x"`},
		{[]string{"semaphore", "acquire", "ns", "s", "--lease", lease, "--weight", "0"},
			nil, "grackle: semaphore acquire: --weight 0: must be at least 1"},
		{[]string{"semaphore", "acquire", "ns", "s", "--lease", lease, "--wait", "-1"},
			nil, "grackle: semaphore acquire: --wait -1: must not be negative"},
		{[]string{"semaphore", "acquire", "ns", "s", "--lease", lease, "--wait", "soon"},
			nil, `grackle: semaphore acquire: --wait soon: want a duration like 30s, 1m or 250ms (a bare number is seconds)`},
		{[]string{"semaphore", "acquire", "ns", "s", "--lease", lease, "--timeout", "-1"},
			nil, "grackle: semaphore acquire: --timeout -1: must be positive"},
		{[]string{"semaphore", "list", "ns", "-o", "template={{.x"},
			nil, `grackle: semaphore list: --output "template={{.x": bad template: template: output:1: unclosed action`},
		{[]string{"run", "--namespace", "ns", "--semaphore", "s", "--wait", "-5s", "--", "true"},
			nil, "grackle: run: --wait -5s: must not be negative"},
		{[]string{"run", "--namespace", "ns", "--semaphore", "s", "--ttl", "0", "--", "true"},
			nil, "grackle: run: --ttl 0: must be at least 1s"},
		{[]string{"semaphore", "release", "ns", "s"},
			nil, "grackle: semaphore release: --lease is required"},
		{[]string{"semaphore", "update", "ns", "s"},
			nil, "grackle: semaphore update: nothing to update: give --permits, --description, --metadata or --clear-metadata"},
		{[]string{"semaphore", "update", "ns", "s", "--metadata", "a=1", "--clear-metadata"},
			nil, "grackle: semaphore update: --metadata and --clear-metadata exclude each other"},
		{[]string{"namespace", "update", "ns", "--description", "d", "--expected-version", "0"},
			nil, "grackle: namespace update: --expected-version 0: must be at least 1"},
		{[]string{"namespace", "create", "ns", "--metadata", "oops"},
			nil, `grackle: namespace create: --metadata oops: want key=value`},
		{[]string{"namespace", "list", "--limit", "251"},
			nil, "grackle: namespace list: --limit 251: must be 0..250 (0: the server's default, 100)"},
		{[]string{"namespace", "list", "extra"},
			nil, `grackle: namespace list: takes no arguments, got "extra"`},
		{[]string{"namespace", "frobnicate"},
			nil, `grackle: namespace: unknown command "frobnicate"; see grackle namespace --help`},
		{[]string{"frobnicate"},
			nil, `grackle: unknown command "frobnicate"; see grackle --help`},
		{[]string{"lease", "create", "ns"},
			nil, "grackle: lease create: --process-id is required (any label of the caller, e.g. host-123/pid-4567)"},
		{[]string{"lease", "create", "ns", "--process-id", "p", "--ttl", "0"},
			nil, "grackle: lease create: --ttl 0: must be at least 1s"},
		{[]string{"lease", "list", "ns", "--bogus"},
			nil, "grackle: lease list: unknown flag: --bogus"},
		{[]string{"lease", "get", "ns", "ls_x"},
			nil, `grackle: lease get: LEASE_ID ls_x: must be "ls_" followed by 20..61 base62 characters, got "ls_x"`},
		{[]string{"lease", "get", "ns", lease, "-o", "yaml"},
			nil, `grackle: lease get: --output yaml: must be table, json, id or template='{{...}}'`},
		{[]string{"lease", "get", "ns", lease},
			map[string]string{"GRACKLE_OUTPUT": "xml"}, `grackle: lease get: GRACKLE_OUTPUT=xml: must be table, json, id or template='{{...}}'`},
		{[]string{"lease", "get", "ns", lease},
			map[string]string{"GRACKLE_TIMEOUT": "soon"}, `grackle: lease get: GRACKLE_TIMEOUT=soon: want a duration like 30s, 1m or 250ms (a bare number is seconds)`},
		{[]string{"lease", "get", "ns", lease, "--timeout", "0s"},
			nil, "grackle: lease get: --timeout 0s: must be positive"},
		{[]string{"namespace", "get", "bad name"},
			nil, `grackle: namespace get: NAMESPACE "bad name": may contain only [-_0-9a-zA-Z], found ' ' at byte 3`},
		{[]string{"cluster", "add", "n4", "--grpc-addr", "h:1"},
			nil, "grackle: cluster add: --raft-addr is required"},
		{[]string{"cluster", "transfer", "a", "b"},
			nil, "grackle: cluster transfer: want at most one argument NODE_ID, got 2"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			args := append(tc.args, "--endpoints", "127.0.0.1:1")
			r := runCLI(t, tc.env, args...)
			if r.code != exitUsage || r.stderr != tc.stderr+"\n" || r.stdout != "" {
				t.Fatalf("code %d (want 2)\nstderr %q\n  want %q\nstdout %q", r.code, r.stderr, tc.stderr+"\n", r.stdout)
			}
		})
	}
}

func TestHelpIsNotAnError(t *testing.T) {
	for _, args := range [][]string{{}, {"--help"}, {"semaphore"}, {"semaphore", "acquire", "--help"}, {"server", "-h"}} {
		r := runCLI(t, nil, args...)
		if r.code != 0 || r.stderr != "" || !strings.Contains(r.stdout, "Usage:") {
			t.Errorf("%q: code %d stderr %q stdout %.80q", args, r.code, r.stderr, r.stdout)
		}
	}
	r := runCLI(t, nil, "semaphore", "acquire", "--help")
	for _, s := range []string{"--lease", "--weight", "--wait duration", "--timeout duration", "--quiet", "--metadata", "--endpoints", "-o, --output"} {
		if !strings.Contains(r.stdout, s) {
			t.Errorf("acquire --help lacks %q:\n%s", s, r.stdout)
		}
	}
}

// Every RPC of the API has its command.
func TestCommandTree(t *testing.T) {
	a := &app{}
	root := a.rootCmd()
	for _, path := range []string{
		"server",
		"namespace create", "namespace get", "namespace list", "namespace update", "namespace delete",
		"semaphore create", "semaphore get", "semaphore list", "semaphore update", "semaphore delete",
		"semaphore acquire", "semaphore release", "semaphore holders",
		"lease create", "lease get", "lease refresh", "lease revoke", "lease list",
		"cluster status", "cluster add", "cluster remove", "cluster transfer",
	} {
		cmd, rest, err := root.Find(strings.Fields(path))
		if err != nil || len(rest) != 0 || cmd.CommandPath() != "grackle "+path {
			t.Errorf("%q: found %q rest %q err %v", path, cmd.CommandPath(), rest, err)
		}
	}
}

func TestParseDuration(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"60": time.Minute, "1.5": 1500 * time.Millisecond, "0": 0, "30s": 30 * time.Second,
		"1m30s": 90 * time.Second, "250ms": 250 * time.Millisecond, " 2s ": 2 * time.Second, "-1": -time.Second,
	} {
		if got, err := parseDuration(in); err != nil || got != want {
			t.Errorf("parseDuration(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "soon", "5x", "1e300"} {
		if _, err := parseDuration(in); err == nil {
			t.Errorf("parseDuration(%q): no error", in)
		}
	}
}

// Every duration flag of every command takes Go durations and bare
// seconds alike (durationValue), so a new command cannot slip back to
// pflag's own duration or to whole-second integers named like durations.
func TestEveryDurationFlagIsADurationValue(t *testing.T) {
	a := &app{}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Name() == "bench" {
			// bench/ registers its own flags (pflag durations: Go
			// durations, no bare seconds); it belongs to the bench tool.
			return
		}
		for _, fs := range []*pflag.FlagSet{c.LocalNonPersistentFlags(), c.PersistentFlags()} {
			fs.VisitAll(func(f *pflag.Flag) {
				if _, ok := f.Value.(*durationValue); ok {
					return
				}
				if strings.HasSuffix(f.Name, "-seconds") {
					return // a limit in the API's seconds (max-ttl-seconds)
				}
				if f.Value.Type() == "duration" || strings.Contains(f.Name, "ttl") || f.Name == "wait" || f.Name == "timeout" || f.Name == "grace" {
					t.Errorf("%s --%s is a %s, not a durationValue", c.CommandPath(), f.Name, f.Value.Type())
				}
			})
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(a.rootCmd())
}
