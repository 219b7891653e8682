// Package server assembles one Grackle node: the Raft node, the state
// machine, the gRPC API (with reflection and health) and the leader-only
// work (waiter queues, lease expiry).
package server

import (
	"time"

	"github.com/grackle-coord/grackle/fsm"
	"github.com/grackle-coord/grackle/leader"
)

// Config is everything a node needs. Zero values take the defaults of
// DefaultConfig.
type Config struct {
	NodeID  string // unique, stable node id (default "node1")
	DataDir string // raft log, stable store, snapshots (default "./grackle-data")

	GRPCAddr string // listen address of the gRPC API (default "127.0.0.1:7420")
	RaftAddr string // listen address of the Raft transport (default "127.0.0.1:7421")
	HTTPAddr string // listen address of /healthz, /readyz, /status, /metrics and /ui/ ("" = off; default "127.0.0.1:7422")

	// Advertised addresses, when they differ from the listen ones (containers).
	AdvertiseGRPC string
	AdvertiseRaft string

	// InitialMembers bootstraps a multi-node cluster: every node is started
	// with the same list "id=raftAddr=grpcAddr,...". Empty: a single node
	// that bootstraps itself when its data dir is empty.
	InitialMembers string
	// Join is the gRPC address of a running member: the node asks the
	// cluster to add it instead of bootstrapping.
	Join string

	Limits            fsm.Limits
	MaxTimeoutSeconds int64 // largest AcquireSemaphore timeout_seconds (default 300)

	// WatchSemaphore streams (docs/watch.md): a stream that takes no
	// message for WatchStallTimeout is cut off (default 10 s); a node
	// serves at most MaxWatchers streams (default 10,000), at most
	// MaxWatchersPerConnection of one connection and MaxWatchersPerClient
	// of one client (its token, or its address; default 1,000 each).
	WatchStallTimeout        time.Duration
	MaxWatchers              int
	MaxWatchersPerConnection int
	MaxWatchersPerClient     int
	// MaxQueuedProposals bounds the writes waiting on the leader to be
	// proposed (default 10,000): beyond, a write answers ResourceExhausted
	// (reason OVERLOADED) at once instead of growing the queue.
	MaxQueuedProposals int
	// MaxWaiters bounds the queued waiters of one semaphore and of one
	// lock (default 10,000): beyond, an acquire answers ResourceExhausted
	// (reason QUEUE_FULL; a non-blocking one outcome UNAVAILABLE), as it
	// does past MaxWaitersPerProcess of one process (default 1,000;
	// negative: no bound).
	MaxWaiters           int
	MaxWaitersPerProcess int
	// PackHold (default 4 ms; negative: off) and PackHoldIdle (default
	// 1 ms): when an entry commits, the writes queued meanwhile wait for
	// its callers' next writes to share the next entry, at most PackHold,
	// and no longer than PackHoldIdle after the last write arrived
	// (leader/DESIGN.md, "The hold").
	PackHold, PackHoldIdle time.Duration
	// MemberProbeTimeout bounds each of the node's health probes of the
	// other members, one a second each (package memberhealth; default
	// 750 ms): a member slower than that is reported unreachable.
	MemberProbeTimeout time.Duration
	// PromoteAfter: a member added to vote joins as a nonvoter and the
	// leader promotes it once it has been caught up this long (default
	// 2 s; --promote-after; docs/OPERATIONS.md, Membership).
	PromoteAfter time.Duration
	// MaxNonvoters bounds the members that are not (yet) voters: every new
	// member joins as one (default 3; --max-nonvoters; negative: no bound).
	MaxNonvoters int

	// HeartbeatTimeout (default 250 ms): a follower starts an election
	// after 1-3 heartbeat timeouts without contact, and with pre-vote a new
	// leader needs both followers to have given up on the old one, so a
	// SIGKILLed leader is replaced in about 2-3 heartbeat timeouts (make
	// failover-bench, 20 trials at load 23-29: 250 ms gave p50 0.59 s and
	// a 0.83 s worst case, 300 ms 0.72 s and 1.18 s; 500 ms, 10 trials:
	// 1.19 s and 1.55 s). A lone follower that misses heartbeats under
	// load cannot win a pre-vote while the other still hears the leader,
	// so it is not what makes false elections; LeaderLeaseTimeout is (a
	// leader that hears no quorum for that long steps down; 250 ms, and
	// never above this).
	HeartbeatTimeout   time.Duration
	ElectionTimeout    time.Duration
	LeaderLeaseTimeout time.Duration
	CommitTimeout      time.Duration
	SnapshotThreshold  uint64
	SnapshotInterval   time.Duration
	TrailingLogs       uint64
	// RaftLogStore is the format of a new data dir's Raft log: "wal" (the
	// default: raft-wal, one fsync per append) or "bolt" (one bbolt file,
	// raft.db, as every data dir made before raft-wal). A data dir that
	// already holds a log keeps its format (raftnode/logstore.go).
	RaftLogStore string
	// RaftWALSegmentSize is the size in bytes of each WAL segment file (0:
	// 64 MiB). A WAL node keeps one segment plus 1 MiB free on the data
	// dir's filesystem: below that it refuses appends as a full disk.
	RaftWALSegmentSize int

	// TLS of the client API, gRPC and HTTP ports (both files, or neither:
	// plaintext). With TLSClientCAFile clients must present a certificate
	// signed by that CA (mutual TLS; the HTTP port's /healthz stays open).
	TLSCertFile     string
	TLSKeyFile      string
	TLSClientCAFile string
	// HTTPClientCert is what the HTTP port asks of clients when the API has
	// TLS (--http-client-cert): HTTPClientCertRequire (the default) as the
	// gRPC port, a certificate of TLSClientCAFile when that is set, for all
	// but /healthz and /readyz; HTTPClientCertNone asks for none (HTTPS with
	// the server certificate only, reachable from a browser without an
	// imported client certificate), and an access token guards /status,
	// /metrics, the web view's data and /debug/pprof/ instead
	// (CheckHTTPClientCert, Exposures).
	HTTPClientCert string
	// Peer TLS: Raft traffic and follower-to-leader forwarding, both sides
	// verified against PeerTLSCAFile. All three, or none.
	PeerTLSCertFile string
	PeerTLSKeyFile  string
	PeerTLSCAFile   string

	// ACL turns access control on: every call needs a token (docs/SECURITY.md).
	ACL bool
	// JoinToken is the token (admin on "*") a node started with Join
	// presents to be added, when the cluster has access control on.
	JoinToken string
	// Insecure accepts listeners beyond loopback without the TLS (and, for
	// the gRPC API, the access control) that would protect them, and joins
	// beyond loopback without access control (--insecure; CheckExposure).
	// Without it such a node refuses to start.
	Insecure bool

	// Connection bounds, each per port (gRPC, HTTP, Raft).
	MaxConnections int // most open connections (default 4096)
	// MaxConnectionsPerAddress: most open connections from one network
	// address on each port (default 2048, half of MaxConnections).
	MaxConnectionsPerAddress int
	HandshakeTimeout         time.Duration // TLS + HTTP/2 handshake, first request line (default 10 s)
	IdleTimeout              time.Duration // a connection with no call in flight is closed after this (default 5 min)

	// ShutdownTimeout bounds the wait for Raft to stop on Close (default
	// 10 s); past it Close returns an error naming what it waited for.
	ShutdownTimeout time.Duration

	// ReadyMaxLag: /readyz fails while applied trails the commit index by
	// more entries than this (default DefaultReadyMaxLag).
	ReadyMaxLag uint64
	// MemoryLimit is the Go runtime's soft memory limit for this process
	// (--memory-limit): "auto" (DefaultMemoryLimit: 90 % of the cgroup's
	// memory limit or of the machine's memory, whichever is smaller,
	// unless GOMEMLIMIT is set), "off", a size (900MiB, 2GiB) or a
	// percentage of that memory (75%). Only Run sets it (it is
	// process-wide); Start leaves the runtime alone.
	MemoryLimit string
	// MaxStateBytes is --max-state-bytes, the quota of the replicated
	// state's accounted size (fsm's Limits.MaxStateBytes): "auto"
	// (DefaultMaxStateBytes, or "": half of the Go memory limit in force
	// when Start runs, 2 GiB without one), "off" or 0 (no bound), or a
	// size (512MiB, 2GiB). Like every limit, the leader's value is the
	// cluster's. Start writes the resolved quota into
	// Limits.MaxStateBytes (a value set there is replaced).
	MaxStateBytes string
	// GCHeadroom is how far the heap may grow past its live part between
	// collections (--gc-headroom, package gctune: GOGC lowered above it,
	// raised below it up to 400, or up to the environment's GOGC when that
	// is set with an explicit size): "auto" (default
	// DefaultGCHeadroom: 256 MiB, unless GOGC is set in the environment),
	// a size, or "off" for Go's own GOGC. Only Run applies it.
	GCHeadroom string
	// Pprof serves Go's profiles (net/http/pprof) under /debug/pprof/ on
	// the HTTP port (off by default: profiles reveal internals and cost CPU
	// while taken). make profile-bench uses it.
	Pprof bool

	LogLevel string // trace, debug, info, warn, error (default info)
	// LogLevelFile, when set, holds a log level that Reload (SIGHUP)
	// applies: the level changes at run time without a restart.
	LogLevelFile string
	LogJSON      bool

	// Clock is the leader clock's source (nil: the system clocks); tests
	// inject wall-clock jumps through it.
	Clock leader.Source
}

