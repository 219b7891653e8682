package main

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/grackle-coord/grackle/server"
)

// parseServerFlags maps args onto a Config that starts from DefaultConfig,
// exactly as `grackle server` does.
func parseServerFlags(t *testing.T, args ...string) server.Config {
	t.Helper()
	cfg := server.DefaultConfig()
	fs := pflag.NewFlagSet("server", pflag.ContinueOnError)
	bindServerFlags(fs, &cfg)
	if err := fs.Parse(args); err != nil {
		t.Fatalf("parse %q: %v", args, err)
	}
	return cfg
}

func TestServerFlagsDefaultToDefaultConfig(t *testing.T) {
	if got, want := parseServerFlags(t), server.DefaultConfig(); !reflect.DeepEqual(got, want) {
		t.Fatalf("no flags:\n got %+v\nwant %+v", got, want)
	}
}

// allServerArgs sets every server flag to a value other than its default.
var allServerArgs = []string{
	"--node-id", "n2",
	"--data-dir", "/var/lib/grackle",
	"--grpc-addr", "0.0.0.0:8420",
	"--raft-addr", "0.0.0.0:8421",
	"--http-addr", "0.0.0.0:8422",
	"--advertise-grpc", "10.0.0.2:8420",
	"--advertise-raft", "10.0.0.2:8421",
	"--initial-members", "n1=10.0.0.1:8421=10.0.0.1:8420,n2=10.0.0.2:8421=10.0.0.2:8420",
	"--join", "10.0.0.1:8420",
	"--max-namespaces", "11",
	"--max-semaphores-per-namespace", "12",
	"--max-leases-per-namespace", "13",
	"--max-holders-per-semaphore", "14",
	"--max-permits", "15",
	"--max-ttl-seconds", "16",
	"--max-locks-per-namespace", "22",
	"--max-lock-leases-per-namespace", "23",
	"--max-holders-per-lock", "24",
	"--max-wait-groups-per-namespace", "26",
	"--max-barriers-per-namespace", "27",
	"--max-wait-group-counter", "28",
	"--max-barrier-processes", "29",
	"--max-jobs-per-call", "30",
	"--max-waiters", "25",
	"--max-waiters-per-process", "12",
	"--max-timeout-seconds", "17",
	"--watch-stall-timeout", "19s",
	"--max-watchers", "18",
	"--max-watchers-per-connection", "9",
	"--max-watchers-per-client", "11",
	"--member-probe-timeout", "3s",
	"--max-queued-proposals", "21",
	"--heartbeat-timeout", "1s",
	"--promote-after", "5s",
	"--max-nonvoters", "7",
	"--election-timeout", "2s",
	"--leader-lease-timeout", "300ms",
	"--commit-timeout", "7ms",
	"--pack-hold", "3ms",
	"--pack-hold-idle", "500us",
	"--snapshot-threshold", "99",
	"--snapshot-interval", "1m",
	"--trailing-logs", "98",
	"--raft-log-store", "bolt",
	"--raft-wal-segment-size", "1048576",
	"--tls-cert-file", "/etc/grackle/api.crt",
	"--tls-key-file", "/etc/grackle/api.key",
	"--tls-client-ca-file", "/etc/grackle/client-ca.crt",
	"--http-client-cert", "none",
	"--peer-tls-cert-file", "/etc/grackle/peer.crt",
	"--peer-tls-key-file", "/etc/grackle/peer.key",
	"--peer-tls-ca-file", "/etc/grackle/peer-ca.crt",
	"--acl",
	"--insecure",
	"--join-token", "grk_join",
	"--max-connections", "77",
	"--max-connections-per-address", "33",
	"--handshake-timeout", "3s",
	"--idle-timeout", "4m",
	"--shutdown-timeout", "20s",
	"--ready-max-lag", "55",
	"--memory-limit", "900MiB",
	"--max-state-bytes", "512MiB",
	"--gc-headroom", "1GiB",
	"--log-level-file", "/etc/grackle/log-level",
	"--log-level", "debug",
	"--log-json",
	"--pprof",
}

