package main

import (
	"context"
	"errors"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/grackle-coord/grackle/server"
)

func (a *app) serverCmd() *cobra.Command {
	cfg := server.DefaultConfig()
	cmd := &cobra.Command{
		Use:   "server",
		Short: "Run a Grackle node",
		Long: `Run a Grackle node: the Raft node, the state machine and the gRPC API
(with reflection and health) until SIGINT or SIGTERM.

With no flags it is a single node on loopback that bootstraps itself in
./grackle-data. A port beyond loopback (0.0.0.0, a host's address) needs
TLS (the gRPC port also --acl, the Raft port peer TLS), or --insecure to
accept it plaintext: without either the node refuses to start. A multi-node cluster starts every node with the same
--initial-members, or starts one node and adds the others with --join.

Every flag can also be set from the environment as GRACKLE_<FLAG> in upper
snake case (GRACKLE_NODE_ID, GRACKLE_MAX_PERMITS, ...); a flag on the
command line wins.`,
		Example: `  grackle server
  grackle server --node-id n1 --data-dir /var/lib/grackle \
    --grpc-addr 0.0.0.0:7420 --raft-addr 0.0.0.0:7421 --http-addr 0.0.0.0:7422 \
    --advertise-grpc 10.0.0.1:7420 --advertise-raft 10.0.0.1:7421 \
    --initial-members n1=10.0.0.1:7421=10.0.0.1:7420,n2=10.0.0.2:7421=10.0.0.2:7420,n3=10.0.0.3:7421=10.0.0.3:7420 \
    --tls-cert-file n1-api.crt --tls-key-file n1-api.key --tls-client-ca-file api-ca.crt \
    --peer-tls-cert-file n1-peer.crt --peer-tls-key-file n1-peer.key --peer-tls-ca-file peer-ca.crt --acl`,
		Args: positional(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := applyEnv(cmd.Flags(), a.lookupEnv); err != nil {
				return err
			}
			if err := checkServerConfig(cmd, cfg); err != nil {
				return err
			}
			ctx := cmd.Context()
			err := a.runServer(ctx, cfg)
			if err != nil && !(ctx.Err() != nil && errors.Is(err, context.Canceled)) {
				return &exitError{code: exitCallFailed, msg: err.Error()}
			}
			return nil
		},
	}
	bindServerFlags(cmd.Flags(), &cfg)
	cmd.Flags().SortFlags = false
	return cmd
}

