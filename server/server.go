package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"

	"github.com/grackle-coord/grackle/acl"
	"github.com/grackle-coord/grackle/admin"
	"github.com/grackle-coord/grackle/apierr"
	"github.com/grackle-coord/grackle/client"
	"github.com/grackle-coord/grackle/fsm"
	"github.com/grackle-coord/grackle/internal/connlimit"
	"github.com/grackle-coord/grackle/internal/logrepeat"
	"github.com/grackle-coord/grackle/internal/mux"
	"github.com/grackle-coord/grackle/internal/peerconn"
	"github.com/grackle-coord/grackle/internal/reqcodec"
	"github.com/grackle-coord/grackle/memberhealth"
	"github.com/grackle-coord/grackle/metrics"
	fsmpb "github.com/grackle-coord/grackle/proto/grackle/fsm/v1"
	peerpb "github.com/grackle-coord/grackle/proto/grackle/peer/v1"
	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
	"github.com/grackle-coord/grackle/raftnode"
	"github.com/grackle-coord/grackle/rpc"
	"github.com/grackle-coord/grackle/tlsutil"
	"github.com/grackle-coord/grackle/watch"
	"github.com/grackle-coord/grackle/webui"
)

// Server is one running node.
type Server struct {
	cfg   Config
	log   hclog.Logger
	FSM   *fsm.FSM
	Node  *raftnode.Node
	API   *rpc.Service
	admin *admin.Service
	// members is the node's view of its members' health.
	members *memberhealth.Monitor
	mux     *mux.Server
	// Watch serves WatchSemaphore and ListSemaphoreWaiters.
	Watch *watch.Service
	feed  *watch.Feed
	lead  *watch.Leadership
	// uiClient is the web view's client of this node, once made.
	uiClient atomic.Pointer[client.Client]
	// Metrics is the node's Prometheus registry and instruments.
	Metrics *metrics.Metrics
	grpc    *grpc.Server
	health  *health.Server
	lis     net.Listener
	http    *http.Server
	httpLn  net.Listener

	reloadMu    sync.Mutex
	reloadHooks []reloadHook
	done        chan struct{}

	sec   security
	acl   *acl.Checker    // the access checks (in use when cfg.ACL)
	peers *peerconn.Cache // connections to the other members
	split *tlsutil.Split  // the gRPC port's TLS/plaintext sorter (TLS only)
	plain *grpc.Server    // answers plaintext clients of a TLS port
}

// fill applies DefaultConfig's value to every zero field.
func (c Config) fill() Config {
	d := DefaultConfig()
	orDefault(&c.NodeID, d.NodeID)
	orDefault(&c.DataDir, d.DataDir)
	orDefault(&c.GRPCAddr, d.GRPCAddr)
	orDefault(&c.RaftAddr, d.RaftAddr)
	orDefault(&c.Limits, d.Limits)
	orDefault(&c.MaxTimeoutSeconds, d.MaxTimeoutSeconds)
	orDefault(&c.HeartbeatTimeout, d.HeartbeatTimeout)
	orDefault(&c.ElectionTimeout, d.ElectionTimeout)
	orDefault(&c.LeaderLeaseTimeout, d.LeaderLeaseTimeout)
	orDefault(&c.CommitTimeout, d.CommitTimeout)
	orDefault(&c.PackHold, d.PackHold)
	orDefault(&c.PackHoldIdle, d.PackHoldIdle)
	orDefault(&c.SnapshotThreshold, d.SnapshotThreshold)
	orDefault(&c.SnapshotInterval, d.SnapshotInterval)
	orDefault(&c.TrailingLogs, d.TrailingLogs)
	orDefault(&c.MaxConnections, d.MaxConnections)
	orDefault(&c.HandshakeTimeout, d.HandshakeTimeout)
	orDefault(&c.IdleTimeout, d.IdleTimeout)
	orDefault(&c.ShutdownTimeout, d.ShutdownTimeout)
	orDefault(&c.LogLevel, d.LogLevel)
	orDefault(&c.HTTPClientCert, d.HTTPClientCert)
	return c
}

