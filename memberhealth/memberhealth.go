// Package memberhealth is a node's one view of its cluster's members:
// whether each answers (the node probes every other member about once a
// second) and, while the node leads, how well each keeps up with its Raft
// log (the leader's record of answered AppendEntries). Every surface that
// shows member health reads it: GetClusterStatus (so `grackle cluster
// status` and the web view), /status and the metrics. Asking it costs no
// call to any member: it answers from the latest probes.
//
// The probes use connections of their own, and a probe that fails closes
// its connection, so the next one dials afresh. A kept gRPC connection to
// a member that went away waits in reconnect backoff (growing to two
// minutes), and keeps the addresses the member's host name resolved to
// for 30 s at least (gRPC's DNS resolver); a member restarted at a new
// address (a container recreated) stayed unreachable for up to 30 s after
// it answered. A fresh connection resolves the name again and connects at
// once.
package memberhealth

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	peerpb "github.com/grackle-coord/grackle/proto/grackle/peer/v1"
	"github.com/grackle-coord/grackle/raftnode"
)

// Defaults of Config.
const (
	DefaultInterval        = time.Second
	DefaultTimeout         = 750 * time.Millisecond
	DefaultReachableWithin = 2 * time.Second
)

// Reachability is whether a member answers this node's probes.
type Reachability string

const (
	// Unknown: no probe of the member has ended yet (this node just
	// started, or the member was just added).
	Unknown     Reachability = ""
	Self        Reachability = "self"
	Reachable   Reachability = "reachable"
	Unreachable Reachability = "unreachable"
)

// Member is one server of the Raft configuration.
type Member struct {
	ID          string
	RaftAddress string
	// GRPCAddress is where the member is probed ("" when unknown: it
	// cannot be, and counts as unreachable).
	GRPCAddress string
	Voter       bool
}

// Replication is the leader's record of one peer: what the peer's latest
// answer to its AppendEntries said.
type Replication struct {
	// LastContact is when the peer last answered.
	LastContact time.Time
	// LastLog is the peer's last log index as of that answer.
	LastLog uint64
	// Lag is the leader's last log index now minus LastLog: the entries
	// the peer lacks, as far as the leader knows.
	Lag uint64
}

// Status is one member's health as this node sees it.
type Status struct {
	Member
	Reachability Reachability
	// Answer is what the member said of itself in the latest probe (nil
	// unless Reachable and it answered with one; for Self, this node's
	// own).
	Answer *peerpb.ProbeResponse
	// LastSeen is when a probe of the member last had an answer (zero:
	// never since this node started; zero for Self).
	LastSeen time.Time
	// Err is why the latest probe failed (nil unless Unreachable).
	Err error
	// Replication is the leader's view: set only while this node leads,
	// for a peer that answered its AppendEntries at its configured Raft
	// address since this node started.
	Replication *Replication
}

// View is the members' health at one moment.
type View struct {
	At time.Time
	// Leading: this node leads, so the Replication fields and the voter
	// counts below are its own record.
	Leading bool
	// Members in the order of the Raft configuration.
	Members []Status
	// While Leading: the voters, and how many of them answered this
	// node's AppendEntries within ReachableWithin (itself included, when
	// it votes). Both zero otherwise.
	Voters, VotersInContact int
}

// Member returns the status of member id.
func (v View) Member(id string) (Status, bool) {
	for _, s := range v.Members {
		if s.ID == id {
			return s, true
		}
	}
	return Status{}, false
}

// Quorum is the majority of n voters.
func Quorum(n int) int { return n/2 + 1 }

// FailuresTolerated is how many more voters may stop answering the leader
// before those left are no majority: 0 means one more failure loses the
// quorum, negative that it is lost. Meaningful only while Leading.
func (v View) FailuresTolerated() int { return v.VotersInContact - Quorum(v.Voters) }

// Contacts is the leader's record of each peer's last answered
// AppendEntries (raftnode.Contacts).
type Contacts interface {
	Get(id raft.ServerID) (raftnode.PeerContact, bool)
}