// DefaultConfig returns the defaults: a single node on loopback.
func DefaultConfig() Config {
	return Config{
		NodeID:                   "node1",
		DataDir:                  "./grackle-data",
		GRPCAddr:                 "127.0.0.1:7420",
		RaftAddr:                 "127.0.0.1:7421",
		HTTPAddr:                 "127.0.0.1:7422",
		Limits:                   fsm.DefaultLimits(),
		MaxTimeoutSeconds:        300,
		HeartbeatTimeout:         250 * time.Millisecond,
		ElectionTimeout:          500 * time.Millisecond,
		LeaderLeaseTimeout:       250 * time.Millisecond,
		CommitTimeout:            5 * time.Millisecond,
		PackHold:                 leader.DefaultPackHold,
		PackHoldIdle:             leader.DefaultPackHoldIdle,
		SnapshotThreshold:        16384,
		SnapshotInterval:         30 * time.Second,
		TrailingLogs:             10240,
		MaxConnections:           4096,
		MaxConnectionsPerAddress: 2048,
		HandshakeTimeout:         10 * time.Second,
		IdleTimeout:              5 * time.Minute,
		ShutdownTimeout:          10 * time.Second,
		ReadyMaxLag:              DefaultReadyMaxLag,
		LogLevel:                 "info",
		MemoryLimit:              DefaultMemoryLimit,
		MaxStateBytes:            DefaultMaxStateBytes,
		GCHeadroom:               DefaultGCHeadroom,
		HTTPClientCert:           HTTPClientCertRequire,
	}
}
