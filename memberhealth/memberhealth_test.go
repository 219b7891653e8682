package memberhealth

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	peerpb "github.com/grackle-coord/grackle/proto/grackle/peer/v1"
	"github.com/grackle-coord/grackle/raftnode"
)

// peer is a member's gRPC server answering probes as node id.
type peer struct {
	peerpb.UnimplementedPeerServiceServer
	id   string
	addr string
	srv  *grpc.Server
}

func (p *peer) Probe(context.Context, *peerpb.ProbeRequest) (*peerpb.ProbeResponse, error) {
	return &peerpb.ProbeResponse{NodeId: p.id, RaftState: "follower", AppliedIndex: 7, Version: "v9"}, nil
}

// serve starts a peer answering as id at addr ("127.0.0.1:0": any port);
// probes: false serves a PeerService without Probe (an older version).
func serve(t *testing.T, id, addr string, probes bool) *peer {
	t.Helper()
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	p := &peer{id: id, addr: lis.Addr().String(), srv: grpc.NewServer()}
	if probes {
		peerpb.RegisterPeerServiceServer(p.srv, p)
	} else {
		peerpb.RegisterPeerServiceServer(p.srv, peerpb.UnimplementedPeerServiceServer{})
	}
	go p.srv.Serve(lis)
	t.Cleanup(p.srv.Stop)
	return p
}

type fixture struct {
	mu      sync.Mutex
	members []Member
	dials   atomic.Int32
	back    chan Member
}

func (f *fixture) set(ms ...Member) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.members = ms
}

