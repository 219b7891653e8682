// Package raftnode wires hashicorp/raft for Grackle: a log and stable store
// (raft-wal, or bbolt for older data dirs; logstore.go), a file snapshot store and a TCP (or peer TLS) transport in the data dir,
// bootstrap of a new cluster, and leadership notifications. It knows
// nothing about the API it replicates.
package raftnode

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/grackle-coord/grackle/tlsutil"
)

// Peer is one initial member: its node id and Raft address.
type Peer struct {
	ID   string
	Addr string
}

// Config configures a Raft node.
type Config struct {
	NodeID        string
	DataDir       string
	BindAddr      string // Raft transport listen address ("host:0" picks a port)
	AdvertiseAddr string // address peers dial ("" = the bound address)

	// InitialMembers bootstraps a new cluster with these voters when the
	// data dir holds no Raft state. Empty with Bootstrap set: this node
	// alone. Ignored when state exists (a restart).
	InitialMembers []Peer
	// Bootstrap allows bootstrapping at all; a node started to join a
	// running cluster must not bootstrap.
	Bootstrap bool

	HeartbeatTimeout   time.Duration
	ElectionTimeout    time.Duration
	LeaderLeaseTimeout time.Duration
	CommitTimeout      time.Duration
	SnapshotThreshold  uint64
	SnapshotInterval   time.Duration
	TrailingLogs       uint64
	SnapshotsRetained  int

	// LogStore is the format of a new data dir's Raft log: LogStoreWAL
	// (the default when empty) or LogStoreBolt. A data dir that already
	// holds a log keeps its format.
	LogStore string
	// WALSegmentSize is the size of each WAL segment file (0:
	// DefaultWALSegmentSize). The node keeps one segment plus 1 MiB free
	// on the data dir's filesystem and refuses appends, as a full disk,
	// below that (logstore.go).
	WALSegmentSize int

	// PeerTLS, when set, authenticates every Raft connection both ways
	// with the peer certificate and CA. Without it Raft traffic is
	// plaintext and unauthenticated: a warning is logged when the port
	// listens beyond loopback.
	PeerTLS *tlsutil.Peer
	// MaxConns bounds the Raft port's open connections (0: no bound), and
	// MaxConnsPerAddress those of one address (0: no bound); a peer TLS
	// handshake, or without TLS a connection's first byte, must come
	// within HandshakeTimeout (default 10 s); a connection silent for
	// IdleTimeout is closed (0: never).
	MaxConns, MaxConnsPerAddress  int
	HandshakeTimeout, IdleTimeout time.Duration

	FSM    raft.FSM
	Logger hclog.Logger

	// MarkInterval is how often the node brings its log mark (MarkFile)
	// up to date while it runs (0: DefaultMarkInterval); it is also brought
	// up to date after every snapshot and at a clean stop.
	MarkInterval time.Duration

	// Opened, when set, is called with the last index of the log on disk
	// once the stores are open, before Raft starts: entries up to it are
	// this node's own from before the restart, and replaying them is not
	// news (the metrics count only what comes after).
	Opened func(lastIndex uint64)
}

// Node is a running Raft member.
type Node struct {
	Raft      *raft.Raft
	Transport *raft.NetworkTransport
	// LeaderNotify receives true/false on every leadership change of this
	// node. It is buffered, and the reader must keep draining it (raft
	// blocks on it otherwise).
	LeaderNotify <-chan bool

	ID   string
	Addr raft.ServerAddress
	// Snapshots is the node's snapshot store (backups read the latest).
	Snapshots raft.SnapshotStore
	// Contacts is what this node heard from each peer while it led (the
	// leader's view of reachability and of each peer's log).
	Contacts *Contacts

	// ShutdownTimeout bounds Close (default DefaultShutdownTimeout).
	ShutdownTimeout time.Duration

	// LogFormat is the format of this node's Raft log (LogStoreWAL or
	// LogStoreBolt).
	LogFormat string

	store    logStore
	disk     *diskWatch
	mark     *markWriter        // nil until raft runs
	shutdown func() raft.Future // default Raft.Shutdown (tests replace it)
}

