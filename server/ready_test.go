package server_test

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/grackle-coord/grackle/server"
	"github.com/grackle-coord/grackle/server/servertest"
)

// cutProxy forwards TCP to a target until cut: then it drops every
// connection and refuses new ones, until restored. A node that advertises
// its Raft address through it is cut off from the leader's traffic.
type cutProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	cut    bool
	conns  map[net.Conn]struct{}
}

func newCutProxy(t *testing.T, target string) *cutProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	t.Cleanup(func() { ln.Close(); p.setCut(true) })
	go p.serve()
	return p
}

func (p *cutProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.cut {
			p.mu.Unlock()
			c.Close()
			continue
		}
		up, err := net.DialTimeout("tcp", p.target, time.Second)
		if err != nil {
			p.mu.Unlock()
			c.Close()
			continue
		}
		p.conns[c], p.conns[up] = struct{}{}, struct{}{}
		p.mu.Unlock()
		go func() { io.Copy(up, c); up.Close() }()
		go func() { io.Copy(c, up); c.Close() }()
	}
}

func (p *cutProxy) setCut(cut bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = cut
	if cut {
		for c := range p.conns {
			c.Close()
			delete(p.conns, c)
		}
	}
}

// clusterWithCuttableThird starts node1, then node2 and node3 joining it,
// node3's Raft traffic through a proxy that can cut it off. Every node
// gets 1 s heartbeat and election timeouts and a 500 ms leader lease (a
// cut-off follower keeps believing in its leader for a while), then tune.
func clusterWithCuttableThird(t *testing.T, tune func(*server.Config)) (*servertest.Cluster, *server.Server, *cutProxy) {
	t.Helper()
	c := servertest.New(t)
	config := func(id string) server.Config {
		cfg := servertest.Config(t, id)
		cfg.HeartbeatTimeout, cfg.ElectionTimeout, cfg.LeaderLeaseTimeout = time.Second, time.Second, 500*time.Millisecond
		if tune != nil {
			tune(&cfg)
		}
		return cfg
	}
	c.StartNode(config("node1"))
	c.WaitLeader()
	cfg2 := config("node2")
	cfg2.Join = c.Nodes[0].GRPCAddr()
	c.StartNode(cfg2)
	cfg3 := config("node3")
	cfg3.Join = c.Nodes[0].GRPCAddr()
	cfg3.RaftAddr = freeAddr(t)
	proxy := newCutProxy(t, cfg3.RaftAddr)
	cfg3.AdvertiseRaft = proxy.ln.Addr().String()
	n3 := c.StartNode(cfg3)
	c.WaitMembers(3)
	return c, n3, proxy
}

// freeAddr is a loopback address nobody listens on (the port was free a
// moment ago).
func freeAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// /readyz and the gRPC health of grackle.v1.GrackleService turn not ready
// on a follower cut off from the leader, and ready again once it rejoins;
// /healthz (liveness) is not what is tested here.
func TestReadinessFlipsWhenFollowerCutOff(t *testing.T) {
	c, n3, proxy := clusterWithCuttableThird(t, func(cfg *server.Config) { cfg.HTTPAddr = "127.0.0.1:0" })

	readyz := func() int {
		resp, err := http.Get("http://" + n3.HTTPAddr() + "/readyz")
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	health := healthpb.NewHealthClient(c.Conn(2))
	serving := func() healthpb.HealthCheckResponse_ServingStatus {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		r, err := health.Check(ctx, &healthpb.HealthCheckRequest{Service: "grackle.v1.GrackleService"})
		if err != nil {
			return healthpb.HealthCheckResponse_UNKNOWN
		}
		return r.Status
	}
	both := func(code int, st healthpb.HealthCheckResponse_ServingStatus) func() bool {
		return func() bool { return readyz() == code && serving() == st }
	}
	servertest.Eventually(t, "node3 ready", 20*time.Second, both(200, healthpb.HealthCheckResponse_SERVING))
	// /status: JSON, the same bytes twice over when nothing changes (sorted keys).
	st := map[string]any{}
	resp, err := http.Get("http://" + n3.HTTPAddr() + "/status")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil || st["node_id"] != "node3" || st["ready"] != true {
		t.Fatalf("/status: %v %v", st, err)
	}
	resp.Body.Close()
	if v, ok := st["version"].(map[string]any); !ok || v["go_version"] == "" {
		t.Fatalf("/status version: %v", st["version"])
	}
	proxy.setCut(true)
	servertest.Eventually(t, "node3 not ready once cut off", 20*time.Second, both(503, healthpb.HealthCheckResponse_NOT_SERVING))
	if n3.Ready() == nil {
		t.Fatal("Ready() nil while cut off")
	}
	proxy.setCut(false)
	servertest.Eventually(t, "node3 ready again after rejoining", 30*time.Second, both(200, healthpb.HealthCheckResponse_SERVING))
}