// Config is what a Monitor needs of its node.
type Config struct {
	NodeID string
	// Members returns the latest Raft configuration.
	Members func() ([]Member, error)
	// Self is this node's own answer (what its Probe handler answers).
	Self func() *peerpb.ProbeResponse
	// Dial makes a new connection to a member's gRPC address, with the
	// node's peer credentials. The monitor closes it.
	Dial func(addr string) (*grpc.ClientConn, error)

	// Leading reports whether this node leads; Contacts and LastIndex are
	// its Raft record and last log index (nil Contacts: no Replication).
	Leading   func() bool
	Contacts  Contacts
	LastIndex func() uint64
	// ReachableWithin: a voter that answered AppendEntries within this
	// counts as in contact (default 2 s; the server passes what its
	// leader counts reachable for membership changes).
	ReachableWithin time.Duration

	// Interval between probe rounds (default 1 s); Timeout bounds each
	// probe (default 750 ms).
	Interval, Timeout time.Duration
	// Answered, when set, is called (off the probe loop's lock) when a
	// member answers a probe after the one before did not: the node
	// replaces its other connections to it, which may sit in reconnect
	// backoff or on a stale address.
	Answered func(Member)
	Log      hclog.Logger
}

// Monitor probes the members and answers View. Start it once; Close stops
// it.
type Monitor struct {
	cfg    Config
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
	first  chan struct{} // closed when the first round ended

	mu     sync.Mutex
	probes map[string]*probe // by member id
	closed bool
}

// probe is what the monitor keeps of one member.
type probe struct {
	addr     string
	cc       *grpc.ClientConn // nil: dial at the next probe
	reach    Reachability
	answer   *peerpb.ProbeResponse
	lastSeen time.Time
	err      error
}

// New makes a monitor; Start starts its probes.
func New(cfg Config) *Monitor {
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.ReachableWithin <= 0 {
		cfg.ReachableWithin = DefaultReachableWithin
	}
	if cfg.Log == nil {
		cfg.Log = hclog.NewNullLogger()
	}
	if cfg.Leading == nil {
		cfg.Leading = func() bool { return false }
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Monitor{cfg: cfg, ctx: ctx, cancel: cancel, done: make(chan struct{}), first: make(chan struct{}),
		probes: map[string]*probe{}}
}

// Start runs a round of probes at once and then every Interval, until
// Close.
func (m *Monitor) Start() {
	go m.run()
}

// Close stops the probes and closes their connections.
func (m *Monitor) Close() {
	if m == nil {
		return
	}
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return
	}
	m.closed = true
	m.mu.Unlock()
	m.cancel()
	<-m.done
	m.mu.Lock()
	defer m.mu.Unlock()
	for id, p := range m.probes {
		if p.cc != nil {
			p.cc.Close()
		}
		delete(m.probes, id)
	}
}

// FirstRound returns a channel closed once the first round of probes has
// ended (a node just started answers Unknown for every member until then).
func (m *Monitor) FirstRound() <-chan struct{} { return m.first }

func (m *Monitor) run() {
	defer close(m.done)
	t := time.NewTicker(m.cfg.Interval)
	defer t.Stop()
	for i := 0; ; i++ {
		m.round()
		if i == 0 {
			close(m.first)
		}
		select {
		case <-m.ctx.Done():
			return
		case <-t.C:
		}
	}
}