func allServerConfig() server.Config {
	want := server.DefaultConfig()
	want.NodeID = "n2"
	want.DataDir = "/var/lib/grackle"
	want.GRPCAddr = "0.0.0.0:8420"
	want.RaftAddr = "0.0.0.0:8421"
	want.HTTPAddr = "0.0.0.0:8422"
	want.AdvertiseGRPC = "10.0.0.2:8420"
	want.AdvertiseRaft = "10.0.0.2:8421"
	want.InitialMembers = "n1=10.0.0.1:8421=10.0.0.1:8420,n2=10.0.0.2:8421=10.0.0.2:8420"
	want.Join = "10.0.0.1:8420"
	want.Limits.MaxNamespaces = 11
	want.Limits.MaxSemaphoresPerNamespace = 12
	want.Limits.MaxLeasesPerNamespace = 13
	want.Limits.MaxHoldersPerSemaphore = 14
	want.Limits.MaxPermits = 15
	want.Limits.MaxTTLSeconds = 16
	want.Limits.MaxLocksPerNamespace = 22
	want.Limits.MaxLockLeasesPerNamespace = 23
	want.Limits.MaxHoldersPerLock = 24
	want.Limits.MaxWaitGroupsPerNamespace = 26
	want.Limits.MaxBarriersPerNamespace = 27
	want.Limits.MaxWaitGroupCounter = 28
	want.Limits.MaxBarrierProcesses = 29
	want.Limits.MaxJobsPerCall = 30
	want.MaxWaiters = 25
	want.MaxTimeoutSeconds = 17
	want.WatchStallTimeout = 19 * time.Second
	want.MaxWatchers = 18
	want.MemberProbeTimeout = 3 * time.Second
	want.MaxQueuedProposals = 21
	want.HeartbeatTimeout = time.Second
	want.PromoteAfter = 5 * time.Second
	want.MaxNonvoters = 7
	want.ElectionTimeout = 2 * time.Second
	want.LeaderLeaseTimeout = 300 * time.Millisecond
	want.CommitTimeout = 7 * time.Millisecond
	want.PackHold = 3 * time.Millisecond
	want.PackHoldIdle = 500 * time.Microsecond
	want.SnapshotThreshold = 99
	want.SnapshotInterval = time.Minute
	want.TrailingLogs = 98
	want.RaftLogStore = "bolt"
	want.RaftWALSegmentSize = 1 << 20
	want.TLSCertFile = "/etc/grackle/api.crt"
	want.TLSKeyFile = "/etc/grackle/api.key"
	want.TLSClientCAFile = "/etc/grackle/client-ca.crt"
	want.HTTPClientCert = "none"
	want.PeerTLSCertFile = "/etc/grackle/peer.crt"
	want.PeerTLSKeyFile = "/etc/grackle/peer.key"
	want.PeerTLSCAFile = "/etc/grackle/peer-ca.crt"
	want.ACL = true
	want.Insecure = true
	want.JoinToken = "grk_join"
	want.MaxConnections = 77
	want.MaxConnectionsPerAddress = 33
	want.MaxWaitersPerProcess = 12
	want.MaxWatchersPerConnection = 9
	want.MaxWatchersPerClient = 11
	want.HandshakeTimeout = 3 * time.Second
	want.IdleTimeout = 4 * time.Minute
	want.ShutdownTimeout = 20 * time.Second
	want.ReadyMaxLag = 55
	want.MemoryLimit = "900MiB"
	want.MaxStateBytes = "512MiB"
	want.GCHeadroom = "1GiB"
	want.LogLevelFile = "/etc/grackle/log-level"
	want.LogLevel = "debug"
	want.LogJSON = true
	want.Pprof = true
	return want
}

func TestServerFlagsMapOntoConfig(t *testing.T) {
	got := parseServerFlags(t, allServerArgs...)
	if want := allServerConfig(); !reflect.DeepEqual(got, want) {
		t.Fatalf("all flags:\n got %+v\nwant %+v", got, want)
	}
}

