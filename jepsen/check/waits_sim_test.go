package check

import (
	"container/heap"
	"fmt"
	"math/rand"
	"sort"
	"testing"
	"time"

	"github.com/grackle-coord/grackle/apierr"
	"github.com/grackle-coord/grackle/jepsen/history"
)

// A simulated server keeping the wait-group and barrier contract
// (docs/API.md, Wait groups, Barriers): idempotent completion per job_id,
// all-or-none batches, COMPLETED in the commit of the counter-th job,
// expiry by the leader shortly after expires_at (and a completion past it
// refused, expiring the group in that commit), barrier arrivals counted
// once per (generation, process), idempotent for the current and the
// previous generation, the trip in the last arrival's commit, waiters
// woken by it, participants kept for two generations. Ops take effect at
// a random instant inside their interval; some end indeterminate (and did
// or did not happen), some fail for certain; a waiter is sometimes ended
// by a "leader change". Processes behave like the runner's workloads
// (runner/waits.go). No checker may flag its histories, and each of nine
// injected server bugs must be caught by the rule meant for it.

type waitBugs struct {
	earlyComplete  bool // COMPLETED at counter-1 jobs
	lostCompletion bool // every 4th batch with new jobs acknowledged, not applied
	doubleCount    bool // a job already completed counts again when sent again
	earlyExpire    bool // marked EXPIRED 300 ms before expires_at
	lateCompletion bool // new jobs accepted until the (250 ms late) expiry mark
	earlyTrip      bool // a barrier trips at expected-1 arrivals
	earlyRelease   bool // waiters released at expected-1 arrivals, without a trip
	lostArrival    bool // every 4th new arrival acknowledged, not counted
	staleRead      bool // a third of GetBarrier answers from the state 300 ms old
}

type wsEvent struct {
	t   time.Duration
	seq int
	fn  func()
}

type wsQueue []*wsEvent

func (q wsQueue) Len() int { return len(q) }
func (q wsQueue) Less(i, j int) bool {
	if q[i].t != q[j].t {
		return q[i].t < q[j].t
	}
	return q[i].seq < q[j].seq
}
func (q wsQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *wsQueue) Push(x any)   { *q = append(*q, x.(*wsEvent)) }
func (q *wsQueue) Pop() (x any) { old := *q; x = old[len(old)-1]; *q = old[:len(old)-1]; return x }

type swGroup struct {
	counter, expiresAt    int64
	jobs                  map[string]int64
	extra                 int64 // doubleCount
	status                string
	finishedAt, lastActiv int64
	waiters               []*swWaiter
	batches               int
}

type sbBarrier struct {
	expected int64
	gen      int64
	arrived  []string
	parts    map[int64][]string // tripped generations' participants (the previous one kept)
	waiters  []*swWaiter
	arrivals int
	genAt    []struct {
		t   time.Duration
		gen int64
	}
}

type swWaiter struct {
	gen  int64
	done bool
	fire func(outcome string) // answers the wait
}

type waitSim struct {
	rng   *rand.Rand
	bugs  waitBugs
	q     wsQueue
	seq   int
	now   time.Duration
	ops   []*history.Op
	wgs   map[string]*swGroup
	bars  map[string]*sbBarrier
	nwg   int
	alive []string // wait groups the processes work on
}

func (s *waitSim) at(t time.Duration, fn func()) {
	s.seq++
	heap.Push(&s.q, &wsEvent{t: t, seq: s.seq, fn: fn})
}

func (s *waitSim) ts() int64 { return int64(s.now) } // the leader's clock (ns)

func (s *waitSim) latency() time.Duration {
	if s.rng.Intn(25) == 0 {
		return time.Duration(50+s.rng.Intn(200)) * time.Millisecond
	}
	return time.Duration(500+s.rng.Intn(8000)) * time.Microsecond
}

func (s *waitSim) record(o *history.Op) {
	o.ID = len(s.ops) + 1
	s.ops = append(s.ops, o)
}

func wsIsRead(k string) bool {
	switch k {
	case history.WGGet, history.WGWait, history.WGJobs, history.BarrierGet, history.BarrierWait, history.BarrierParticipants:
		return true
	}
	return false
}

