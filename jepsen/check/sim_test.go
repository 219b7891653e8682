package check

import (
	"container/heap"
	"fmt"
	"math/rand"
	"sort"
	"testing"
	"time"

	"github.com/grackle-coord/grackle/jepsen/history"
)

// A simulated, correct Grackle: ops take effect at a random instant
// between their invoke and completion (their linearization point), against
// a sequential semaphore server with expiring leases. Processes behave like
// the runner's two workloads: "lin-" semaphores with long leases, "fen-"
// semaphores (1 permit) with short leases that sometimes run out under a
// worker writing to the fenced register. Some ops end indeterminate (and
// then did or did not happen), some fail (and did not happen).

type simLease struct {
	exp     time.Duration
	revoked bool
}

type simHold struct {
	w     int64
	token uint64
}

type simServer struct {
	// earlyExpiry is a server bug: leases run out at half their TTL.
	earlyExpiry bool
	leases      map[string]*simLease
	holds       map[string]map[string]simHold // sem -> lease -> hold
	permits     map[string]int64
	token       uint64
	nextID      int
	reg         map[string]uint64 // fenced register per semaphore
	// effective releases: they removed a hold (for the injected bugs)
	effective map[*history.Op]bool
}

func (s *simServer) alive(l string, t time.Duration) bool {
	x := s.leases[l]
	return x != nil && !x.revoked && t < x.exp
}

// live are the holders of sem whose lease is alive at t, sorted by lease.
func (s *simServer) live(sem string, t time.Duration) []history.Holder {
	var out []history.Holder
	for l, h := range s.holds[sem] {
		if s.alive(l, t) {
			out = append(out, history.Holder{Lease: l, Weight: h.w, Token: h.token})
		} else {
			delete(s.holds[sem], l)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Lease < out[j].Lease })
	return out
}

func (s *simServer) ttl(sec int64) time.Duration {
	if s.earlyExpiry {
		return time.Duration(sec) * time.Second / 2
	}
	return time.Duration(sec) * time.Second
}

// apply executes op at time t and fills in its results; false: NotFound.
func (s *simServer) apply(o *history.Op, t time.Duration) bool {
	switch o.Kind {
	case history.CreateLease:
		s.nextID++
		o.Lease = fmt.Sprintf("ls_%04d", s.nextID)
		s.leases[o.Lease] = &simLease{exp: t + s.ttl(o.TTL)}
	case history.Refresh:
		if !s.alive(o.Lease, t) {
			return false
		}
		s.leases[o.Lease].exp = t + s.ttl(o.TTL)
	case history.Revoke:
		if !s.alive(o.Lease, t) {
			return false
		}
		s.leases[o.Lease].revoked = true
		for _, m := range s.holds {
			delete(m, o.Lease)
		}
	case history.Acquire:
		if !s.alive(o.Lease, t) {
			return false
		}
		var sum int64
		for _, x := range s.live(o.Semaphore, t) {
			if x.Lease != o.Lease {
				sum += x.Weight
			}
		}
		switch {
		case sum+o.Weight <= s.permits[o.Semaphore]:
			s.token++
			if s.holds[o.Semaphore] == nil {
				s.holds[o.Semaphore] = map[string]simHold{}
			}
			s.holds[o.Semaphore][o.Lease] = simHold{w: o.Weight, token: s.token}
			o.AcquireOutcome, o.Token = history.Acquired, s.token
		case o.Timeout == 0:
			o.AcquireOutcome = history.Unavailable
		default:
			o.AcquireOutcome = history.TimedOut
		}
	case history.Release:
		s.live(o.Semaphore, t)
		if _, ok := s.holds[o.Semaphore][o.Lease]; ok {
			delete(s.holds[o.Semaphore], o.Lease)
			s.effective[o] = true
		}
	case history.GetSemaphore:
		hs := s.live(o.Semaphore, t)
		o.ActiveHolds, o.HoldersCount = 0, int64(len(hs))
		for _, x := range hs {
			o.ActiveHolds += x.Weight
		}
	case history.ListHolders:
		o.Holders = s.live(o.Semaphore, t)
	}
	return true
}