// bindServerFlags registers one flag per server.Config field on fs, each
// writing into cfg and defaulting to cfg's current value (DefaultConfig's
// when cfg comes from it).
func bindServerFlags(fs *pflag.FlagSet, cfg *server.Config) {
	fs.StringVar(&cfg.NodeID, "node-id", cfg.NodeID, "unique, stable id of this node")
	fs.StringVar(&cfg.DataDir, "data-dir", cfg.DataDir, "directory of the Raft log, stable store and snapshots")
	fs.StringVar(&cfg.GRPCAddr, "grpc-addr", cfg.GRPCAddr, "listen address of the gRPC API")
	fs.StringVar(&cfg.RaftAddr, "raft-addr", cfg.RaftAddr, "listen address of the Raft transport")
	fs.StringVar(&cfg.HTTPAddr, "http-addr", cfg.HTTPAddr, `listen address of /healthz, /readyz, /status, /metrics and the web view /ui/ ("" = off)`)
	fs.BoolVar(&cfg.Pprof, "pprof", false, "serve Go profiles under /debug/pprof/ on the HTTP port")
	fs.StringVar(&cfg.AdvertiseGRPC, "advertise-grpc", cfg.AdvertiseGRPC, "gRPC address other nodes and clients dial, when it differs from --grpc-addr")
	fs.StringVar(&cfg.AdvertiseRaft, "advertise-raft", cfg.AdvertiseRaft, "Raft address other nodes dial, when it differs from --raft-addr")
	fs.StringVar(&cfg.InitialMembers, "initial-members", cfg.InitialMembers, `bootstrap a cluster: the same "id=raftAddr=grpcAddr,..." on every node (empty: a single node)`)
	fs.StringVar(&cfg.Join, "join", cfg.Join, "gRPC address of a running member to join instead of bootstrapping")
	durationVar(fs, &cfg.PromoteAfter, "promote-after", cfg.PromoteAfter, "a member added to vote joins as a nonvoter; the leader promotes it once it has been caught up this long (0: 2s)")
	fs.IntVar(&cfg.MaxNonvoters, "max-nonvoters", cfg.MaxNonvoters, "most members that are not (yet) voters; every new member joins as one, and AddMember beyond it is refused (FailedPrecondition) (0: 3; negative: no bound)")

	fs.Int64Var(&cfg.Limits.MaxNamespaces, "max-namespaces", cfg.Limits.MaxNamespaces, "most namespaces")
	fs.Int64Var(&cfg.Limits.MaxSemaphoresPerNamespace, "max-semaphores-per-namespace", cfg.Limits.MaxSemaphoresPerNamespace, "most semaphores in one namespace")
	fs.Int64Var(&cfg.Limits.MaxLeasesPerNamespace, "max-leases-per-namespace", cfg.Limits.MaxLeasesPerNamespace, "most leases in one namespace")
	fs.Int64Var(&cfg.Limits.MaxHoldersPerSemaphore, "max-holders-per-semaphore", cfg.Limits.MaxHoldersPerSemaphore, "most holders of one semaphore")
	fs.Int64Var(&cfg.Limits.MaxPermits, "max-permits", cfg.Limits.MaxPermits, "largest permits of a semaphore")
	fs.Int64Var(&cfg.Limits.MaxTTLSeconds, "max-ttl-seconds", cfg.Limits.MaxTTLSeconds, "largest lease ttl_seconds")
	fs.Int64Var(&cfg.Limits.MaxLocksPerNamespace, "max-locks-per-namespace", cfg.Limits.MaxLocksPerNamespace, "most held locks in one namespace")
	fs.Int64Var(&cfg.Limits.MaxLockLeasesPerNamespace, "max-lock-leases-per-namespace", cfg.Limits.MaxLockLeasesPerNamespace, "most lock leases in one namespace")
	fs.Int64Var(&cfg.Limits.MaxHoldersPerLock, "max-holders-per-lock", cfg.Limits.MaxHoldersPerLock, "most (shared) holders of one lock")
	fs.Int64Var(&cfg.Limits.MaxWaitGroupsPerNamespace, "max-wait-groups-per-namespace", cfg.Limits.MaxWaitGroupsPerNamespace, "most wait groups in one namespace")
	fs.Int64Var(&cfg.Limits.MaxBarriersPerNamespace, "max-barriers-per-namespace", cfg.Limits.MaxBarriersPerNamespace, "most barriers in one namespace")
	fs.Int64Var(&cfg.Limits.MaxWaitGroupCounter, "max-wait-group-counter", cfg.Limits.MaxWaitGroupCounter, "largest counter (jobs) of a wait group")
	fs.Int64Var(&cfg.Limits.MaxBarrierProcesses, "max-barrier-processes", cfg.Limits.MaxBarrierProcesses, "largest expected_processes of a barrier")
	fs.Int64Var(&cfg.Limits.MaxJobsPerCall, "max-jobs-per-call", cfg.Limits.MaxJobsPerCall, "most jobs in one CompleteJobsFromWaitGroup call")
	fs.Int64Var(&cfg.MaxTimeoutSeconds, "max-timeout-seconds", cfg.MaxTimeoutSeconds, "largest AcquireSemaphore timeout_seconds")
	durationVar(fs, &cfg.WatchStallTimeout, "watch-stall-timeout", cfg.WatchStallTimeout, "a WatchSemaphore stream that takes no message for this long is cut off (0: 10s)")
	fs.IntVar(&cfg.MaxWatchers, "max-watchers", cfg.MaxWatchers, "most watch streams (WatchSemaphore, WatchLock) one node serves (0: 10,000)")
	fs.IntVar(&cfg.MaxWatchersPerConnection, "max-watchers-per-connection", cfg.MaxWatchersPerConnection, "most watch streams of one client connection on a node (0: 1,000)")
	fs.IntVar(&cfg.MaxWatchersPerClient, "max-watchers-per-client", cfg.MaxWatchersPerClient, "most watch streams of one client on a node: one token, or without access control one network address (0: 1,000)")
	durationVar(fs, &cfg.MemberProbeTimeout, "member-probe-timeout", cfg.MemberProbeTimeout, "each of this node's health probes of the other members (one a second each; grackle cluster status, the web view, /status and the metrics show the results); a slower member shows as unreachable (0: 750ms)")
	durationVar(fs, &cfg.PackHold, "pack-hold", cfg.PackHold, "when an entry commits, the writes queued meanwhile wait at most this long for its callers' next writes, to share one entry (0: 4ms; negative: off)")
	durationVar(fs, &cfg.PackHoldIdle, "pack-hold-idle", cfg.PackHoldIdle, "that wait ends once no write has arrived for this long (0: 1ms)")
	fs.IntVar(&cfg.MaxWaitersPerProcess, "max-waiters-per-process", cfg.MaxWaitersPerProcess, "most queued waiters of one process (the leases of one process_id) on one semaphore or one lock; beyond, its acquire answers ResourceExhausted, reason QUEUE_FULL (0: 1,000; negative: no bound)")
	fs.IntVar(&cfg.MaxWaiters, "max-waiters", cfg.MaxWaiters, "most queued waiters of one semaphore or one lock, and most waiting calls on one wait group or barrier; beyond, the call answers ResourceExhausted (0: 10,000)")
	fs.IntVar(&cfg.MaxQueuedProposals, "max-queued-proposals", cfg.MaxQueuedProposals, "most writes waiting on the leader to be proposed; beyond, writes answer ResourceExhausted (OVERLOADED) (0: 10,000)")

	durationVar(fs, &cfg.HeartbeatTimeout, "heartbeat-timeout", cfg.HeartbeatTimeout, "Raft heartbeat timeout")
	durationVar(fs, &cfg.ElectionTimeout, "election-timeout", cfg.ElectionTimeout, "Raft election timeout")
	durationVar(fs, &cfg.LeaderLeaseTimeout, "leader-lease-timeout", cfg.LeaderLeaseTimeout, "Raft leader lease timeout")
	durationVar(fs, &cfg.CommitTimeout, "commit-timeout", cfg.CommitTimeout, "Raft commit timeout")
	fs.Uint64Var(&cfg.SnapshotThreshold, "snapshot-threshold", cfg.SnapshotThreshold, "Raft log entries between snapshots")
	durationVar(fs, &cfg.SnapshotInterval, "snapshot-interval", cfg.SnapshotInterval, "how often Raft checks whether to snapshot")
	fs.Uint64Var(&cfg.TrailingLogs, "trailing-logs", cfg.TrailingLogs, "Raft log entries kept after a snapshot")
	fs.StringVar(&cfg.RaftLogStore, "raft-log-store", cfg.RaftLogStore, `format of a new data dir's Raft log: "wal" (segment files in wal/, one fsync per append) or "bolt" (raft.db); an existing data dir keeps its own (default "wal")`)
	fs.IntVar(&cfg.RaftWALSegmentSize, "raft-wal-segment-size", cfg.RaftWALSegmentSize, "bytes of each WAL segment file, preallocated when started; the node refuses writes as a full disk while less than one segment plus 1 MiB is free (0: 64 MiB)")

	fs.StringVar(&cfg.TLSCertFile, "tls-cert-file", cfg.TLSCertFile, "serve the client API (gRPC and HTTP) with TLS: certificate file (PEM)")
	fs.StringVar(&cfg.TLSKeyFile, "tls-key-file", cfg.TLSKeyFile, "the API certificate's private key file (PEM)")
	fs.StringVar(&cfg.TLSClientCAFile, "tls-client-ca-file", cfg.TLSClientCAFile, "require client certificates signed by this CA (mutual TLS; on the HTTP port /healthz and /readyz stay open, and --http-client-cert none asks for none there)")
	fs.StringVar(&cfg.HTTPClientCert, "http-client-cert", cfg.HTTPClientCert, `client certificates on the HTTP port: require (as the gRPC port: with --tls-client-ca-file, for all but /healthz and /readyz) or none (HTTPS without asking for one, so browsers reach /ui/; an ACL token then guards /status, /metrics and the web view's data: needs TLS, and --acl beyond loopback)`)
	fs.StringVar(&cfg.PeerTLSCertFile, "peer-tls-cert-file", cfg.PeerTLSCertFile, "peer TLS (Raft, forwarding): this node's peer certificate (PEM)")
	fs.StringVar(&cfg.PeerTLSKeyFile, "peer-tls-key-file", cfg.PeerTLSKeyFile, "the peer certificate's private key (PEM)")
	fs.StringVar(&cfg.PeerTLSCAFile, "peer-tls-ca-file", cfg.PeerTLSCAFile, "the CA that signs every peer's certificate; both sides verify")
	fs.BoolVar(&cfg.ACL, "acl", cfg.ACL, "access control: every call needs a token (grackle acl bootstrap makes the first)")
	fs.BoolVar(&cfg.Insecure, "insecure", cfg.Insecure, "accept ports beyond loopback without TLS (the gRPC port also without --acl) and joins beyond loopback without access control; without it such a node refuses to start (docs/SECURITY.md)")
	fs.StringVar(&cfg.JoinToken, "join-token", cfg.JoinToken, "token (admin) presented by --join to a cluster with access control on")
	fs.IntVar(&cfg.MaxConnections, "max-connections", cfg.MaxConnections, "most open connections per port (gRPC, HTTP, Raft)")
	fs.IntVar(&cfg.MaxConnectionsPerAddress, "max-connections-per-address", cfg.MaxConnectionsPerAddress, "most open connections from one network address per port (gRPC, HTTP, Raft), so that one host cannot take every slot (0: no bound)")
	durationVar(fs, &cfg.HandshakeTimeout, "handshake-timeout", cfg.HandshakeTimeout, "bound of a connection's TLS and HTTP/2 handshake (and of reading an HTTP request)")
	durationVar(fs, &cfg.ShutdownTimeout, "shutdown-timeout", cfg.ShutdownTimeout, "bound of the wait for Raft to stop on SIGTERM; past it the node exits naming what it waited for")
	durationVar(fs, &cfg.IdleTimeout, "idle-timeout", cfg.IdleTimeout, "a client connection with no call in flight for this long is closed (a multiplexed stream with no call is ended after it, its connection one more period later)")

	fs.StringVar(&cfg.LogLevel, "log-level", cfg.LogLevel, "trace, debug, info, warn or error")
	fs.BoolVar(&cfg.LogJSON, "log-json", cfg.LogJSON, "log JSON lines instead of text")
	fs.StringVar(&cfg.LogLevelFile, "log-level-file", cfg.LogLevelFile, "a file holding a log level, applied on SIGHUP (change the level without a restart)")

	fs.StringVar(&cfg.MemoryLimit, "memory-limit", cfg.MemoryLimit, `Go's soft memory limit for this node: auto (90% of the cgroup's memory limit or the machine's memory, whichever is smaller; GOMEMLIMIT, when set, wins), off, a size (900MiB, 2GiB) or a percentage of that memory (75%)`)

	fs.StringVar(&cfg.MaxStateBytes, "max-state-bytes", cfg.MaxStateBytes, `quota of the replicated state's accounted size (strings and metadata of every record plus 160 bytes a record); past it, writes that grow the state answer ResourceExhausted (STATE_QUOTA) while releases, revokes, deletes and expiry still work: auto (half of the memory limit in force, 2GiB without one), a size (512MiB, 2GiB), or 0 or off (no bound)`)

	fs.StringVar(&cfg.GCHeadroom, "gc-headroom", cfg.GCHeadroom, `how far the heap may grow past its live part between collections (Go's default lets it double; below the headroom it grows by at most four times its live part, or as GOGC allows when set): auto (256MiB; GOGC, when set, wins), a size (512MiB, 1GiB) or off (Go's own GOGC)`)

	fs.Uint64Var(&cfg.ReadyMaxLag, "ready-max-lag", cfg.ReadyMaxLag, "/readyz fails while the applied index trails the commit index by more entries")
}

