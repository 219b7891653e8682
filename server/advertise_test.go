package server

import (
	"errors"
	"strings"
	"testing"
)

func TestAdvertiseMustBeAListenAddress(t *testing.T) {
	for _, c := range []struct {
		listen, adv string
		ok, warn    bool
	}{
		{"127.0.0.1:7421", "", true, false},
		{"127.0.0.1:7421", "127.0.0.1:9999", true, false}, // a port may differ
		{"127.0.0.1:7421", "localhost:7421", true, false}, // a name that resolves to it
		{"0.0.0.0:7421", "10.9.9.9:7421", true, false},    // wildcard: anything
		{"[::]:7421", "n1:7421", true, false},
		{":7421", "n1:7421", true, false},
		{"127.0.0.1:7421", "127.0.0.2:7421", false, false}, // the case
		// A name this host cannot resolve may resolve where peers run: a
		// warning, not a refusal.
		{"127.0.0.1:7421", "no-such-host.invalid:7421", true, true},
	} {
		warning, err := checkAdvertise("raft", c.listen, c.adv)
		var ae *AdvertiseError
		if (err == nil) != c.ok || err != nil && !errors.As(err, &ae) {
			t.Errorf("listen %s advertise %s: %v, want ok=%v (a refusal is an AdvertiseError)", c.listen, c.adv, err, c.ok)
		}
		if (warning != "") != c.warn {
			t.Errorf("listen %s advertise %s: warning %q, want one=%v", c.listen, c.adv, warning, c.warn)
		}
		if warning != "" && !strings.Contains(warning, "--advertise-raft") {
			t.Errorf("warning does not name the flag: %v", warning)
		}
		if err != nil && !strings.Contains(err.Error(), "--advertise-raft") {
			t.Errorf("error does not name the flag: %v", err)
		}
	}
}

// Start refuses the node before binding anything.
func TestStartRefusesUnreachableAdvertise(t *testing.T) {
	cfg := DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.GRPCAddr, cfg.RaftAddr, cfg.HTTPAddr = "127.0.0.1:0", "127.0.0.1:0", ""
	cfg.AdvertiseRaft = "127.0.0.2:7421"
	var ae *AdvertiseError
	if _, err := Start(cfg, nil); !errors.As(err, &ae) || ae.Flag != "advertise-raft" || !strings.Contains(err.Error(), "--advertise-raft") {
		t.Fatalf("start: %v, want an AdvertiseError naming --advertise-raft", err)
	}
	cfg.AdvertiseRaft, cfg.AdvertiseGRPC = "", "127.0.0.2:7420"
	if _, err := Start(cfg, nil); !errors.As(err, &ae) || ae.Flag != "advertise-grpc" || !strings.Contains(err.Error(), "--advertise-grpc") {
		t.Fatalf("start: %v, want an AdvertiseError naming --advertise-grpc", err)
	}
}

// The web view dials its own node: a wildcard bind is dialed on loopback.
func TestSelfDialAddr(t *testing.T) {
	for in, want := range map[string]string{
		"0.0.0.0:7420":   "127.0.0.1:7420",
		"[::]:7420":      "127.0.0.1:7420",
		":7420":          "127.0.0.1:7420",
		"10.0.0.5:7420":  "10.0.0.5:7420",
		"127.0.0.1:7420": "127.0.0.1:7420",
	} {
		if got := selfDialAddr(in); got != want {
			t.Errorf("selfDialAddr(%q) = %q, want %q", in, got, want)
		}
	}
}

// A node whose own --initial-members entry names other addresses than it
// listens on (or advertises) is refused in one line naming the flag and
// both values.
func TestCheckOwnEntry(t *testing.T) {
	for _, tc := range []struct {
		name                 string
		raft, grpc, advRaft  string
		entryRaft, entryGRPC string
		want                 string
	}{
		{name: "same", raft: "127.0.0.1:7511", grpc: "127.0.0.1:7510", entryRaft: "127.0.0.1:7511", entryGRPC: "127.0.0.1:7510"},
		{name: "raft port", raft: "127.0.0.1:7511", grpc: "127.0.0.1:7510", entryRaft: "127.0.0.1:7521", entryGRPC: "127.0.0.1:7510",
			want: "--initial-members lists n1 at Raft address 127.0.0.1:7521, but this node's --raft-addr is 127.0.0.1:7511: make them the same"},
		{name: "grpc port", raft: "127.0.0.1:7511", grpc: "127.0.0.1:7510", entryRaft: "127.0.0.1:7511", entryGRPC: "127.0.0.1:7520",
			want: "--initial-members lists n1 at gRPC address 127.0.0.1:7520, but this node's --grpc-addr is 127.0.0.1:7510: make them the same"},
		{name: "advertised wins", raft: "0.0.0.0:7511", advRaft: "10.0.0.1:7511", entryRaft: "10.0.0.2:7511",
			want: "--initial-members lists n1 at Raft address 10.0.0.2:7511, but this node's --advertise-raft is 10.0.0.1:7511: make them the same"},
		{name: "wildcard listen, port only", raft: "0.0.0.0:7511", entryRaft: "10.0.0.1:7511"},
		{name: "names compare by port", raft: "n1:7511", entryRaft: "n1.grackle-peers:7511"},
		{name: "no gRPC in the entry", raft: "127.0.0.1:7511", grpc: "127.0.0.1:7510", entryRaft: "127.0.0.1:7511"},
	} {
		cfg := Config{RaftAddr: tc.raft, GRPCAddr: tc.grpc, AdvertiseRaft: tc.advRaft}
		err := checkOwnEntry(cfg, "n1", tc.entryRaft, tc.entryGRPC)
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