// ErrBadPeer reports a malformed initial-members entry.
var ErrBadPeer = errors.New("raftnode: bad peer")

// New opens (or creates) the node's stores and starts Raft.
func New(cfg Config) (*Node, error) {
	if cfg.NodeID == "" {
		return nil, errors.New("raftnode: node id is empty")
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("raftnode: data dir: %w", err)
	}
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(cfg.NodeID)
	rc.Logger = cfg.Logger.Named("raft")
	rc.BatchApplyCh = true
	// Raft's per-peer metric names duplicate its peer_id-labelled ones.
	rc.NoLegacyTelemetry = true
	rc.MaxAppendEntries = 256
	setDur(&rc.HeartbeatTimeout, cfg.HeartbeatTimeout)
	setDur(&rc.ElectionTimeout, cfg.ElectionTimeout)
	setDur(&rc.LeaderLeaseTimeout, cfg.LeaderLeaseTimeout)
	setDur(&rc.CommitTimeout, cfg.CommitTimeout)
	setDur(&rc.SnapshotInterval, cfg.SnapshotInterval)
	if cfg.SnapshotThreshold > 0 {
		rc.SnapshotThreshold = cfg.SnapshotThreshold
	}
	if cfg.TrailingLogs > 0 {
		rc.TrailingLogs = cfg.TrailingLogs
	}
	if rc.LeaderLeaseTimeout > rc.HeartbeatTimeout {
		rc.LeaderLeaseTimeout = rc.HeartbeatTimeout
	}
	notify := make(chan bool, 16)
	rc.NotifyCh = notify

	format, err := chooseFormat(cfg.DataDir, cfg.LogStore)
	if err != nil {
		return nil, fmt.Errorf("raftnode: %w", err)
	}
	// raft-wal's metadata file is bbolt opened with no lock timeout: a
	// second node on the same dir would hang. The lock (with a bound) comes
	// first when the WAL exists, so that only this node's check may clear a
	// torn batch at its end; a new WAL is locked when it is made.
	unlock, err := lockLogStore(cfg.DataDir, format, false)
	if err != nil {
		return nil, fmt.Errorf("raftnode: %w", err)
	}
	mark, err := readMark(cfg.DataDir)
	if err != nil {
		if unlock != nil {
			unlock()
		}
		return nil, fmt.Errorf("raftnode: %w", err)
	}
	if mark != nil && mark.NodeID == "" {
		mark.NodeID = cfg.NodeID // a restored data dir's mark names no node yet
	}
	if err := checkDataDir(cfg.DataDir, mark); err != nil {
		if unlock != nil {
			unlock()
		}
		return nil, fmt.Errorf("raftnode: %w", err)
	}
	if unlock == nil {
		if unlock, err = lockLogStore(cfg.DataDir, format, true); err != nil {
			return nil, fmt.Errorf("raftnode: %w", err)
		}
	}
	store, err := openLockedLogStore(cfg.DataDir, format, cfg.WALSegmentSize, cfg.Logger, unlock)
	if err != nil {
		unlock()
		return nil, fmt.Errorf("raftnode: %w", err)
	}
	retain := cfg.SnapshotsRetained
	if retain <= 0 {
		retain = 2
	}
	snaps, err := raft.NewFileSnapshotStoreWithLogger(cfg.DataDir, retain, cfg.Logger.Named("snapshots"))
	if err != nil {
		store.Close()
		return nil, fmt.Errorf("raftnode: snapshot store: %w", err)
	}
	var adv net.Addr
	if cfg.AdvertiseAddr != "" {
		if adv, err = net.ResolveTCPAddr("tcp", cfg.AdvertiseAddr); err != nil {
			store.Close()
			return nil, fmt.Errorf("raftnode: advertise address %q: %w", cfg.AdvertiseAddr, err)
		}
	}
	stream, err := newStreamLayer(cfg.BindAddr, adv, cfg.PeerTLS, cfg, cfg.Logger.Named("transport"))
	if err != nil {
		store.Close()
		return nil, fmt.Errorf("raftnode: listen on %s: %w", cfg.BindAddr, err)
	}
	if cfg.PeerTLS == nil && beyondLoopback(stream.lis.Addr()) {
		cfg.Logger.Warn("the Raft port listens beyond loopback without peer TLS: anyone who can reach it can append to the Raft log; set --peer-tls-cert-file, --peer-tls-key-file and --peer-tls-ca-file",
			"raft_addr", stream.lis.Addr().String())
	}
	trans := raft.NewNetworkTransportWithLogger(stream, 5, 10*time.Second, cfg.Logger.Named("transport"))
	disk := &diskWatch{dir: cfg.DataDir, log: cfg.Logger}
	n := &Node{Transport: trans, LeaderNotify: notify, ID: cfg.NodeID, Addr: trans.LocalAddr(), LogFormat: format, store: store, disk: disk}
	recorded, contacts := RecordContacts(trans)
	n.Contacts = contacts
	ws := watchedStore{logStore: store, d: disk}
	// The leader reads every entry back to replicate it (and a follower the
	// previous entry to check it): from the store that is a read and a
	// decoding per entry per follower. The cache answers
	// them from memory for the last logCacheSize entries (Consul does the
	// same); writes still go to the store, and are cached only once stored.
	logs, err := raft.NewLogCache(logCacheSize, ws)
	if err != nil {
		store.Close()
		return nil, fmt.Errorf("raftnode: log cache: %w", err)
	}
	snapshotTaken := make(chan struct{}, 1)
	var snapStore raft.SnapshotStore = watchedSnapshots{SnapshotStore: snaps, d: disk, taken: snapshotTaken}
	n.Snapshots = snapStore

	// What the log and snapshots hold must reach what the node knew it
	// had, before anything (a bootstrap) writes to them.
	if err := checkAgainstMark(mark, cfg.DataDir, format, store, snaps); err != nil {
		n.closeStores()
		return nil, fmt.Errorf("raftnode: %w", err)
	}

	has, err := raft.HasExistingState(store, store, snaps)
	if err != nil {
		n.closeStores()
		return nil, fmt.Errorf("raftnode: read state: %w", err)
	}
	if !has && cfg.Bootstrap {
		members := cfg.InitialMembers
		if len(members) == 0 {
			members = []Peer{{ID: cfg.NodeID, Addr: string(n.Addr)}}
		}
		var conf raft.Configuration
		for _, p := range members {
			conf.Servers = append(conf.Servers, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(p.ID), Address: raft.ServerAddress(p.Addr)})
		}
		if err := raft.BootstrapCluster(rc, store, store, snaps, trans, conf); err != nil {
			n.closeStores()
			return nil, fmt.Errorf("raftnode: bootstrap: %w", err)
		}
		cfg.Logger.Info("bootstrapped a new cluster", "members", len(members))
	}
	if cfg.Opened != nil {
		last, err := store.LastIndex()
		if err != nil {
			n.closeStores()
			return nil, fmt.Errorf("raftnode: read the log's last index: %w", err)
		}
		cfg.Opened(last)
	}
	r, err := raft.NewRaft(rc, cfg.FSM, logs, ws, snapStore, recorded)
	if err != nil {
		n.closeStores()
		return nil, fmt.Errorf("raftnode: start raft: %w", err)
	}
	n.Raft = r
	interval := cfg.MarkInterval
	if interval <= 0 {
		interval = DefaultMarkInterval
	}
	n.mark = &markWriter{dir: cfg.DataDir, nodeID: cfg.NodeID, format: format, interval: interval, store: store, snaps: snaps,
		commit: r.CommitIndex, log: cfg.Logger, kick: snapshotTaken, stop: make(chan struct{}), done: make(chan struct{})}
	if mark != nil {
		n.mark.last = *mark
	}
	go n.mark.run()
	return n, nil
}