// checkServerConfig rejects values no server accepts, so that they fail as
// usage errors before anything starts. (Zero means "the default" in
// server.Config, so only negative numbers are rejected here.)
func checkServerConfig(cmd *cobra.Command, cfg server.Config) error {
	for _, f := range []struct {
		name string
		v    int64
	}{
		{"max-namespaces", cfg.Limits.MaxNamespaces},
		{"max-semaphores-per-namespace", cfg.Limits.MaxSemaphoresPerNamespace},
		{"max-leases-per-namespace", cfg.Limits.MaxLeasesPerNamespace},
		{"max-holders-per-semaphore", cfg.Limits.MaxHoldersPerSemaphore},
		{"max-permits", cfg.Limits.MaxPermits},
		{"max-ttl-seconds", cfg.Limits.MaxTTLSeconds},
		{"max-locks-per-namespace", cfg.Limits.MaxLocksPerNamespace},
		{"max-lock-leases-per-namespace", cfg.Limits.MaxLockLeasesPerNamespace},
		{"max-holders-per-lock", cfg.Limits.MaxHoldersPerLock},
		{"max-wait-groups-per-namespace", cfg.Limits.MaxWaitGroupsPerNamespace},
		{"max-barriers-per-namespace", cfg.Limits.MaxBarriersPerNamespace},
		{"max-wait-group-counter", cfg.Limits.MaxWaitGroupCounter},
		{"max-barrier-processes", cfg.Limits.MaxBarrierProcesses},
		{"max-jobs-per-call", cfg.Limits.MaxJobsPerCall},
		{"max-timeout-seconds", cfg.MaxTimeoutSeconds},
		{"heartbeat-timeout", int64(cfg.HeartbeatTimeout)},
		{"promote-after", int64(cfg.PromoteAfter)},
		{"election-timeout", int64(cfg.ElectionTimeout)},
		{"leader-lease-timeout", int64(cfg.LeaderLeaseTimeout)},
		{"commit-timeout", int64(cfg.CommitTimeout)},
		{"pack-hold-idle", int64(cfg.PackHoldIdle)},
		{"snapshot-interval", int64(cfg.SnapshotInterval)},
		{"max-connections", int64(cfg.MaxConnections)},
		{"handshake-timeout", int64(cfg.HandshakeTimeout)},
		{"idle-timeout", int64(cfg.IdleTimeout)},
		{"shutdown-timeout", int64(cfg.ShutdownTimeout)},
	} {
		if f.v < 0 {
			return flagError(cmd, f.name, "must not be negative")
		}
	}
	if err := server.CheckMemoryLimit(cfg.MemoryLimit); err != nil {
		return usagef("%v", err)
	}
	if err := server.CheckMaxStateBytes(cfg.MaxStateBytes); err != nil {
		return usagef("%v", err)
	}
	if err := server.CheckGCHeadroom(cfg.GCHeadroom); err != nil {
		return usagef("%v", err)
	}
	if err := server.CheckHTTPClientCert(cfg); err != nil {
		return usagef("%v", err)
	}
	if err := server.CheckExposure(cfg); err != nil {
		return usagef("%v", err)
	}
	switch strings.ToLower(cfg.LogLevel) {
	case "", "trace", "debug", "info", "warn", "error":
	default:
		return flagError(cmd, "log-level", "must be trace, debug, info, warn or error")
	}
	return nil
}