// call runs one op: sent now, applied (by apply, which fills the answer
// or returns a waiter) at a random instant, answered later; then done.
func (s *waitSim) call(o *history.Op, apply func(o *history.Op) *swWaiter, done func(o *history.Op)) {
	o.Invoke, o.Node = s.now, "n1"
	fate := "ok"
	switch x := s.rng.Intn(100); {
	case x < 3:
		fate = "info-happened"
	case x < 6:
		fate = "info-not"
	case x < 8:
		fate = "fail"
	}
	d := s.latency()
	lin := s.now + time.Duration(s.rng.Int63n(int64(d)+1))
	answer := func(t time.Duration) {
		s.at(t, func() {
			switch {
			case fate == "fail":
				*o = history.Op{Process: o.Process, Kind: o.Kind, Namespace: o.Namespace, WaitGroup: o.WaitGroup, Jobs: o.Jobs, Counter: o.Counter,
					ExpiresAt: o.ExpiresAt, Timeout: o.Timeout, Barrier: o.Barrier, Expected: o.Expected, BarrierProcess: o.BarrierProcess,
					Generation: o.Generation, Invoke: o.Invoke, Node: o.Node,
					Outcome: history.Fail, Code: "Unavailable", Reason: "NOT_LEADER", Error: "Unavailable: not the leader"}
			case fate != "ok" || o.Outcome == history.Info:
				o.Outcome = history.Info
				if wsIsRead(o.Kind) {
					o.Outcome = history.Fail
				}
				o.Error, o.Code, o.Reason = "DeadlineExceeded: context deadline exceeded", "DeadlineExceeded", ""
				o.WG, o.B, o.Newly, o.Listed, o.Participants, o.AllArrived, o.WaitOutcome, o.ErrStatus, o.CurrentGeneration, o.ListedGeneration =
					nil, nil, 0, nil, nil, false, "", "", 0, 0
			case o.Outcome == "":
				o.Outcome = history.OK
			}
			if o.Outcome != history.Info {
				o.Complete = s.now
			}
			s.record(o)
			done(o)
		})
	}
	s.at(lin, func() {
		if fate == "fail" || fate == "info-not" {
			answer(o.Invoke + d)
			return
		}
		w := apply(o)
		if w == nil {
			answer(max(o.Invoke+d, s.now+time.Millisecond))
			return
		}
		w.fire = func(outcome string) {
			if w.done {
				return
			}
			w.done = true
			o.WaitOutcome = outcome
			s.fillView(o)
			answer(s.now + s.latency()/4)
		}
		if s.rng.Intn(15) == 0 { // a leader change ends the wait
			s.at(s.now+time.Duration(s.rng.Int63n(int64(time.Duration(o.Timeout)*time.Second))), func() {
				if !w.done {
					w.done = true
					o.Outcome, o.Code, o.Reason, o.Error = history.Fail, "Unavailable", "", "Unavailable: leader changed"
					answer(s.now + time.Millisecond)
				}
			})
		}
		s.at(s.now+time.Duration(o.Timeout)*time.Second, func() { w.fire(history.WaitTimedOut) })
	})
}

// ---- wait groups ----

func (s *waitSim) wgView(g *swGroup) *history.WaitGroupView {
	return &history.WaitGroupView{Counter: g.counter, Completed: int64(len(g.jobs)) + g.extra, Status: g.status,
		ExpiresAt: g.expiresAt, FinishedAt: g.finishedAt, LastActivity: g.lastActiv}
}

func (s *waitSim) fillView(o *history.Op) {
	if g := s.wgs[o.WaitGroup]; o.WaitGroup != "" && g != nil {
		o.WG = s.wgView(g)
	}
	if b := s.bars[o.Barrier]; o.Barrier != "" && b != nil {
		o.B = &history.BarrierView{Expected: b.expected, Arrived: int64(len(b.arrived)), Generation: b.gen}
	}
}