func orDefault[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
}

// NewLogger returns the node's root logger. A warning or error that
// repeats (a member down: a failed heartbeat several times a second) is
// written three times a minute, then counted (internal/logrepeat).
func NewLogger(cfg Config) hclog.Logger {
	return logrepeat.New(hclog.New(&hclog.LoggerOptions{Name: "grackle", Level: hclog.LevelFromString(cfg.LogLevel), JSONFormat: cfg.LogJSON, Output: os.Stderr}))
}

// Start opens the data dir, starts Raft and serves the API. It returns
// once every listener is bound; Close stops it.
func Start(cfg Config, log hclog.Logger) (*Server, error) {
	cfg = cfg.fill()
	if log == nil {
		log = NewLogger(cfg)
	}
	quota, err := resolveMaxStateBytes(cfg.MaxStateBytes, currentMemoryLimit())
	if err != nil {
		return nil, err
	}
	cfg.Limits.MaxStateBytes = quota
	if err := cfg.Limits.Validate(); err != nil {
		return nil, err
	}
	if err := CheckHTTPClientCert(cfg); err != nil {
		return nil, err
	}
	if err := CheckExposure(cfg); err != nil {
		return nil, err
	}
	for _, x := range Exposures(cfg) {
		log.Warn("--insecure accepts --" + x.Flag + " " + x.Addr + ", which " + x.Lacks)
	}
	for _, a := range [][3]string{{"grpc", cfg.GRPCAddr, cfg.AdvertiseGRPC}, {"raft", cfg.RaftAddr, cfg.AdvertiseRaft}} {
		warning, err := checkAdvertise(a[0], a[1], a[2])
		if err != nil {
			return nil, err
		}
		if warning != "" {
			log.Warn(warning)
		}
	}
	if cfg.InitialMembers != "" && cfg.Join != "" {
		return nil, errors.New("--initial-members and --join exclude each other")
	}
	peers, grpcAddrs, err := raftnode.ParsePeers(cfg.InitialMembers)
	if err != nil {
		return nil, err
	}
	for i, p := range peers {
		if p.ID == cfg.NodeID {
			if err := checkOwnEntry(cfg, cfg.NodeID, p.Addr, grpcAddrs[i]); err != nil {
				return nil, err
			}
		}
	}
	sec, err := loadSecurity(cfg)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("data dir %s: %w", cfg.DataDir, err)
	}
	rawLis, err := net.Listen("tcp", cfg.GRPCAddr)
	if err != nil {
		return nil, fmt.Errorf("gRPC listen on %s: %w", cfg.GRPCAddr, err)
	}
	// Under pressure an idle client connection gives way to a new one
	// after pressureIdle without a call, not after --idle-timeout.
	idleConns := connlimit.NewIdle(pressureIdle)
	idleConns.Closed = func(remote string, idle time.Duration) {
		log.Debug("closed an idle client connection to make room for a new one", "remote", remote, "idle", idle)
	}
	lis := limit(rawLis, cfg.MaxConnections, cfg.MaxConnectionsPerAddress, idleConns, "gRPC", log)
	grpcAdv := cfg.AdvertiseGRPC
	if grpcAdv == "" {
		grpcAdv = lis.Addr().String()
	}
	initialGRPC := map[string]string{}
	for i, p := range peers {
		if grpcAddrs[i] != "" {
			initialGRPC[p.ID] = grpcAddrs[i]
		}
	}
	if len(peers) > 0 {
		found := false
		for _, p := range peers {
			found = found || p.ID == cfg.NodeID
		}
		if !found {
			lis.Close()
			return nil, fmt.Errorf("--initial-members does not list this node (%s)", cfg.NodeID)
		}
	}

	tmp := filepath.Join(cfg.DataDir, "tmp")
	if err := os.MkdirAll(tmp, 0o700); err != nil {
		lis.Close()
		return nil, err
	}
	met := metrics.New()
	var raftPtr atomic.Pointer[raft.Raft]
	aud := &auditor{log: log.Named("audit"), raft: raftPtr.Load}
	tokenChanges := &acl.Changes{}
	f := fsm.New(fsm.Options{TempDir: tmp, Logger: log.Named("fsm"), Applied: func(index uint64, cmd *fsmpb.Command, res *fsm.Result) {
		met.Applied(index, cmd, res)
		aud.observe(index, cmd, res)
		if _, ok := cmd.GetOp().(*fsmpb.Command_AclRevokeToken); ok {
			tokenChanges.Notify() // streams opened with the token end
		}
	}})
	feed := watch.NewFeed(f)
	node, err := raftnode.New(raftnode.Config{
		NodeID: cfg.NodeID, DataDir: cfg.DataDir, BindAddr: cfg.RaftAddr, AdvertiseAddr: cfg.AdvertiseRaft,
		InitialMembers: peers, Bootstrap: cfg.Join == "",
		HeartbeatTimeout: cfg.HeartbeatTimeout, ElectionTimeout: cfg.ElectionTimeout, LeaderLeaseTimeout: cfg.LeaderLeaseTimeout,
		CommitTimeout: cfg.CommitTimeout, SnapshotThreshold: cfg.SnapshotThreshold, SnapshotInterval: cfg.SnapshotInterval,
		TrailingLogs: cfg.TrailingLogs, LogStore: cfg.RaftLogStore, WALSegmentSize: cfg.RaftWALSegmentSize, FSM: watch.Observe(met.ObserveFSM(f), feed), Logger: log,
		PeerTLS: sec.peer, MaxConns: cfg.MaxConnections, MaxConnsPerAddress: cfg.MaxConnectionsPerAddress,
		HandshakeTimeout: cfg.HandshakeTimeout, IdleTimeout: cfg.IdleTimeout,
		Opened: met.SetStartIndex,
	})
	if err != nil {
		feed.Close()
		lis.Close()
		return nil, err
	}
	raftPtr.Store(node.Raft)
	log.Info("opened the Raft log", "format", node.LogFormat, "data_dir", cfg.DataDir)
	checker := aclChecker{on: cfg.ACL, c: &acl.Checker{Tokens: f, Unsure: behindOnTokens(node.Raft, cfg.NodeID), Changes: tokenChanges}}
	node.ShutdownTimeout = cfg.ShutdownTimeout
	// One connection per other member, shared by forwarding, watch relays
	// and the admin probes; closed by Close once they all stopped.
	peerConns := peerconn.New(grpc.WithTransportCredentials(sec.peerDialCreds()))
	api := rpc.New(rpc.Config{
		ACL: cfg.ACL, Insecure: cfg.Insecure, NodeID: cfg.NodeID, GRPCAddress: grpcAdv, RaftAddress: string(node.Addr), InitialGRPC: initialGRPC,
		Limits: cfg.Limits, MaxTimeoutSeconds: cfg.MaxTimeoutSeconds, MaxQueuedProposals: cfg.MaxQueuedProposals, MaxWaiters: cfg.MaxWaiters, MaxWaitersPerProcess: cfg.MaxWaitersPerProcess,
		PackHold: cfg.PackHold, PackHoldIdle: cfg.PackHoldIdle,
		LeaseGrace: cfg.ElectionTimeout * 2,
		Clock:      cfg.Clock,
		Peers:      peerConns,
		Observer:   observers{met.LeaderObserver(), queueFeed{feed}},
		Authorize:  checker.authorize(),
		// A voter silent for a heartbeat timeout is itself starting an
		// election; twice that leaves room for a loaded machine's late
		// heartbeat (raft heartbeats every tenth of it or so).
		Contacts: node.Contacts, ReachableWithin: 2 * cfg.HeartbeatTimeout, PromoteAfter: cfg.PromoteAfter, MaxNonvoters: cfg.MaxNonvoters,
	}, node.Raft, f, log.Named("rpc"))
	if sec.api != nil && sec.peer == nil && (len(peers) > 1 || cfg.Join != "") {
		log.Warn("client TLS without peer TLS: followers verify the leader's API certificate against the system roots and present none; set --peer-tls-* so they authenticate as peers")
	}

	if err := met.RegisterRaft(node.Raft); err == nil {
		err = met.RegisterState(f, cfg.DataDir)
	}
	if err != nil {
		node.Close()
		lis.Close()
		return nil, fmt.Errorf("metrics: %w", err)
	}

	lead := watch.NewLeadership(node.Raft, f, watch.LeadershipConfig{NodeID: cfg.NodeID, GRPCAddress: grpcAdv, InitialGRPC: initialGRPC})
	ws := watch.New(watch.Config{NodeID: cfg.NodeID, StallTimeout: cfg.WatchStallTimeout, MaxWatchers: cfg.MaxWatchers,
		MaxWatchersPerConnection: cfg.MaxWatchersPerConnection, MaxWatchersPerClient: cfg.MaxWatchersPerClient, Queues: queuesOf(api),
		Peers: peerConns, Authorize: checker.authorize(), Now: api.Leader().Now}, f, feed, lead, log.Named("watch"))
	s := &Server{cfg: cfg, log: log, FSM: f, Node: node, API: api, Watch: ws, feed: feed, lead: lead, Metrics: met, done: make(chan struct{}), sec: sec, acl: checker.c, peers: peerConns}
	// The request codec's interceptors come right after the metrics (which
	// count its refusals) and before anything that reads a request.
	codec := reqcodec.New()
	unary := []grpc.UnaryServerInterceptor{met.UnaryInterceptor(), codec.UnaryInterceptor(), s.diskFullUnary}
	stream := []grpc.StreamServerInterceptor{met.StreamInterceptor(), codec.StreamInterceptor(), s.diskFullStream}
	if cfg.ACL {
		isLeader := func() bool { return node.Raft.State() == raft.Leader }
		unary = append(unary, checker.c.UnaryInterceptor(isLeader))
		stream = append(stream, checker.c.StreamInterceptor(isLeader))
	}
	opts := append(cfg.grpcServerOptions(), codec.ServerOption(), grpc.ChainUnaryInterceptor(unary...), grpc.ChainStreamInterceptor(stream...),
		grpc.StatsHandler(idleConns))
	var split *tlsutil.Split
	serveLis := lis
	if sec.api != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(sec.api.Config([]string{"h2"}, tlsutil.RequireClientCert))))
		split = tlsutil.NewSplit(lis, cfg.HandshakeTimeout)
		serveLis = split.TLS()
	}
	gs := grpc.NewServer(opts...)
	// The node's one view of its members' health (package memberhealth),
	// read by GetClusterStatus, /status and the metrics. Its probes
	// dial connections of their own; when a member answers again, the
	// shared connection to it is replaced unless ready.
	var adm *admin.Service
	probeTimeout := cfg.MemberProbeTimeout
	if probeTimeout <= 0 {
		probeTimeout = memberhealth.DefaultTimeout
	}
	members := memberhealth.New(memberhealth.Config{NodeID: cfg.NodeID, Members: healthMembers(node.Raft, f, initialGRPC),
		Self: func() *peerpb.ProbeResponse { return adm.SelfProbe() }, Dial: peerConns.Dial,
		Leading: func() bool { return node.Raft.State() == raft.Leader }, Contacts: node.Contacts, LastIndex: node.Raft.LastIndex,
		ReachableWithin: 2 * cfg.HeartbeatTimeout, Timeout: probeTimeout,
		Answered: func(m memberhealth.Member) { peerConns.Refresh(m.ID, m.GRPCAddress) }, Log: log.Named("members")})
	adm = admin.New(admin.Config{NodeID: cfg.NodeID, InitialGRPC: initialGRPC, Skew: api.Leader().Skew, Peers: peerConns,
		Health: members, FirstRoundWait: probeTimeout + 250*time.Millisecond}, api, node.Raft, f, node.Snapshots, log.Named("admin"))
	if err := met.RegisterMembers(members.View); err != nil {
		node.Close()
		lis.Close()
		return nil, fmt.Errorf("metrics: %w", err)
	}
	// The API's unary calls may also come over a multiplexed stream
	// (internal/mux): the same handlers behind the same interceptors, in
	// the same order. One list registers each service with both, so that
	// none is served one way and not the other.
	muxer := mux.NewServer(mux.ServerConfig{Interceptor: mux.Chain(unary...), Decode: reqcodec.Check, NodeID: cfg.NodeID,
		IdleTimeout: cfg.IdleTimeout})
	for _, svc := range []struct {
		desc *grpc.ServiceDesc
		impl any
	}{
		{&pb.GrackleService_ServiceDesc, grackleAPI{Service: api, watch: ws}},
		{&pb.ClusterService_ServiceDesc, adm},
		{&pb.ACLService_ServiceDesc, api},
		// Followers ask the leader for read indexes on their peer
		// connections' streams.
		{&peerpb.PeerService_ServiceDesc, peerService{Service: api, adm: adm}},
	} {
		gs.RegisterService(svc.desc, svc.impl)
		muxer.Register(svc.desc, svc.impl)
	}
	pb.RegisterMuxServiceServer(gs, muxer)
	s.mux = muxer
	hs := health.NewServer()
	healthpb.RegisterHealthServer(gs, hs)
	reflection.Register(gs)
	met.InitializeRPCs(gs)

	s.grpc, s.health, s.lis, s.split, s.admin, s.members = gs, hs, lis, split, adm, members
	// A follower that does not find a token first catches up with the
	// leader's read index (bounded), so a token created on the leader just
	// before the call is found; it decides on its own state when the
	// leader cannot be reached.
	checker.c.CatchUp = func(ctx context.Context) bool {
		if node.Raft.State() == raft.Leader {
			return false
		}
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		return api.CatchUp(ctx) == nil
	}
	api.Start(node.LeaderNotify)
	members.Start()
	go func() {
		if err := gs.Serve(serveLis); err != nil && !errors.Is(err, grpc.ErrServerStopped) && !errors.Is(err, net.ErrClosed) {
			log.Error("gRPC server stopped", "error", err)
		}
	}()
	if split != nil {
		s.plain = cfg.plaintextRefuser()
		go func() { _ = s.plain.Serve(split.Plain()) }()
	}
	go s.watchHealth()
	if cfg.HTTPAddr != "" {
		if err := s.startHTTP(); err != nil {
			s.Close()
			return nil, err
		}
	}
	log.Info("grackle node started", "node_id", cfg.NodeID, "grpc", lis.Addr().String(), "raft", string(node.Addr),
		"http", cfg.HTTPAddr, "data_dir", cfg.DataDir, "client_tls", sec.api != nil,
		"client_mtls", sec.api != nil && sec.api.ClientCA != nil, "http_client_cert", cfg.HTTPClientCert, "peer_tls", sec.peer != nil, "acl", cfg.ACL)
	if cfg.Join != "" {
		go s.join(grpcAdv)
	}
	if cfg.LogLevelFile != "" {
		s.OnReload("log level", s.reloadLogLevel)
	}
	return s, nil
}