type simStep struct {
	kind   string
	sem    string
	w      int64
	ttl    int64
	tmo    int64
	wait   time.Duration // before it starts
	token  uint64        // fence_write
	finish bool          // fenced: the cycle ends after this step
}

type simProc struct {
	id, gen int
	fenced  bool
	sem     string
	lease   string
	ttl     int64
	queue   []simStep
	rng     *rand.Rand
}

func (p *simProc) pid() int { return p.id + 1000*p.gen }

func (p *simProc) plan() simStep {
	if p.lease == "" {
		if p.fenced {
			p.ttl = 1 + p.rng.Int63n(3)
		} else {
			p.ttl = 300
		}
		return simStep{kind: history.CreateLease, ttl: p.ttl}
	}
	if p.fenced {
		return simStep{kind: history.Acquire, sem: p.sem, w: 1, tmo: 2}
	}
	switch x := p.rng.Intn(100); {
	case x < 35:
		return simStep{kind: history.Acquire, sem: p.sem, w: 1 + p.rng.Int63n(2), tmo: int64(p.rng.Intn(2))}
	case x < 58:
		return simStep{kind: history.Release, sem: p.sem}
	case x < 75:
		return simStep{kind: history.GetSemaphore, sem: p.sem}
	case x < 92:
		return simStep{kind: history.ListHolders, sem: p.sem}
	case x < 96:
		return simStep{kind: history.Refresh, ttl: p.ttl}
	default:
		return simStep{kind: history.Revoke, sem: p.sem}
	}
}

// react decides what follows a completed op.
func (p *simProc) react(o *history.Op) {
	if o.Outcome == history.Info {
		p.gen++
	}
	switch o.Kind {
	case history.CreateLease:
		if o.Outcome == history.OK {
			p.lease = o.Lease
		}
	case history.Revoke:
		if o.Outcome != history.Info && !p.fenced {
			p.lease = ""
		}
	case history.Acquire:
		if !p.fenced {
			return
		}
		p.queue = nil
		if granted(o) {
			ttl := time.Duration(p.ttl) * time.Second
			work := time.Duration(p.rng.Int63n(int64(ttl / 2)))
			p.queue = append(p.queue, simStep{kind: history.FenceWrite, sem: p.sem, token: o.Token})
			if p.rng.Intn(3) == 0 {
				work = ttl + 500*time.Millisecond // the lease runs out under the worker
			} else if p.rng.Intn(2) == 0 {
				p.queue = append(p.queue, simStep{kind: history.Refresh, ttl: p.ttl})
			}
			p.queue = append(p.queue, simStep{kind: history.FenceWrite, sem: p.sem, token: o.Token, wait: work},
				simStep{kind: history.Release, sem: p.sem})
		}
		if o.Outcome != history.Info && p.rng.Intn(2) == 0 {
			p.queue = append(p.queue, simStep{kind: history.Revoke, sem: p.sem})
		}
		if len(p.queue) == 0 {
			p.lease = ""
		} else {
			p.queue[len(p.queue)-1].finish = true
		}
	}
}

type simEvent struct {
	t    time.Duration
	seq  int
	kind int // 0 invoke, 1 linearize, 2 complete
	p    *simProc
	op   *history.Op
	fate string // at linearize: ok, info-happened, info-not, fail
	// finish: a fenced cycle ends with this op (the process then takes a
	// new lease)
	finish bool
}

type simQueue []*simEvent

func (q simQueue) Len() int { return len(q) }
func (q simQueue) Less(i, j int) bool {
	if q[i].t != q[j].t {
		return q[i].t < q[j].t
	}
	return q[i].seq < q[j].seq
}
func (q simQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *simQueue) Push(x any)   { *q = append(*q, x.(*simEvent)) }
func (q *simQueue) Pop() (x any) { old := *q; x = old[len(old)-1]; *q = old[:len(old)-1]; return x }