func (s *waitSim) finish(g *swGroup, status string) {
	g.status, g.finishedAt = status, s.ts()
	outcome := map[string]string{history.WGCompleted: history.WaitCompleted, history.WGExpired: history.WaitExpired}[status]
	for _, w := range g.waiters {
		w.fire(outcome)
	}
	g.waiters = nil
}

func (s *waitSim) refuse(o *history.Op, code, reason string) {
	o.Outcome, o.Code, o.Reason, o.Error = history.Fail, code, reason, code+": refused"
}

func (s *waitSim) applyWG(o *history.Op) *swWaiter {
	g := s.wgs[o.WaitGroup]
	if o.Kind == history.WGCreate {
		if o.ExpiresAt != 0 && o.ExpiresAt <= s.ts() {
			s.refuse(o, "InvalidArgument", "")
			return nil
		}
		g = &swGroup{counter: o.Counter, expiresAt: o.ExpiresAt, jobs: map[string]int64{}, status: history.WGActive, lastActiv: s.ts()}
		s.wgs[o.WaitGroup] = g
		if g.expiresAt != 0 {
			lag := time.Duration(s.rng.Intn(50)) * time.Millisecond
			if s.bugs.earlyExpire {
				lag = -300 * time.Millisecond
			}
			if s.bugs.lateCompletion {
				lag = 250 * time.Millisecond
			}
			s.at(time.Duration(g.expiresAt)+lag, func() {
				if g.status == history.WGActive {
					s.finish(g, history.WGExpired)
				}
			})
		}
		s.fillView(o)
		return nil
	}
	if g == nil {
		s.refuse(o, "NotFound", apierr.WaitGroupNotFound)
		return nil
	}
	switch o.Kind {
	case history.WGGet:
		s.fillView(o)
	case history.WGJobs:
		for id, at := range g.jobs {
			o.Listed = append(o.Listed, history.WaitGroupJob{ID: id, CompletedAt: at})
		}
		sort.Slice(o.Listed, func(i, j int) bool { return o.Listed[i].ID < o.Listed[j].ID })
	case history.WGWait:
		if g.status != history.WGActive {
			o.WaitOutcome = map[string]string{history.WGCompleted: history.WaitCompleted, history.WGExpired: history.WaitExpired}[g.status]
			s.fillView(o)
			return nil
		}
		w := &swWaiter{}
		g.waiters = append(g.waiters, w)
		return w
	case history.WGComplete:
		var fresh []string
		seen := map[string]bool{}
		for _, j := range o.Jobs {
			if _, ok := g.jobs[j]; !ok && !seen[j] {
				fresh = append(fresh, j)
			}
			seen[j] = true
		}
		if len(fresh) == 0 {
			if s.bugs.doubleCount && g.status == history.WGActive && int64(len(g.jobs))+g.extra < g.counter-1 {
				g.extra++
			}
			s.fillView(o)
			return nil
		}
		if g.status == history.WGActive && g.expiresAt != 0 && s.ts() > g.expiresAt && !s.bugs.lateCompletion {
			s.finish(g, history.WGExpired) // expired at the leader's now: in this commit
		}
		if g.status != history.WGActive {
			s.refuse(o, "FailedPrecondition", apierr.WaitGroupNotActive)
			o.ErrStatus = g.status
			return nil
		}
		n := int64(len(g.jobs)) + g.extra
		if n+int64(len(fresh)) > g.counter {
			s.refuse(o, "InvalidArgument", "")
			return nil
		}
		g.batches++
		if s.bugs.lostCompletion && g.batches%4 == 0 {
			o.WG = s.wgView(g)
			o.WG.Completed += int64(len(fresh))
			o.Newly = int64(len(fresh))
			return nil
		}
		for _, j := range fresh {
			g.jobs[j] = s.ts()
		}
		g.lastActiv = s.ts()
		o.Newly = int64(len(fresh))
		n = int64(len(g.jobs)) + g.extra
		if n >= g.counter || s.bugs.earlyComplete && g.counter > 1 && n >= g.counter-1 {
			s.finish(g, history.WGCompleted)
		}
		s.fillView(o)
	}
	return nil
}

// ---- barriers ----