// GRPCAddr is the bound gRPC address.
// PeerStreamCalls counts the calls this node made to its peers that rode
// their connections' multiplexed streams (read-index requests of follower
// reads): a diagnostic for tests.
func (s *Server) PeerStreamCalls() uint64 { return s.peers.StreamCalls() }

func (s *Server) GRPCAddr() string { return s.lis.Addr().String() }

// HTTPAddr is the bound HTTP address ("" when HTTP is off).
func (s *Server) HTTPAddr() string {
	if s.httpLn == nil {
		return ""
	}
	return s.httpLn.Addr().String()
}

// RaftAddr is the bound Raft address.
func (s *Server) RaftAddr() string { return string(s.Node.Addr) }

// IsLeader reports whether this node leads.
func (s *Server) IsLeader() bool { return s.Node.Raft.State() == raft.Leader }

// watchHealth keeps the health service in step with the cluster: SERVING
// while a leader is known.
func (s *Server) watchHealth() {
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for {
		// "" (the process) follows liveness, as /healthz; the API
		// service follows readiness, as /readyz.
		st := healthpb.HealthCheckResponse_NOT_SERVING
		if addr, _ := s.Node.Raft.LeaderWithID(); addr != "" {
			st = healthpb.HealthCheckResponse_SERVING
		}
		s.health.SetServingStatus("", st)
		if s.Ready() != nil {
			st = healthpb.HealthCheckResponse_NOT_SERVING
		}
		s.health.SetServingStatus("grackle.v1.GrackleService", st)
		select {
		case <-s.done:
			return
		case <-t.C:
		}
	}
}