// simulate runs a correct system and returns its history (with
// earlyExpiry, a server whose leases run out at half their TTL).
func simulate(seed int64, dur time.Duration, nLinear, nFenced int, earlyExpiry ...bool) (*history.History, *simServer) {
	rng := rand.New(rand.NewSource(seed))
	h := &history.History{Seed: seed, Nodes: 3, Duration: dur, Permits: map[string]int64{
		"lin-0": 1, "lin-1": 2, "lin-2": 3, "fen-0": 1, "fen-1": 1},
		Meta: map[string]string{"linear_prefix": "lin-", "fenced_prefix": "fen-"}}
	s := &simServer{leases: map[string]*simLease{}, holds: map[string]map[string]simHold{}, permits: h.Permits,
		reg: map[string]uint64{}, effective: map[*history.Op]bool{}, earlyExpiry: len(earlyExpiry) > 0 && earlyExpiry[0]}
	var q simQueue
	seq := 0
	push := func(e *simEvent) { seq++; e.seq = seq; heap.Push(&q, e) }
	var procs []*simProc
	for i := 0; i < nLinear; i++ {
		procs = append(procs, &simProc{id: i, sem: fmt.Sprintf("lin-%d", i%3), rng: rand.New(rand.NewSource(seed*31 + int64(i)))})
	}
	for i := 0; i < nFenced; i++ {
		procs = append(procs, &simProc{id: 500 + i, fenced: true, sem: fmt.Sprintf("fen-%d", i%2), rng: rand.New(rand.NewSource(seed*37 + int64(i)))})
	}
	for _, p := range procs {
		push(&simEvent{t: time.Duration(rng.Intn(5)) * time.Millisecond, kind: 0, p: p})
	}
	var ops []*history.Op
	id := 0
	record := func(o *history.Op) { id++; o.ID = id; ops = append(ops, o) }
	latency := func() time.Duration {
		if rng.Intn(20) == 0 {
			return time.Duration(100+rng.Intn(300)) * time.Millisecond // a slow one: wide concurrency
		}
		return time.Duration(500+rng.Intn(30000)) * time.Microsecond
	}
	var last time.Duration
	for q.Len() > 0 {
		e := heap.Pop(&q).(*simEvent)
		last = max(last, e.t)
		switch e.kind {
		case 0: // invoke the next step
			p := e.p
			if e.t > dur {
				continue // the run is over for this process
			}
			var st simStep
			if len(p.queue) > 0 {
				st, p.queue = p.queue[0], p.queue[1:]
			} else {
				st = p.plan()
			}
			o := &history.Op{Process: p.pid(), Kind: st.kind, Namespace: "jepsen", Semaphore: st.sem, Lease: p.lease,
				Weight: st.w, TTL: st.ttl, Timeout: st.tmo, Invoke: e.t, Node: "n1"}
			switch st.kind {
			case history.CreateLease, history.GetSemaphore, history.ListHolders:
				o.Lease = ""
			}
			if st.kind == history.Refresh {
				o.Semaphore = ""
			}
			if st.kind == history.FenceWrite {
				o.Token, o.Complete, o.Outcome = st.token, e.t, history.OK
				if st.token >= s.reg[st.sem] {
					s.reg[st.sem] = st.token
					o.Accepted = true
				}
				record(o)
				if st.finish {
					p.lease = ""
				}
				next := e.t + time.Millisecond
				if len(p.queue) > 0 {
					next += p.queue[0].wait
				}
				push(&simEvent{t: next, kind: 0, p: p})
				continue
			}
			d := latency()
			fate := "ok"
			switch x := rng.Intn(100); {
			case x < 2:
				fate = "info-happened"
			case x < 4:
				fate = "info-not"
			case x < 6:
				fate = "fail"
			}
			lin := e.t + time.Duration(rng.Int63n(int64(d)+1))
			push(&simEvent{t: lin, kind: 1, op: o, fate: fate, p: p})
			push(&simEvent{t: e.t + d, kind: 2, op: o, fate: fate, p: p, finish: st.finish})
		case 1: // linearization point
			o := e.op
			switch e.fate {
			case "ok", "info-happened":
				if !s.apply(o, e.t) {
					o.Outcome, o.Error, o.Code = history.Fail, "NotFound: lease not found", "NotFound"
				}
			}
		case 2: // completion
			o, p := e.op, e.p
			switch {
			case e.fate == "fail":
				o.Outcome, o.Error, o.Code, o.Reason = history.Fail, "Unavailable: not the leader", "Unavailable", "NOT_LEADER"
				o.Lease = keepLease(o)
				o.AcquireOutcome, o.Token, o.Holders, o.ActiveHolds, o.HoldersCount = "", 0, nil, 0, 0
				o.Complete = e.t
			case e.fate == "info-happened" || e.fate == "info-not":
				switch o.Kind {
				case history.GetSemaphore, history.ListHolders: // the runner marks failed reads Fail
					o.Outcome, o.Complete = history.Fail, e.t
				default:
					o.Outcome = history.Info
				}
				o.Error = "DeadlineExceeded: context deadline exceeded"
				if o.Kind == history.CreateLease {
					o.Lease = "" // the client never learnt the id
				}
				o.AcquireOutcome, o.Token, o.Holders, o.ActiveHolds, o.HoldersCount = "", 0, nil, 0, 0
			case o.Outcome == history.Fail: // NotFound at the linearization point
				o.Complete = e.t
			default:
				o.Outcome, o.Complete = history.OK, e.t
			}
			record(o)
			p.react(o)
			next := e.t + time.Duration(rng.Intn(10))*time.Millisecond
			if e.finish {
				p.lease = ""
			}
			if o.Kind == history.CreateLease && o.Outcome != history.OK {
				next += 100 * time.Millisecond
			}
			if len(p.queue) > 0 {
				next += p.queue[0].wait
			}
			push(&simEvent{t: next, kind: 0, p: p})
		}
	}
	// Heal, then a fresh client reads every semaphore.
	h.HealedAt = last + 50*time.Millisecond
	t := h.HealedAt + 10*time.Millisecond
	for _, sem := range []string{"fen-0", "fen-1", "lin-0", "lin-1", "lin-2"} {
		for _, kind := range []string{history.ListHolders, history.GetSemaphore} {
			o := &history.Op{Process: 9999, Kind: kind, Namespace: "jepsen", Semaphore: sem, Invoke: t, Outcome: history.OK}
			s.apply(o, t+time.Millisecond)
			o.Complete = t + 2*time.Millisecond
			if h.ServedAgainAt == 0 {
				h.ServedAgainAt = o.Complete
			}
			record(o)
			t += 3 * time.Millisecond
		}
	}
	for _, o := range ops {
		h.Ops = append(h.Ops, *o)
	}
	sort.SliceStable(h.Ops, func(i, j int) bool { return h.Ops[i].Invoke < h.Ops[j].Invoke })
	h.Nemeses = []history.Nemesis{{Kind: "partition-halves", Start: dur / 4, End: dur / 2}, {Kind: "kill", Detail: "n2", Start: dur * 2 / 3, End: dur * 3 / 4}}
	return h, s
}