func (s *waitSim) trip(b *sbBarrier) {
	b.parts[b.gen] = b.arrived
	delete(b.parts, b.gen-1)
	old := b.gen
	b.gen++
	b.arrived = nil
	b.genAt = append(b.genAt, struct {
		t   time.Duration
		gen int64
	}{s.now, b.gen})
	var keep []*swWaiter
	for _, w := range b.waiters {
		if w.gen <= old {
			w.fire(history.WaitTripped)
		} else {
			keep = append(keep, w)
		}
	}
	b.waiters = keep
}

func (s *waitSim) mismatch(o *history.Op, b *sbBarrier) {
	s.refuse(o, "FailedPrecondition", apierr.GenerationMismatch)
	o.CurrentGeneration = b.gen
}

func (s *waitSim) applyBarrier(o *history.Op) *swWaiter {
	b := s.bars[o.Barrier]
	if o.Kind == history.BarrierCreate {
		b = &sbBarrier{expected: o.Expected, gen: 1, parts: map[int64][]string{}}
		s.bars[o.Barrier] = b
		s.fillView(o)
		return nil
	}
	if b == nil {
		s.refuse(o, "NotFound", apierr.BarrierNotFound)
		return nil
	}
	in := func(xs []string, x string) bool {
		for _, y := range xs {
			if y == x {
				return true
			}
		}
		return false
	}
	switch o.Kind {
	case history.BarrierGet:
		s.fillView(o)
		if s.bugs.staleRead && s.rng.Intn(3) == 0 {
			g := int64(1)
			for _, c := range b.genAt {
				if c.t <= s.now-300*time.Millisecond {
					g = c.gen
				}
			}
			o.B.Generation, o.B.Arrived = g, 0
		}
	case history.BarrierArrive:
		switch {
		case o.Generation == b.gen:
			if !in(b.arrived, o.BarrierProcess) {
				b.arrivals++
				if s.bugs.lostArrival && b.arrivals%4 == 0 {
					s.fillView(o)
					o.B.Arrived++
					return nil
				}
				b.arrived = append(b.arrived, o.BarrierProcess)
			}
			n := int64(len(b.arrived))
			if n >= b.expected || s.bugs.earlyTrip && b.expected > 1 && n >= b.expected-1 {
				s.trip(b)
				o.AllArrived = true
			} else if s.bugs.earlyRelease && n >= b.expected-1 {
				var keep []*swWaiter
				for _, w := range b.waiters {
					if w.gen == b.gen {
						w.fire(history.WaitTripped)
					} else {
						keep = append(keep, w)
					}
				}
				b.waiters = keep
			}
			s.fillView(o)
		case o.Generation == b.gen-1 && in(b.parts[o.Generation], o.BarrierProcess):
			o.AllArrived = true
			s.fillView(o)
		default:
			s.mismatch(o, b)
		}
	case history.BarrierWait:
		switch {
		case o.Generation < b.gen:
			o.WaitOutcome = history.WaitTripped
			s.fillView(o)
		case o.Generation == b.gen:
			w := &swWaiter{gen: o.Generation}
			b.waiters = append(b.waiters, w)
			return w
		default:
			s.mismatch(o, b)
		}
	case history.BarrierParticipants:
		g := o.Generation
		if g == 0 {
			g = b.gen
		}
		var ps []string
		switch {
		case g == b.gen:
			ps = b.arrived
		case g == b.gen-1:
			ps = b.parts[g]
		default:
			s.mismatch(o, b)
			return nil
		}
		o.ListedGeneration = g
		for _, p := range ps {
			o.Participants = append(o.Participants, history.Participant{Process: p, Generation: g})
		}
	}
	return nil
}

func (s *waitSim) apply(o *history.Op) *swWaiter {
	if isWaitGroupKind(o.Kind) {
		return s.applyWG(o)
	}
	return s.applyBarrier(o)
}

// ---- processes, as the runner's ----

type wsProc struct {
	id, gen int
	rng     *rand.Rand
	pause   time.Duration // before the next op ("work")
}

func (p *wsProc) pid() int { return p.id + 1000*p.gen }