func (s *Server) startHTTP() error {
	lis, err := net.Listen("tcp", s.cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("HTTP listen on %s: %w", s.cfg.HTTPAddr, err)
	}
	lis = limit(lis, s.cfg.MaxConnections, s.cfg.MaxConnectionsPerAddress, nil, "HTTP", s.log)
	mux := http.NewServeMux()
	// Without a client certificate to guard them (--http-client-cert
	// none), /metrics and the profiles take a token; /status and the web
	// view's data always do, with access control on.
	guard := func(_ string, _ acl.Need, h http.Handler) http.Handler { return h }
	if s.httpWithoutClientCert() {
		guard = s.tokenGuard
	}
	mux.Handle("/metrics", guard(statusMethod, acl.NeedFor(statusMethod, nil), s.Metrics.Handler()))
	if s.cfg.Pprof {
		mux.Handle("/debug/pprof/", guard("/debug/pprof/", pprofNeed, http.HandlerFunc(pprof.Index)))
		mux.Handle("/debug/pprof/profile", guard("/debug/pprof/profile", pprofNeed, http.HandlerFunc(pprof.Profile)))
		mux.Handle("/debug/pprof/symbol", guard("/debug/pprof/symbol", pprofNeed, http.HandlerFunc(pprof.Symbol)))
	}
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		if err := s.Node.DiskFull(); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		if addr, _ := s.Node.Raft.LeaderWithID(); addr == "" {
			http.Error(w, "no leader", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	s.opsRoutes(mux)
	mux.Handle("/ui/", webui.Handler(s.uiBackend))
	mux.Handle("GET /ui", http.RedirectHandler("/ui/", http.StatusFound))
	s.httpLn = lis
	var h http.Handler = mux
	s.http = &http.Server{Handler: h, ReadHeaderTimeout: s.cfg.HandshakeTimeout, ReadTimeout: s.cfg.HandshakeTimeout,
		WriteTimeout: 30 * time.Second, IdleTimeout: s.cfg.IdleTimeout,
		ErrorLog: s.log.StandardLogger(&hclog.StandardLoggerOptions{InferLevels: true})}
	if s.sec.api != nil {
		if s.sec.api.ClientCA != nil && !s.httpWithoutClientCert() {
			s.http.Handler = requireClientCert(mux)
		}
		s.http.TLSConfig = s.sec.api.Config([]string{"http/1.1"}, s.httpClientCerts())
		go s.http.ServeTLS(lis, "", "")
		return nil
	}
	go s.http.Serve(lis)
	return nil
}

// join asks a running cluster to add this node, retrying until it is in.
func (s *Server) join(grpcAdv string) {
	backoff := 200 * time.Millisecond
	for {
		select {
		case <-s.done:
			return
		default:
		}
		err := func() error {
			opts := []grpc.DialOption{grpc.WithTransportCredentials(s.sec.peerDialCreds())}
			if s.cfg.JoinToken != "" {
				opts = append(opts, grpc.WithPerRPCCredentials(tlsutil.Token(s.cfg.JoinToken)))
			}
			conn, err := grpc.NewClient(s.cfg.Join, opts...)
			if err != nil {
				return err
			}
			defer conn.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_, err = pb.NewClusterServiceClient(conn).AddMember(ctx, &pb.AddMemberRequest{
				NodeId: s.cfg.NodeID, RaftAddress: s.RaftAddr(), GrpcAddress: grpcAdv, Voter: true})
			return err
		}()
		if err == nil {
			s.log.Info("joined the cluster", "via", s.cfg.Join)
			return
		}
		s.log.Warn("join failed; retrying", "via", s.cfg.Join, "error", err)
		select {
		case <-s.done:
			return
		case <-time.After(backoff):
		}
		if backoff < 5*time.Second {
			backoff *= 2
		}
	}
}

// Close stops serving and shuts Raft down.
func (s *Server) Close() error {
	select {
	case <-s.done:
		return nil
	default:
	}
	close(s.done)
	if s.http != nil {
		s.http.Close()
	}
	s.API.Stop()
	s.members.Close()
	s.admin.Close()
	// Forwarded calls end now (their callers learn the outcome is unknown)
	// rather than holding up the drain below; relayed watches end
	// Unavailable, and their clients resume elsewhere.
	s.peers.Close()
	s.lead.Close() // ends the watch streams' term
	if c := s.uiClient.Load(); c != nil {
		c.Close()
	}
	s.mux.Drain() // multiplexed streams end once their calls in flight are answered
	stopped := make(chan struct{})
	go func() { s.grpc.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
		s.log.Debug("shutdown: gRPC calls drained")
	case <-time.After(2 * time.Second):
		s.log.Warn("shutdown: gRPC calls still in flight after 2s (waiting acquires, watches); cutting them")
		s.grpc.Stop()
	}
	s.mux.Close()
	if s.plain != nil {
		s.plain.Stop()
	}
	err := s.Node.Close()
	s.Watch.Close()
	s.feed.Close()
	if err != nil {
		s.log.Error("shutdown: raft did not stop cleanly", "error", err)
		return err
	}
	s.log.Info("shutdown: complete")
	return nil
}

// Run starts a node with cfg and serves until ctx is done.
func Run(ctx context.Context, cfg Config) error {
	cfg = cfg.fill()
	log := NewLogger(cfg)
	if err := applyMemoryLimit(cfg.MemoryLimit, log.Info); err != nil {
		return err
	}
	tuner, err := startGCTuner(cfg.GCHeadroom, log.Info)
	if err != nil {
		return err
	}
	defer tuner.Stop()
	s, err := Start(cfg, log)
	if err != nil {
		return err
	}
	httpNote := ""
	if cfg.HTTPAddr != "" {
		httpNote = ", http on " + cfg.HTTPAddr
	}
	fmt.Fprintf(os.Stderr, "grackle: node %s serving gRPC on %s, raft on %s%s\n", cfg.NodeID, s.GRPCAddr(), s.RaftAddr(), httpNote)
	s.ReloadOn(ctx, syscall.SIGHUP)
	<-ctx.Done()
	log.Info("shutting down")
	// A leader hands over first: no election timeout for the others.
	s.Leave(2*cfg.ElectionTimeout + time.Second)
	return s.Close()
}

// behindOnTokens is the access checker's Unsure: a node that does not lead
// and has not heard from a leader since it started, or has not applied
// every entry it knows committed, cannot tell an unknown token from one
// created after its state (the fault suite saw a restarted follower,
// replaying its log, refuse the workloads' valid token). The leader
// decides with every committed entry applied (its barrier), so it is
// never unsure.
func behindOnTokens(r *raft.Raft, nodeID string) func() error {
	return func() error {
		if r.State() == raft.Leader {
			return nil
		}
		applied, commit := r.AppliedIndex(), r.CommitIndex()
		if !r.LastContact().IsZero() && applied >= commit {
			return nil
		}
		_, id := r.LeaderWithID()
		return apierr.New(codes.Unavailable, apierr.NotLeader, nodeID, apierr.Leader{ID: string(id)},
			fmt.Sprintf("node %s has not caught up with the cluster (applied %d of %d committed entries, or no leader heard yet), so it cannot tell whether this token exists: ask another node", nodeID, applied, commit))
	}
}