func (f *fixture) config() Config {
	return Config{NodeID: "self", Interval: 20 * time.Millisecond, Timeout: 5 * time.Second,
		Members: func() ([]Member, error) {
			f.mu.Lock()
			defer f.mu.Unlock()
			return append([]Member(nil), f.members...), nil
		},
		Self: func() *peerpb.ProbeResponse { return &peerpb.ProbeResponse{NodeId: "self", RaftState: "leader"} },
		Dial: func(addr string) (*grpc.ClientConn, error) {
			f.dials.Add(1)
			return grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		},
		Answered: func(m Member) { f.back <- m },
	}
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func reach(m *Monitor, id string) Reachability {
	s, _ := m.View().Member(id)
	return s.Reachability
}

// A member that stops answering is unreachable at the next probe, which
// closes its connection: the probe after dials afresh, so a member back
// at its address is reachable at the next probe, and Answered is told.
func TestProbesFollowAMemberDownAndBack(t *testing.T) {
	a := serve(t, "a", "127.0.0.1:0", true)
	f := &fixture{back: make(chan Member, 4)}
	f.set(Member{ID: "self", Voter: true}, Member{ID: "a", GRPCAddress: a.addr, Voter: true})
	m := New(f.config())
	if s, _ := m.View().Member("a"); s.Reachability != Unknown {
		t.Fatalf("before any probe: %v", s.Reachability)
	}
	m.Start()
	defer m.Close()
	<-m.FirstRound()
	s, _ := m.View().Member("a")
	if s.Reachability != Reachable || s.Answer.GetAppliedIndex() != 7 || s.Answer.GetVersion() != "v9" || s.LastSeen.IsZero() {
		t.Fatalf("after the first round: %+v", s)
	}
	if self, _ := m.View().Member("self"); self.Reachability != Self || self.Answer.GetRaftState() != "leader" {
		t.Fatalf("self: %+v", self)
	}
	if d := f.dials.Load(); d != 1 {
		t.Fatalf("%d dials for a member that answers, want 1 (the connection is kept)", d)
	}

	a.srv.Stop()
	eventually(t, "a unreachable", func() bool { return reach(m, "a") == Unreachable })
	s, _ = m.View().Member("a")
	if s.Err == nil || s.Answer != nil || s.LastSeen.IsZero() {
		t.Fatalf("unreachable: %+v", s)
	}
	dials := f.dials.Load()
	eventually(t, "a probe dialling afresh", func() bool { return f.dials.Load() > dials+1 })

	serve(t, "a", a.addr, true)
	eventually(t, "a reachable again", func() bool { return reach(m, "a") == Reachable })
	select {
	case got := <-f.back:
		if got.ID != "a" {
			t.Fatalf("Answered told of %v", got)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Answered not called for the member back")
	}
}

// Another node at the member's address, an address that is not known,
// and a member whose version has no probe (Unimplemented: it answered).
func TestProbeAnswers(t *testing.T) {
	other := serve(t, "b", "127.0.0.1:0", true)
	old := serve(t, "c", "127.0.0.1:0", false)
	f := &fixture{back: make(chan Member, 4)}
	f.set(Member{ID: "a", GRPCAddress: other.addr}, Member{ID: "c", GRPCAddress: old.addr}, Member{ID: "d"})
	m := New(f.config())
	m.Start()
	defer m.Close()
	<-m.FirstRound()
	v := m.View()
	if s, _ := v.Member("a"); s.Reachability != Unreachable || s.Err == nil {
		t.Errorf("another node at the address: %+v", s)
	}
	if s, _ := v.Member("c"); s.Reachability != Reachable || s.Answer != nil {
		t.Errorf("a member without probes: %+v", s)
	}
	if s, _ := v.Member("d"); s.Reachability != Unreachable || s.Err != errNoAddress {
		t.Errorf("a member without an address: %+v", s)
	}
	// Removed from the configuration: no longer listed, its connection
	// closed.
	f.set(Member{ID: "c", GRPCAddress: old.addr})
	eventually(t, "the removed members dropped", func() bool {
		m.mu.Lock()
		defer m.mu.Unlock()
		return len(m.probes) == 1
	})
	if _, ok := m.View().Member("a"); ok {
		t.Error("a removed member still listed")
	}
}

type contacts map[raft.ServerID]raftnode.PeerContact

func (c contacts) Get(id raft.ServerID) (raftnode.PeerContact, bool) { pc, ok := c[id]; return pc, ok }

// While leading, the view carries the Raft record of each peer at its
// configured address, its lag behind the leader's last index, and how
// many voters are in contact.
func TestViewOfTheLeader(t *testing.T) {
	now := time.Now()
	leading := true
	f := &fixture{}
	f.set(Member{ID: "self", RaftAddress: "r0", Voter: true}, Member{ID: "a", RaftAddress: "r1", Voter: true},
		Member{ID: "b", RaftAddress: "r2", Voter: true}, Member{ID: "c", RaftAddress: "r3", Voter: true},
		Member{ID: "d", RaftAddress: "r4", Voter: true}, Member{ID: "n", RaftAddress: "r5"})
	cfg := f.config()
	cfg.Leading = func() bool { return leading }
	cfg.LastIndex = func() uint64 { return 100 }
	cfg.ReachableWithin = time.Second
	cfg.Contacts = contacts{
		"a": {Address: "r1", At: now, LastLog: 100},
		"b": {Address: "r2", At: now.Add(-time.Minute), LastLog: 40},
		"c": {Address: "other", At: now, LastLog: 100}, // another server under that id once
		"n": {Address: "r5", At: now, LastLog: 90},
	}
	m := New(cfg)
	v := m.View()
	ra, _ := v.Member("a")
	rb, _ := v.Member("b")
	rc, _ := v.Member("c")
	rn, _ := v.Member("n")
	switch {
	case !v.Leading || ra.Replication == nil || ra.Replication.Lag != 0:
		t.Errorf("a: %+v", ra.Replication)
	case rb.Replication == nil || rb.Replication.Lag != 60 || !rb.Replication.LastContact.Equal(now.Add(-time.Minute)):
		t.Errorf("b: %+v", rb.Replication)
	case rc.Replication != nil:
		t.Errorf("c, recorded at another address: %+v", rc.Replication)
	case rn.Replication == nil || rn.Replication.Lag != 10:
		t.Errorf("nonvoter n: %+v", rn.Replication)
	}
	// 5 voters, in contact: self and a (b too long ago, c and d never).
	if v.Voters != 5 || v.VotersInContact != 2 || v.FailuresTolerated() != -1 {
		t.Errorf("voters %d, in contact %d, tolerated %d; want 5, 2, -1", v.Voters, v.VotersInContact, v.FailuresTolerated())
	}
	leading = false
	v = m.View()
	if ra, _ := v.Member("a"); v.Leading || ra.Replication != nil || v.Voters != 0 {
		t.Errorf("a follower's view carries the leader's: %+v", v)
	}
}