func (s *waitSim) run(p *wsProc, dur time.Duration, step func(p *wsProc) (*history.Op, func(*history.Op))) {
	var loop func()
	loop = func() {
		if s.now > dur {
			return
		}
		o, after := step(p)
		if o == nil {
			s.at(s.now+time.Duration(5+p.rng.Intn(20))*time.Millisecond, loop)
			return
		}
		o.Process, o.Namespace = p.pid(), "jepsen"
		s.call(o, s.apply, func(o *history.Op) {
			if o.Outcome == history.Info {
				p.gen++
			}
			if after != nil {
				after(o)
			}
			s.at(s.now+time.Duration(p.rng.Intn(30))*time.Millisecond+p.pause, loop)
			p.pause = 0
		})
	}
	s.at(time.Duration(p.rng.Intn(5))*time.Millisecond, loop)
}

type wsWG struct {
	name    string
	counter int64
	pool    int
	done    bool
}

func simulateWaits(seed int64, dur time.Duration, bugs waitBugs) *history.History {
	s := &waitSim{rng: rand.New(rand.NewSource(seed)), bugs: bugs, wgs: map[string]*swGroup{}, bars: map[string]*sbBarrier{}}
	h := &history.History{Seed: seed, Nodes: 3, Duration: dur, Permits: map[string]int64{}, Meta: map[string]string{}}
	var groups []*wsWG
	active := func() []*wsWG {
		var out []*wsWG
		for _, g := range groups {
			if !g.done {
				out = append(out, g)
			}
		}
		return out
	}
	byName := map[string]*wsWG{}
	markDone := func(o *history.Op) {
		if g := byName[o.WaitGroup]; g != nil && (o.WG != nil && o.WG.Status != history.WGActive || o.Reason == apierr.WaitGroupNotActive) {
			g.done = true
		}
	}
	proc := func(id int) *wsProc { return &wsProc{id: id, rng: rand.New(rand.NewSource(seed*7919 + int64(id)))} }

	// The group creator keeps three groups going.
	s.run(proc(700), dur, func(p *wsProc) (*history.Op, func(*history.Op)) {
		if len(active()) >= 3 {
			return nil, nil
		}
		s.nwg++
		g := &wsWG{name: fmt.Sprintf("wg-%d", s.nwg), counter: 2 + p.rng.Int63n(7)}
		// A third expire soon, racing their completions (bigger, so that
		// some do expire).
		var exp int64
		if p.rng.Intn(3) == 0 {
			g.counter = 6 + p.rng.Int63n(9)
			exp = s.ts() + int64(time.Duration(100+p.rng.Intn(500))*time.Millisecond)
		}
		g.pool = int(g.counter)
		if p.rng.Intn(3) == 0 {
			g.pool++ // one job too many: some batches are refused
		}
		return &history.Op{Kind: history.WGCreate, WaitGroup: g.name, Counter: g.counter, ExpiresAt: exp}, func(o *history.Op) {
			if o.Outcome == history.OK {
				groups = append(groups, g)
				byName[g.name] = g
			}
		}
	})
	for i := 0; i < 4; i++ {
		s.run(proc(710+i), dur, func(p *wsProc) (*history.Op, func(*history.Op)) {
			as := active()
			if len(as) == 0 {
				return nil, nil
			}
			g := as[p.rng.Intn(len(as))]
			var js []string
			for k := 1 + p.rng.Intn(3); k > 0; k-- {
				js = append(js, fmt.Sprintf("j%d", p.rng.Intn(g.pool)))
			}
			return &history.Op{Kind: history.WGComplete, WaitGroup: g.name, Jobs: js}, markDone
		})
	}
	s.run(proc(720), dur, func(p *wsProc) (*history.Op, func(*history.Op)) {
		as := active()
		if len(as) == 0 {
			return nil, nil
		}
		return &history.Op{Kind: history.WGWait, WaitGroup: as[p.rng.Intn(len(as))].name, Timeout: 1}, markDone
	})
	s.run(proc(721), dur, func(p *wsProc) (*history.Op, func(*history.Op)) {
		if len(groups) == 0 {
			return nil, nil
		}
		g := groups[max(0, len(groups)-1-p.rng.Intn(5))]
		if p.rng.Intn(2) == 0 {
			return &history.Op{Kind: history.WGGet, WaitGroup: g.name}, markDone
		}
		return &history.Op{Kind: history.WGJobs, WaitGroup: g.name}, nil
	})

	// Barriers: two of three processes each, and an observer.
	for bi := 0; bi < 2; bi++ {
		name := fmt.Sprintf("b-%d", bi)
		created := false
		s.run(proc(800+10*bi), dur, func(p *wsProc) (*history.Op, func(*history.Op)) {
			if created {
				return nil, nil
			}
			return &history.Op{Kind: history.BarrierCreate, Barrier: name, Expected: 3}, func(o *history.Op) { created = o.Outcome == history.OK }
		})
		for k := 0; k < 3; k++ {
			bp := fmt.Sprintf("%s-p%d", name, k)
			gen, waiting := int64(1), false
			s.run(proc(801+10*bi+k), dur, func(p *wsProc) (*history.Op, func(*history.Op)) {
				if !created {
					return nil, nil
				}
				learn := func(o *history.Op) {
					if o.CurrentGeneration > gen {
						gen, waiting = o.CurrentGeneration, false
					}
				}
				if waiting {
					return &history.Op{Kind: history.BarrierWait, Barrier: name, Generation: gen, Timeout: 1}, func(o *history.Op) {
						learn(o)
						switch {
						case o.WaitOutcome == history.WaitTripped:
							gen, waiting = gen+1, false
							p.pause = time.Duration(p.rng.Intn(300)) * time.Millisecond
						case o.WaitOutcome == history.WaitTimedOut:
							waiting = false // arrive again (idempotent)
						}
					}
				}
				return &history.Op{Kind: history.BarrierArrive, Barrier: name, BarrierProcess: bp, Generation: gen}, func(o *history.Op) {
					learn(o)
					switch {
					case o.Outcome == history.OK && o.AllArrived:
						gen = o.Generation + 1
						p.pause = time.Duration(p.rng.Intn(300)) * time.Millisecond
					case o.Outcome == history.OK:
						waiting = true
					}
				}
			})
		}
		s.run(proc(809+10*bi), dur, func(p *wsProc) (*history.Op, func(*history.Op)) {
			if !created {
				return nil, nil
			}
			b := s.bars[name]
			switch p.rng.Intn(4) {
			case 0:
				return &history.Op{Kind: history.BarrierGet, Barrier: name}, nil
			case 1:
				return &history.Op{Kind: history.BarrierParticipants, Barrier: name}, nil
			case 2:
				// The previous generation, as far as the observer can tell.
				return &history.Op{Kind: history.BarrierParticipants, Barrier: name, Generation: max(1, b.gen-1)}, nil
			}
			return &history.Op{Kind: history.BarrierWait, Barrier: name, Generation: b.gen, Timeout: 1}, nil
		})
	}

	for s.q.Len() > 0 {
		e := heap.Pop(&s.q).(*wsEvent)
		s.now = e.t
		e.fn()
	}
	// Heal, then a fresh client reads everything.
	h.HealedAt = s.now + 50*time.Millisecond
	s.now = h.HealedAt + 10*time.Millisecond
	final := func(o *history.Op) {
		o.Process, o.Namespace, o.Invoke, o.Node = 9999, "jepsen", s.now, "n1"
		s.apply(o)
		if o.Outcome == "" {
			o.Outcome = history.OK
		}
		s.now += time.Millisecond
		o.Complete = s.now
		if h.ServedAgainAt == 0 {
			h.ServedAgainAt = o.Complete
		}
		s.record(o)
	}
	for _, g := range groups {
		final(&history.Op{Kind: history.WGGet, WaitGroup: g.name})
		final(&history.Op{Kind: history.WGJobs, WaitGroup: g.name})
	}
	for _, name := range []string{"b-0", "b-1"} {
		if b := s.bars[name]; b != nil {
			final(&history.Op{Kind: history.BarrierGet, Barrier: name})
			final(&history.Op{Kind: history.BarrierParticipants, Barrier: name})
			final(&history.Op{Kind: history.BarrierParticipants, Barrier: name, Generation: max(1, b.gen-1)})
		}
	}
	for _, o := range s.ops {
		h.Ops = append(h.Ops, *o)
	}
	sort.SliceStable(h.Ops, func(i, j int) bool { return h.Ops[i].Invoke < h.Ops[j].Invoke })
	return h
}