func keepLease(o *history.Op) string {
	if o.Kind == history.CreateLease {
		return ""
	}
	return o.Lease
}

func clone(h *history.History) *history.History {
	c := *h
	c.Ops = append([]history.Op(nil), h.Ops...)
	return &c
}

func flagged(rs []Result) []string {
	var out []string
	for _, r := range rs {
		if r.Valid == Invalid {
			out = append(out, r.Name)
		}
	}
	return out
}

// mutation ops of a lease on a semaphore that may change its hold.
func isMut(o *history.Op) bool {
	switch o.Kind {
	case history.Acquire, history.Release, history.Revoke:
		return o.Outcome != history.Fail
	}
	return false
}

// bugDropRelease removes an effective release after which its lease does
// nothing more on the semaphore, so the hold must still be seen.
func bugDropRelease(h *history.History, s *simServer, rng *rand.Rand) (*history.History, string) {
	eff := map[int]bool{}
	for o := range s.effective {
		eff[o.ID] = true
	}
	var cands []int
	for i, r := range h.Ops {
		if r.Kind != history.Release || r.Outcome != history.OK || !eff[r.ID] || r.Semaphore[:4] != "lin-" {
			continue
		}
		ok := true
		for _, o := range h.Ops {
			if o.ID == r.ID || o.Lease != r.Lease {
				continue
			}
			// An indeterminate release or revoke could take effect late and
			// hide the drop; so could any later mutation.
			if (o.Outcome == history.Info && (o.Kind == history.Release || o.Kind == history.Revoke)) || (isMut(&o) && o.Invoke >= r.Invoke) {
				ok = false
				break
			}
		}
		if ok {
			cands = append(cands, i)
		}
	}
	if len(cands) == 0 {
		return nil, ""
	}
	i := cands[rng.Intn(len(cands))]
	c := clone(h)
	desc := "drop release " + FormatOp(c.Ops[i])
	c.Ops = append(c.Ops[:i:i], c.Ops[i+1:]...)
	return c, desc
}