// logCacheSize is how many recent log entries raft reads from memory (a
// few hundred packed entries: what replication to a follower that fell a
// little behind still reads back).
const logCacheSize = 512

func setDur(dst *time.Duration, v time.Duration) {
	if v > 0 {
		*dst = v
	}
}

// closeStores closes the transport and the stores, once raft stopped
// (or never started), writing the log mark a last time first.
func (n *Node) closeStores() {
	n.Transport.Close()
	if n.mark != nil {
		n.mark.close()
	}
	n.store.Close()
}

// DefaultShutdownTimeout bounds Close's wait for Raft to stop.
const DefaultShutdownTimeout = 10 * time.Second

// Close shuts Raft down and closes the stores. It waits at most
// ShutdownTimeout (default DefaultShutdownTimeout): if Raft has not stopped
// by then (it waits for its replication goroutines, which wait on their
// peers), Close returns an error naming what it still waited for and
// leaves the stores open until Raft does stop.
func (n *Node) Close() error {
	timeout := n.ShutdownTimeout
	if timeout <= 0 {
		timeout = DefaultShutdownTimeout
	}
	peers := n.peersForShutdown()
	shutdown := n.shutdown
	if shutdown == nil {
		shutdown = n.Raft.Shutdown
	}
	done := make(chan error, 1)
	go func() { done <- shutdown().Error() }()
	select {
	case err := <-done:
		n.closeStores()
		return err
	case <-time.After(timeout):
		// Close the stores if Raft stops after all (a restart in the same
		// process can then open them).
		go func() {
			<-done
			n.closeStores()
		}()
		what := "its main loop and FSM apply"
		if len(peers) > 0 {
			what = "replication to " + strings.Join(peers, ", ") + ", and " + what
		}
		return fmt.Errorf("raftnode: raft did not stop within %v; still waiting for %s (stores closed once it does)", timeout, what)
	}
}