// Correct servers: neither checker flags anything, and the histories
// exercise what they look at.
func TestSimulatedWaitsCorrect(t *testing.T) {
	seeds := []int64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}
	if testing.Short() {
		seeds = seeds[:4]
	}
	total := map[string]int64{}
	for _, seed := range seeds {
		h := simulateWaits(seed, 8*time.Second, waitBugs{})
		counts := map[string]int{}
		for _, o := range h.Ops {
			counts[o.Kind+":"+o.Outcome+o.WaitOutcome]++
		}
		for _, r := range All(h, Options{}) {
			if r.Valid != Valid && r.Name != NameLinearizability {
				t.Errorf("seed %d: correct history: %s is %s\n%s", seed, r.Name, r.Valid, dump(r))
			}
			if r.Name == NameWaitGroups || r.Name == NameBarriers {
				for k, v := range r.Stats {
					total[r.Name+"."+k] += v
				}
			}
		}
		t.Logf("seed %d: %d ops %v", seed, len(h.Ops), counts)
	}
	t.Logf("stats over all seeds: %v", total)
	for _, k := range []string{"waitgroup.groups_completed", "waitgroup.groups_expired", "waitgroup.completed_observations",
		"barrier.generations_tripped", "barrier.waits_tripped", "barrier.participant_reads"} {
		if total[k] == 0 {
			t.Errorf("the simulation never exercises %s", k)
		}
	}
}