// round probes every other member at once and records the results.
func (m *Monitor) round() {
	members, err := m.cfg.Members()
	if err != nil {
		m.cfg.Log.Debug("member probes skipped: no configuration", "error", err)
		return
	}
	type job struct {
		mem Member
		cc  *grpc.ClientConn
		err error
	}
	var jobs []job
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return
	}
	in := map[string]bool{}
	for _, mem := range members {
		if mem.ID == m.cfg.NodeID {
			continue
		}
		in[mem.ID] = true
		p := m.probes[mem.ID]
		if p == nil {
			p = &probe{}
			m.probes[mem.ID] = p
		}
		if p.cc != nil && p.addr != mem.GRPCAddress {
			p.cc.Close()
			p.cc = nil
		}
		p.addr = mem.GRPCAddress
		j := job{mem: mem}
		switch {
		case mem.GRPCAddress == "":
			j.err = errNoAddress
		case p.cc == nil:
			p.cc, j.err = m.cfg.Dial(mem.GRPCAddress)
		}
		j.cc = p.cc
		jobs = append(jobs, j)
	}
	for id, p := range m.probes {
		if !in[id] { // no longer a member
			if p.cc != nil {
				p.cc.Close()
			}
			delete(m.probes, id)
		}
	}
	m.mu.Unlock()

	answers := make([]*peerpb.ProbeResponse, len(jobs))
	var wg sync.WaitGroup
	for i := range jobs {
		if jobs[i].err != nil {
			continue
		}
		wg.Add(1)
		go func(j *job, out **peerpb.ProbeResponse) {
			defer wg.Done()
			*out, j.err = m.ask(j.mem, j.cc)
		}(&jobs[i], &answers[i])
	}
	wg.Wait()

	now := time.Now()
	var back []Member
	m.mu.Lock()
	for i, j := range jobs {
		p := m.probes[j.mem.ID]
		if p == nil || m.closed {
			continue // removed meanwhile (or closing)
		}
		was := p.reach
		if j.err != nil {
			p.reach, p.answer, p.err = Unreachable, nil, j.err
			if p.cc != nil && p.cc == j.cc {
				// The next probe dials afresh: no reconnect backoff, and
				// the member's name resolved again.
				p.cc.Close()
				p.cc = nil
			}
			if was != Unreachable {
				m.cfg.Log.Warn("member unreachable", "member", j.mem.ID, "address", j.mem.GRPCAddress, "error", j.err)
			}
			continue
		}
		p.reach, p.answer, p.err, p.lastSeen = Reachable, answers[i], nil, now
		if was == Unreachable {
			m.cfg.Log.Info("member reachable again", "member", j.mem.ID, "address", j.mem.GRPCAddress)
			back = append(back, j.mem)
		}
	}
	m.mu.Unlock()
	if m.cfg.Answered != nil {
		for _, mem := range back {
			m.cfg.Answered(mem)
		}
	}
}

var errNoAddress = errors.New("no gRPC address known for the member")

// ask sends one probe. An answer from another node, or none within
// Timeout, fails it; a member that answers Unimplemented (a version
// without the probe, during a rolling upgrade) is reachable, without an
// answer.
func (m *Monitor) ask(mem Member, cc *grpc.ClientConn) (*peerpb.ProbeResponse, error) {
	ctx, cancel := context.WithTimeout(m.ctx, m.cfg.Timeout)
	defer cancel()
	r, err := peerpb.NewPeerServiceClient(cc).Probe(ctx, &peerpb.ProbeRequest{})
	if status.Code(err) == codes.Unimplemented {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if r.GetNodeId() != mem.ID {
		return nil, fmt.Errorf("%s answered as node %q", mem.GRPCAddress, r.GetNodeId())
	}
	return r, nil
}

// View returns every member's health now: the latest probes' results and,
// while this node leads, its Raft record.
func (m *Monitor) View() View {
	members, _ := m.cfg.Members()
	v := View{At: time.Now(), Leading: m.cfg.Leading()}
	var last uint64
	if v.Leading && m.cfg.LastIndex != nil {
		last = m.cfg.LastIndex()
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, mem := range members {
		s := Status{Member: mem}
		if mem.ID == m.cfg.NodeID {
			s.Reachability = Self
			if m.cfg.Self != nil {
				s.Answer = m.cfg.Self()
			}
		} else if p := m.probes[mem.ID]; p != nil {
			s.Reachability, s.Answer, s.LastSeen, s.Err = p.reach, p.answer, p.lastSeen, p.err
		}
		if v.Leading && mem.ID != m.cfg.NodeID && m.cfg.Contacts != nil {
			if pc, ok := m.cfg.Contacts.Get(raft.ServerID(mem.ID)); ok && string(pc.Address) == mem.RaftAddress {
				r := &Replication{LastContact: pc.At, LastLog: pc.LastLog}
				if last > pc.LastLog {
					r.Lag = last - pc.LastLog
				}
				s.Replication = r
			}
		}
		if v.Leading && mem.Voter {
			v.Voters++
			if mem.ID == m.cfg.NodeID || s.Replication != nil && v.At.Sub(s.Replication.LastContact) <= m.cfg.ReachableWithin {
				v.VotersInContact++
			}
		}
		v.Members = append(v.Members, s)
	}
	return v
}