// bugFlipGet changes the count of a get whose state is unambiguous.
func bugFlipGet(h *history.History, rng *rand.Rand) (*history.History, string) {
	var cands []int
	for i, g := range h.Ops {
		if g.Kind != history.GetSemaphore || g.Outcome != history.OK || g.Semaphore[:4] != "lin-" {
			continue
		}
		// Leases deleted by a revoke answered before the get.
		gone := map[string]bool{}
		for _, o := range h.Ops {
			if o.Kind == history.Revoke && o.Outcome == history.OK && o.Complete < g.Invoke {
				gone[o.Lease] = true
			}
		}
		ok := true
		for _, o := range h.Ops {
			if o.Semaphore != g.Semaphore || !isMut(&o) || gone[o.Lease] {
				continue
			}
			if o.Invoke <= g.Complete && (o.Outcome == history.Info || o.Complete >= g.Invoke) {
				ok = false // concurrent with it, or indeterminate before it
				break
			}
		}
		if ok {
			cands = append(cands, i)
		}
	}
	c := clone(h)
	if len(cands) == 0 {
		for i, g := range c.Ops {
			if g.Kind == history.GetSemaphore && g.Outcome == history.OK {
				c.Ops[i].ActiveHolds = c.Permits[g.Semaphore] + 1
				return c, "impossible count " + FormatOp(c.Ops[i])
			}
		}
		return nil, ""
	}
	i := cands[rng.Intn(len(cands))]
	if c.Ops[i].ActiveHolds > 0 && rng.Intn(2) == 0 {
		c.Ops[i].ActiveHolds--
	} else {
		c.Ops[i].ActiveHolds++
	}
	return c, "flip get " + FormatOp(c.Ops[i])
}

// bugDuplicateGrant grants the same token again to another, live lease
// just after a real grant.
func bugDuplicateGrant(h *history.History, rng *rand.Rand) (*history.History, string) {
	var cands []int
	for i, o := range h.Ops {
		if granted(&o) {
			cands = append(cands, i)
		}
	}
	if len(cands) == 0 {
		return nil, ""
	}
	a := h.Ops[cands[rng.Intn(len(cands))]]
	c := clone(h)
	maxID := 0
	for _, o := range c.Ops {
		maxID = max(maxID, o.ID)
	}
	c.Ops = append(c.Ops, history.Op{ID: maxID + 1, Process: 7777, Kind: history.CreateLease, Namespace: a.Namespace,
		Lease: "ls_dup", TTL: 300, Outcome: history.OK, Invoke: 0, Complete: time.Microsecond})
	b := a
	b.ID, b.Process, b.Lease = maxID+2, 7777, "ls_dup"
	b.Invoke, b.Complete = a.Complete+time.Microsecond, a.Complete+2*time.Microsecond
	c.Ops = append(c.Ops, b)
	sort.SliceStable(c.Ops, func(i, j int) bool { return c.Ops[i].Invoke < c.Ops[j].Invoke })
	return c, "duplicate grant of " + FormatOp(a)
}