// TestEveryConfigFieldHasAFlag fails when server.Config grows a field that
// `grackle server` cannot set: after setting every flag, every leaf field
// must differ from its default.
func TestEveryConfigFieldHasAFlag(t *testing.T) {
	got := parseServerFlags(t, allServerArgs...)
	def := server.DefaultConfig()
	var walk func(path string, g, d reflect.Value)
	walk = func(path string, g, d reflect.Value) {
		if g.Kind() == reflect.Struct {
			for i := 0; i < g.NumField(); i++ {
				walk(path+"."+g.Type().Field(i).Name, g.Field(i), d.Field(i))
			}
			return
		}
		if k := g.Kind(); k == reflect.Interface || k == reflect.Func {
			return // an injection point for tests (Clock), not a setting
		}
		if path == ".Limits.MaxStateBytes" {
			return // Start sets it from MaxStateBytes (--max-state-bytes: auto, off or a size)
		}
		if reflect.DeepEqual(g.Interface(), d.Interface()) {
			t.Errorf("server.Config%s is not set by any `grackle server` flag", path)
		}
	}
	walk("", reflect.ValueOf(got), reflect.ValueOf(def))
}

func TestServerCommandRunsWithConfig(t *testing.T) {
	var got server.Config
	calls := 0
	stub := func(_ context.Context, cfg server.Config) error {
		calls++
		got = cfg
		return nil
	}
	r := runCLIServer(t, nil, stub, append([]string{"server"}, allServerArgs...)...)
	if r.code != 0 || calls != 1 {
		t.Fatalf("code %d, calls %d, stderr %q", r.code, calls, r.stderr)
	}
	if want := allServerConfig(); !reflect.DeepEqual(got, want) {
		t.Fatalf("server.Run got\n %+v\nwant %+v", got, want)
	}

	// No flag at all: DefaultConfig.
	r = runCLIServer(t, nil, stub, "server")
	if r.code != 0 || !reflect.DeepEqual(got, server.DefaultConfig()) {
		t.Fatalf("no flags: code %d, cfg %+v", r.code, got)
	}
}

func TestServerEnvironment(t *testing.T) {
	var got server.Config
	stub := func(_ context.Context, cfg server.Config) error { got = cfg; return nil }
	env := map[string]string{
		"GRACKLE_NODE_ID":           "from-env",
		"GRACKLE_DATA_DIR":          "/env/data",
		"GRACKLE_MAX_PERMITS":       "42",
		"GRACKLE_ELECTION_TIMEOUT":  "3s",
		"GRACKLE_LOG_JSON":          "true",
		"GRACKLE_SNAPSHOT_INTERVAL": "2m",
	}
	r := runCLIServer(t, env, stub, "server", "--data-dir", "/flag/data")
	if r.code != 0 {
		t.Fatalf("code %d, stderr %q", r.code, r.stderr)
	}
	want := server.DefaultConfig()
	want.NodeID = "from-env"
	want.DataDir = "/flag/data" // the flag wins over the environment
	want.Limits.MaxPermits = 42
	want.ElectionTimeout = 3 * time.Second
	want.LogJSON = true
	want.SnapshotInterval = 2 * time.Minute
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got\n %+v\nwant %+v", got, want)
	}

	// --insecure from the environment accepts a plaintext port beyond loopback.
	r = runCLIServer(t, map[string]string{"GRACKLE_INSECURE": "true"}, stub, "server", "--grpc-addr", "0.0.0.0:7420")
	if r.code != 0 || !got.Insecure || got.GRPCAddr != "0.0.0.0:7420" {
		t.Fatalf("GRACKLE_INSECURE: code %d, insecure %v, stderr %q", r.code, got.Insecure, r.stderr)
	}

	r = runCLIServer(t, map[string]string{"GRACKLE_MAX_PERMITS": "lots"}, stub, "server")
	if r.code != exitUsage || r.stderr != "grackle: server: GRACKLE_MAX_PERMITS=lots: want a whole number\n" {
		t.Fatalf("bad env: code %d, stderr %q", r.code, r.stderr)
	}
}

