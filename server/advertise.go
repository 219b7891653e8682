package server

import (
	"fmt"
	"net"
	"strings"
)

// checkAdvertise refuses an advertised address that the node cannot be
// reached at: when the listen address names a host (not a wildcard such
// as 0.0.0.0, [::] or ""), the advertised host must be that host (a name
// must resolve to it). Only hosts are compared: a port may differ (port
// mapping, a proxy in front). With a wildcard bind, anything may be
// advertised (containers advertise their service name).
//
// A name that does not resolve here is not refused, only warned about: it
// may resolve where the other nodes and clients run and not on this host
// (a NAT, a DNS view of its own, a Kubernetes name published only once
// the pod is ready), and the client routes around an advertised address
// it cannot dial. Only an advertised host that resolves here to none of
// the addresses bound is certainly wrong.
func checkAdvertise(flag, listen, advertise string) (warning string, err error) {
	if advertise == "" {
		return "", nil
	}
	lh, _, err := net.SplitHostPort(listen)
	if err != nil {
		return "", fmt.Errorf("--%s-addr %q: %w", flag, listen, err)
	}
	ah, _, err := net.SplitHostPort(advertise)
	if err != nil {
		return "", fmt.Errorf("--advertise-%s %q: %w", flag, advertise, err)
	}
	lip := net.ParseIP(lh)
	if lh == "" || (lip != nil && lip.IsUnspecified()) {
		return "", nil
	}
	if lh == ah {
		return "", nil
	}
	listenIPs, err := net.LookupIP(lh)
	if err != nil {
		return "", fmt.Errorf("--%s-addr %q: %w", flag, listen, err)
	}
	advIPs, err := net.LookupIP(ah)
	if err != nil {
		return fmt.Sprintf("--advertise-%s %q does not resolve on this host (%v) while the node listens only on %s: peers and clients that cannot resolve it either will not reach this node",
			flag, advertise, err, listen), nil
	}
	for _, a := range advIPs {
		for _, l := range listenIPs {
			if a.Equal(l) {
				return "", nil
			}
		}
	}
	return "", &AdvertiseError{Flag: "advertise-" + flag, Advertise: advertise, Listen: listen}
}

// AdvertiseError is Start's refusal of an --advertise-raft or
// --advertise-grpc address that is not one the node listens on (checked
// before anything is bound): other nodes and clients would dial an
// address nothing answers.
type AdvertiseError struct {
	Flag      string // "advertise-raft" or "advertise-grpc"
	Advertise string // the advertised address
	Listen    string // the address the node binds
}

func (e *AdvertiseError) Error() string {
	listenFlag := strings.TrimPrefix(e.Flag, "advertise-") + "-addr"
	host, _, _ := net.SplitHostPort(e.Listen)
	return fmt.Sprintf("--%s %q is not an address this node listens on (--%s %q binds only %s): other nodes and clients would dial an address nothing answers; advertise %s, or listen on 0.0.0.0",
		e.Flag, e.Advertise, listenFlag, e.Listen, host, host)
}

// checkOwnEntry refuses a node whose own entry in --initial-members names
// other addresses than the node listens on or advertises: its peers would
// dial an address where nothing of it answers (a mistyped port made a
// member stand for elections it could never win while the others served).
// A wildcard listen address, or a host name on either side, is compared by
// port only.
func checkOwnEntry(cfg Config, id, raftAddr, grpcAddr string) error {
	for _, c := range []struct{ what, entry, flag, own, advFlag, adv string }{
		{"Raft", raftAddr, "--raft-addr", cfg.RaftAddr, "--advertise-raft", cfg.AdvertiseRaft},
		{"gRPC", grpcAddr, "--grpc-addr", cfg.GRPCAddr, "--advertise-grpc", cfg.AdvertiseGRPC},
	} {
		if c.entry == "" {
			continue
		}
		flag, own := c.flag, c.own
		if c.adv != "" {
			flag, own = c.advFlag, c.adv
		}
		if !sameAddress(c.entry, own) {
			return fmt.Errorf("--initial-members lists %s at %s address %s, but this node's %s is %s: make them the same", id, c.what, c.entry, flag, own)
		}
	}
	return nil
}

// sameAddress compares two host:port addresses as one node's: equal ports,
// and equal hosts where both are IP literals of a specific address.
func sameAddress(a, b string) bool {
	ah, ap, errA := net.SplitHostPort(a)
	bh, bp, errB := net.SplitHostPort(b)
	if errA != nil || errB != nil {
		return a == b
	}
	if ap != bp && ap != "0" && bp != "0" {
		return false
	}
	ai, bi := net.ParseIP(ah), net.ParseIP(bh)
	if ai == nil || bi == nil || ai.IsUnspecified() || bi.IsUnspecified() || ah == "" || bh == "" {
		return true
	}
	return ai.Equal(bi)
}