func TestRandomizedHistories(t *testing.T) {
	dur := 6 * time.Second
	seeds := []int64{1, 2, 3, 4, 5, 6, 7, 8}
	if testing.Short() {
		seeds = seeds[:3]
	}
	opts := Options{LinearizabilityTimeout: 20 * time.Second, MinimizeTimeout: 5 * time.Second}
	injected := map[string]int{}
	var rejected int64 // stale holders' fenced writes, rightly rejected
	for _, seed := range seeds {
		h, srv := simulate(seed, dur, 6, 4)
		counts := map[string]int{}
		for _, o := range h.Ops {
			counts[o.Outcome]++
		}

		rs := All(h, opts)
		for _, r := range rs {
			if r.Valid != Valid {
				t.Errorf("seed %d: correct history: %s is %s\n%s", seed, r.Name, r.Valid, dump(r))
			}
		}
		t.Logf("seed %d: %d ops %v; lin %v; safety %v; fencing %v", seed, len(h.Ops), counts, rs[0].Stats, rs[1].Stats, rs[2].Stats)
		if rs[1].Stats["grants_certainly_held"] == 0 || rs[0].Stats["indeterminate_ops"] == 0 {
			t.Errorf("seed %d: the simulation exercises too little: %v %v", seed, rs[0].Stats, rs[1].Stats)
		}
		rejected += rs[2].Stats["fence_writes_rejected"]

		rng := rand.New(rand.NewSource(seed))
		bugs := []func() (*history.History, string){
			func() (*history.History, string) { return bugDropRelease(h, srv, rng) },
			func() (*history.History, string) { return bugFlipGet(h, rng) },
			func() (*history.History, string) { return bugDuplicateGrant(h, rng) },
		}
		for bi, bug := range bugs {
			bad, desc := bug()
			if bad == nil {
				t.Logf("seed %d: bug %d: no candidate", seed, bi)
				continue
			}
			injected[fmt.Sprint(bi)]++
			t0 := time.Now()
			rsBad := All(bad, opts)
			got := flagged(rsBad)
			if el := time.Since(t0); el > time.Second {
				t.Logf("seed %d: slow check (%v): %s: %v", seed, el, desc, rsBad[0].Elapsed)
			}
			if len(got) == 0 {
				t.Errorf("seed %d: injected bug not flagged: %s", seed, desc)
			} else {
				t.Logf("seed %d: %s -> %v", seed, desc, got)
			}
		}
	}
	if rejected == 0 {
		t.Error("no fenced write was ever rejected: the stale-holder case is not exercised")
	}
	for bi := 0; bi < 3; bi++ {
		if injected[fmt.Sprint(bi)] == 0 {
			t.Errorf("bug %d was never injected", bi)
		}
	}
}

// A server that lets leases run out early is caught by the clock-based
// checkers (the linear workload's leases outlive the run either way).
func TestSimulatedEarlyExpiry(t *testing.T) {
	caught := map[string]int{}
	for seed := int64(1); seed <= 4; seed++ {
		h, _ := simulate(seed, 6*time.Second, 0, 6, true)
		for _, r := range All(h, Options{}) {
			if r.Valid == Invalid {
				for _, a := range r.Anomalies {
					caught[r.Name+"/"+a.Kind]++
				}
			}
		}
	}
	t.Logf("caught: %v", caught)
	if caught[NameSafety+"/double-grant"] == 0 {
		t.Errorf("early expiry not caught by safety: %v", caught)
	}
}