// peersForShutdown names the other servers of the configuration (Raft
// runs one replication goroutine per peer while it leads), asked before
// Shutdown stops the main loop that answers.
func (n *Node) peersForShutdown() []string {
	ch := make(chan []string, 1)
	go func() {
		f := n.Raft.GetConfiguration()
		var out []string
		if f.Error() == nil {
			for _, s := range f.Configuration().Servers {
				if string(s.ID) != n.ID {
					out = append(out, fmt.Sprintf("%s (%s)", s.ID, s.Address))
				}
			}
		}
		ch <- out
	}()
	select {
	case p := <-ch:
		return p
	case <-time.After(time.Second):
		return nil
	}
}

// ParsePeers parses "id=raftAddr[=grpcAddr],..." into peers and, in the
// same order, the gRPC addresses ("" where absent).
func ParsePeers(s string) ([]Peer, []string, error) {
	var peers []Peer
	var grpcAddrs []string
	seen := map[string]bool{}
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		parts := strings.Split(item, "=")
		if len(parts) < 2 || len(parts) > 3 || parts[0] == "" || parts[1] == "" {
			return nil, nil, fmt.Errorf("%w: %q: want id=raftAddr=grpcAddr", ErrBadPeer, item)
		}
		if seen[parts[0]] {
			return nil, nil, fmt.Errorf("%w: node id %q listed twice", ErrBadPeer, parts[0])
		}
		seen[parts[0]] = true
		peers = append(peers, Peer{ID: parts[0], Addr: parts[1]})
		g := ""
		if len(parts) == 3 {
			g = parts[2]
		}
		grpcAddrs = append(grpcAddrs, g)
	}
	return peers, grpcAddrs, nil
}