// Each server bug is caught by the rule meant for it in many seeds (a
// seed's history is fixed).
func TestSimulatedWaitBugs(t *testing.T) {
	seeds := []int64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}
	for _, c := range []struct {
		name    string
		bugs    waitBugs
		checker string
		kind    string
	}{
		{"wait group completed early", waitBugs{earlyComplete: true}, NameWaitGroups, "wg-early-complete"},
		{"completion lost", waitBugs{lostCompletion: true}, NameWaitGroups, "wg-lost-completion"},
		{"retried job counted twice", waitBugs{doubleCount: true}, NameWaitGroups, "wg-phantom"},
		{"expired early", waitBugs{earlyExpire: true}, NameWaitGroups, "wg-early-expire"},
		{"completion accepted after expires_at", waitBugs{lateCompletion: true}, NameWaitGroups, "wg-late-completion"},
		{"barrier tripped early", waitBugs{earlyTrip: true}, NameBarriers, "barrier-early-trip"},
		{"waiters released early", waitBugs{earlyRelease: true}, NameBarriers, "barrier-early-release"},
		{"arrival lost", waitBugs{lostArrival: true}, NameBarriers, "barrier-lost-arrival"},
		{"stale generation read", waitBugs{staleRead: true}, NameBarriers, "barrier-regressed"},
	} {
		caught := 0
		for _, seed := range seeds {
			h := simulateWaits(seed, 8*time.Second, c.bugs)
			r := map[string]Result{NameWaitGroups: WaitGroups(h), NameBarriers: Barriers(h)}[c.checker]
			if r.Stats["anomaly:"+c.kind] == 0 { // counted also past the listed ones
				continue
			}
			caught++
			for _, a := range r.Anomalies {
				if a.Kind == c.kind && caught == 1 {
					t.Logf("%s, seed %d: %s: %s", c.name, seed, a.Kind, a.Description)
					break
				}
			}
		}
		t.Logf("%s: caught in %d of %d seeds", c.name, caught, len(seeds))
		if caught*3 < len(seeds) {
			t.Errorf("%s: caught in only %d of %d seeds", c.name, caught, len(seeds))
		}
	}
}