func TestServerErrors(t *testing.T) {
	stubErr := func(context.Context, server.Config) error {
		return errors.New("listen tcp 127.0.0.1:7420: bind: address already in use")
	}
	for _, tc := range []struct {
		name   string
		run    func(context.Context, server.Config) error
		args   []string
		code   int
		stderr string
	}{
		{"run fails", stubErr, []string{"server"}, exitCallFailed,
			"grackle: server: listen tcp 127.0.0.1:7420: bind: address already in use\n"},
		{"bad level", nil, []string{"server", "--log-level", "loud"}, exitUsage,
			"grackle: server: --log-level loud: must be trace, debug, info, warn or error\n"},
		{"negative limit", nil, []string{"server", "--max-permits", "-1"}, exitUsage,
			"grackle: server: --max-permits -1: must not be negative\n"},
		{"bad duration", nil, []string{"server", "--election-timeout", "5x"}, exitUsage,
			"grackle: server: --election-timeout 5x: want a duration like 30s, 1m or 250ms (a bare number is seconds)\n"},
		{"bad gc headroom", nil, []string{"server", "--gc-headroom", "lots"}, exitUsage,
			"grackle: server: gc-headroom: \"lots\": want auto, off or a size such as 512MiB or 1GiB (B, KiB, MiB, GiB, TiB)\n"},
		{"bad state quota", nil, []string{"server", "--max-state-bytes", "lots"}, exitUsage,
			"grackle: server: max-state-bytes: \"lots\": want auto, off (or 0), or a size such as 512MiB or 2GiB (B, KiB, MiB, GiB, TiB)\n"},
		{"unknown flag", nil, []string{"server", "--nope"}, exitUsage,
			"grackle: server: unknown flag: --nope\n"},
		{"positional", nil, []string{"server", "extra"}, exitUsage,
			"grackle: server: takes no arguments, got \"extra\"\n"},
		{"plaintext beyond loopback", nil, []string{"server", "--grpc-addr", "0.0.0.0:7420", "--http-addr", ""}, exitUsage,
			"grackle: server: --grpc-addr 0.0.0.0:7420 is beyond loopback without TLS and without --acl: give --tls-cert-file and --tls-key-file (TLS), and --acl (access control); or --insecure to accept plaintext without access control (docs/SECURITY.md, Threat model)\n"},
		{"raft beyond loopback", nil, []string{"server", "--raft-addr", "10.0.0.1:7421"}, exitUsage,
			"grackle: server: --raft-addr 10.0.0.1:7421 is beyond loopback without peer TLS (anyone who reaches it can write to the Raft log): give --peer-tls-cert-file, --peer-tls-key-file and --peer-tls-ca-file; or --insecure to accept plaintext without access control (docs/SECURITY.md, Threat model)\n"},
		{"http-client-cert unknown", nil, []string{"server", "--http-client-cert", "optional"}, exitUsage,
			"grackle: server: --http-client-cert: must be require or none, got \"optional\"\n"},
		{"http-client-cert none without TLS", nil, []string{"server", "--http-client-cert", "none"}, exitUsage,
			"grackle: server: --http-client-cert none serves the HTTP port over TLS without client certificates: give --tls-cert-file and --tls-key-file too (or drop --http-client-cert)\n"},
		{"http-client-cert none beyond loopback without --acl", nil, []string{"server", "--http-client-cert", "none", "--http-addr", "0.0.0.0:7422",
			"--tls-cert-file", "api.crt", "--tls-key-file", "api.key", "--tls-client-ca-file", "ca.crt"}, exitUsage,
			"grackle: server: --http-addr 0.0.0.0:7422 is beyond loopback with --http-client-cert none and without --acl (anyone who reaches it reads /status, /metrics and the web view): give --acl (a token then guards them), or --http-client-cert require; or --insecure to accept plaintext without access control (docs/SECURITY.md, Threat model)\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			run := tc.run
			if run == nil {
				run = func(context.Context, server.Config) error {
					t.Error("server.Run called")
					return nil
				}
			}
			r := runCLIServer(t, nil, run, tc.args...)
			if r.code != tc.code || r.stderr != tc.stderr || r.stdout != "" {
				t.Fatalf("code %d (want %d)\nstderr %q\n  want %q\nstdout %q", r.code, tc.code, r.stderr, tc.stderr, r.stdout)
			}
		})
	}
}

// A server stopped by its context (SIGINT/SIGTERM) exits 0 even when Run
// reports the cancellation.
func TestServerStopsCleanlyOnSignal(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	a := &app{
		stdout:    &strings.Builder{},
		stderr:    &strings.Builder{},
		now:       time.Now,
		lookupEnv: func(string) (string, bool) { return "", false },
		runServer: func(ctx context.Context, _ server.Config) error {
			cancel()
			<-ctx.Done()
			return ctx.Err()
		},
	}
	if code := a.execute(ctx, []string{"server"}); code != 0 {
		t.Fatalf("code %d, stderr %q", code, a.stderr)
	}
}
