package fsm

import (
	"bytes"
	"fmt"
	"math/rand"
	"os"
	"reflect"
	"sort"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	fsmpb "github.com/grackle-coord/grackle/proto/grackle/fsm/v1"
	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
)

// A tiny reference model of API.md's "Wait groups" and "Barriers" (plain
// maps and slices), and a randomized test that drives the FSM and the
// model with the same wait-group and barrier commands and compares every
// result and everything readable after every step.
//
// Reproduce a failure with the seed it prints:
//
//	GRACKLE_FSM_SEED=<seed> GRACKLE_FSM_SEQS=1 go test -run TestWaitsRandomAgainstModel ./fsm/

type wmJob struct {
	at int64
	md string
}

type wmWG struct {
	desc, md                                       string
	counter                                        int64
	jobs                                           map[string]wmJob
	status                                         pb.WaitGroupStatus
	exp, keep, fin, version, created, updated, act int64
}

type wmArr struct {
	proc string
	at   int64
	md   string
}

type wmBar struct {
	desc, md                                            string
	expected, gen, keep, version, created, updated, act int64
	cur, prev                                           []wmArr
}

type wmNS struct {
	wgs  map[string]*wmWG
	bars map[string]*wmBar
}

type waitModel struct {
	ns     map[string]*wmNS
	now    int64
	limits Limits
}

func newWaitModel() *waitModel { return &waitModel{ns: map[string]*wmNS{}, limits: DefaultLimits()} }

// effective is the group's status and finished_at as read at now.
func (w *wmWG) effective(now int64) (pb.WaitGroupStatus, int64) {
	if w.status == wgActive && w.exp > 0 && w.exp <= now {
		return wgExpired, w.exp
	}
	return w.status, w.fin
}

func (w *wmWG) view(name string, now int64) *pb.WaitGroup {
	st, fin := w.effective(now)
	return &pb.WaitGroup{Name: name, Description: w.desc, Counter: w.counter, CompletedJobs: int64(len(w.jobs)), Status: st,
		ExpiresAt: w.exp, DeleteAfterFinishedSeconds: w.keep, FinishedAt: fin, Metadata: md("v", w.md), Version: w.version,
		CreatedAt: w.created, UpdatedAt: w.updated, LastActivityAt: w.act}
}

func (b *wmBar) view(name string) *pb.Barrier {
	return &pb.Barrier{Name: name, Description: b.desc, ExpectedProcesses: b.expected, ArrivedProcesses: int64(len(b.cur)),
		Generation: b.gen, DeleteInactiveAfterSeconds: b.keep, Metadata: md("v", b.md), Version: b.version,
		CreatedAt: b.created, UpdatedAt: b.updated, LastActivityAt: b.act}
}

func arrivedIn(as []wmArr, proc string) bool {
	for _, a := range as {
		if a.proc == proc {
			return true
		}
	}
	return false
}

// wmTimer is a time-driven change, ordered as ExpireTimers applies them.
type wmTimer struct {
	at       int64
	kind     int
	ns, name string
}

func (m *waitModel) timers() []wmTimer {
	var ts []wmTimer
	for nsName, ns := range m.ns {
		for name, w := range ns.wgs {
			switch {
			case w.status == wgActive && w.exp > 0:
				ts = append(ts, wmTimer{w.exp, 1, nsName, name})
			case w.status != wgActive && w.keep > 0:
				ts = append(ts, wmTimer{w.fin + w.keep*sec, 2, nsName, name})
			}
		}
		for name, b := range ns.bars {
			if b.keep > 0 {
				ts = append(ts, wmTimer{b.act + b.keep*sec, 3, nsName, name})
			}
		}
	}
	sort.Slice(ts, func(i, j int) bool {
		a, b := ts[i], ts[j]
		if a.at != b.at {
			return a.at < b.at
		}
		if a.kind != b.kind {
			return a.kind < b.kind
		}
		if a.ns != b.ns {
			return a.ns < b.ns
		}
		return a.name < b.name
	})
	return ts
}

// wExp is what the model says a command returns.
type wExp struct {
	code       Code
	reason     string
	meta       map[string]string
	newJobs    int64
	allArrived bool
	existed    bool
	woken      []WaitKey
	wg         *pb.WaitGroup
	bar        *pb.Barrier
}

func (e *wExp) fail(code Code, reason string, kv ...string) {
	e.code, e.reason = code, reason
	if len(kv) > 0 {
		e.meta = md(kv...)
	}
}

const wmBad = "bad name" // the generator's invalid name, job id

func sortedKeys2[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

func (m *waitModel) apply(c *fsmpb.Command) (e wExp) {
	now := max(c.Now, m.now)
	m.now = now
	L := m.limits
	badKeep := func(v int64) bool { return v < 0 || v > MaxKeepSeconds }
	nsOf := func(name string) *wmNS {
		ns := m.ns[name]
		if ns == nil {
			e.fail(CodeNotFound, ReasonNamespaceNotFound)
		}
		return ns
	}
	switch op := c.GetOp().(type) {
	case *fsmpb.Command_CreateNamespace:
		if m.ns[op.CreateNamespace.Name] != nil {
			e.fail(CodeAlreadyExists, "")
			return
		}
		m.ns[op.CreateNamespace.Name] = &wmNS{wgs: map[string]*wmWG{}, bars: map[string]*wmBar{}}
	case *fsmpb.Command_DeleteNamespace:
		ns := m.ns[op.DeleteNamespace.Name]
		if ns == nil {
			return
		}
		for _, name := range sortedKeys2(ns.wgs) {
			e.woken = append(e.woken, wgKey(op.DeleteNamespace.Name, name))
		}
		for _, name := range sortedKeys2(ns.bars) {
			e.woken = append(e.woken, barKeyW(op.DeleteNamespace.Name, name))
		}
		delete(m.ns, op.DeleteNamespace.Name)
	case *fsmpb.Command_SetLimits:
		m.limits = limitsFrom(op.SetLimits)
	case *fsmpb.Command_CreateWaitGroup:
		x := op.CreateWaitGroup
		if x.Name == wmBad || x.Counter < 1 || x.Counter > L.MaxWaitGroupCounter || badKeep(x.DeleteAfterFinishedSeconds) ||
			(x.ExpiresAt != 0 && x.ExpiresAt <= now) {
			e.fail(CodeInvalidArgument, "")
			return
		}
		ns := nsOf(x.NamespaceName)
		switch {
		case ns == nil:
		case ns.wgs[x.Name] != nil:
			e.fail(CodeAlreadyExists, "")
		case int64(len(ns.wgs)) >= L.MaxWaitGroupsPerNamespace:
			e.fail(CodeResourceExhausted, "")
		default:
			w := &wmWG{desc: x.Description, md: x.Metadata["v"], counter: x.Counter, jobs: map[string]wmJob{}, status: wgActive,
				exp: x.ExpiresAt, keep: x.DeleteAfterFinishedSeconds, version: 1, created: now, updated: now, act: now}
			ns.wgs[x.Name] = w
			e.wg = w.view(x.Name, now)
		}
	case *fsmpb.Command_UpdateWaitGroup:
		x := op.UpdateWaitGroup
		if x.Name == wmBad || x.Counter < 1 || x.Counter > L.MaxWaitGroupCounter || badKeep(x.DeleteAfterFinishedSeconds) || x.ExpectedVersion < 1 {
			e.fail(CodeInvalidArgument, "")
			return
		}
		ns := nsOf(x.NamespaceName)
		if ns == nil {
			return
		}
		w := ns.wgs[x.Name]
		if w == nil {
			e.fail(CodeNotFound, ReasonWaitGroupNotFound)
			return
		}
		st, _ := w.effective(now)
		switch {
		case w.version != x.ExpectedVersion:
			e.fail(CodeInvalidArgument, "")
		case st != wgActive:
			e.fail(CodeFailedPrecondition, ReasonWaitGroupNotActive, MetaStatus, st.String())
		case x.ExpiresAt != w.exp && x.ExpiresAt != 0 && x.ExpiresAt <= now:
			e.fail(CodeInvalidArgument, "")
		case x.Counter < int64(len(w.jobs)):
			e.fail(CodeFailedPrecondition, "")
		default:
			w.desc, w.md, w.counter, w.exp, w.keep = x.Description, x.Metadata["v"], x.Counter, x.ExpiresAt, x.DeleteAfterFinishedSeconds
			w.version, w.updated = w.version+1, now
			if int64(len(w.jobs)) == w.counter {
				w.status, w.fin = wgCompleted, now
				e.woken = append(e.woken, wgKey(x.NamespaceName, x.Name))
			}
			e.wg = w.view(x.Name, now)
		}
	case *fsmpb.Command_DeleteWaitGroup:
		x := op.DeleteWaitGroup
		if x.Name == wmBad {
			e.fail(CodeInvalidArgument, "")
			return
		}
		ns := nsOf(x.NamespaceName)
		if ns == nil || ns.wgs[x.Name] == nil {
			return
		}
		delete(ns.wgs, x.Name)
		e.existed = true
		e.woken = append(e.woken, wgKey(x.NamespaceName, x.Name))
	case *fsmpb.Command_CompleteJobs:
		x := op.CompleteJobs
		bad := x.Name == wmBad || len(x.Jobs) < 1 || int64(len(x.Jobs)) > L.MaxJobsPerCall
		for _, j := range x.Jobs {
			bad = bad || j.JobId == wmBad
		}
		if bad {
			e.fail(CodeInvalidArgument, "")
			return
		}
		ns := nsOf(x.NamespaceName)
		if ns == nil {
			return
		}
		w := ns.wgs[x.Name]
		if w == nil {
			e.fail(CodeNotFound, ReasonWaitGroupNotFound)
			return
		}
		fresh := map[string]wmJob{}
		var order []string
		for _, j := range x.Jobs {
			if _, done := w.jobs[j.JobId]; done {
				continue
			}
			if _, dup := fresh[j.JobId]; dup {
				continue
			}
			fresh[j.JobId] = wmJob{at: now, md: j.Metadata["n"]}
			order = append(order, j.JobId)
		}
		st, _ := w.effective(now)
		switch {
		case len(fresh) == 0:
			e.wg = w.view(x.Name, now)
		case st != wgActive:
			e.fail(CodeFailedPrecondition, ReasonWaitGroupNotActive, MetaStatus, st.String())
		case int64(len(w.jobs)+len(fresh)) > w.counter:
			e.fail(CodeInvalidArgument, "")
		default:
			for _, id := range order {
				w.jobs[id] = fresh[id]
			}
			w.act = now
			if int64(len(w.jobs)) == w.counter {
				w.status, w.fin = wgCompleted, now
				e.woken = append(e.woken, wgKey(x.NamespaceName, x.Name))
			}
			e.newJobs = int64(len(fresh))
			e.wg = w.view(x.Name, now)
		}
	case *fsmpb.Command_CreateBarrier:
		x := op.CreateBarrier
		if x.Name == wmBad || x.ExpectedProcesses < 1 || x.ExpectedProcesses > L.MaxBarrierProcesses || badKeep(x.DeleteInactiveAfterSeconds) {
			e.fail(CodeInvalidArgument, "")
			return
		}
		ns := nsOf(x.NamespaceName)
		switch {
		case ns == nil:
		case ns.bars[x.Name] != nil:
			e.fail(CodeAlreadyExists, "")
		case int64(len(ns.bars)) >= L.MaxBarriersPerNamespace:
			e.fail(CodeResourceExhausted, "")
		default:
			b := &wmBar{desc: x.Description, md: x.Metadata["v"], expected: x.ExpectedProcesses, gen: 1, keep: x.DeleteInactiveAfterSeconds,
				version: 1, created: now, updated: now, act: now}
			ns.bars[x.Name] = b
			e.bar = b.view(x.Name)
		}
	case *fsmpb.Command_UpdateBarrier:
		x := op.UpdateBarrier
		if x.Name == wmBad || x.ExpectedProcesses < 1 || x.ExpectedProcesses > L.MaxBarrierProcesses || badKeep(x.DeleteInactiveAfterSeconds) || x.ExpectedVersion < 1 {
			e.fail(CodeInvalidArgument, "")
			return
		}
		ns := nsOf(x.NamespaceName)
		if ns == nil {
			return
		}
		b := ns.bars[x.Name]
		switch {
		case b == nil:
			e.fail(CodeNotFound, ReasonBarrierNotFound)
		case b.version != x.ExpectedVersion:
			e.fail(CodeInvalidArgument, "")
		case x.ExpectedProcesses < int64(len(b.cur)):
			e.fail(CodeFailedPrecondition, "")
		default:
			b.desc, b.md, b.expected, b.keep = x.Description, x.Metadata["v"], x.ExpectedProcesses, x.DeleteInactiveAfterSeconds
			b.version, b.updated = b.version+1, now
			if len(b.cur) > 0 && int64(len(b.cur)) == b.expected {
				b.prev, b.cur, b.gen = b.cur, nil, b.gen+1
				e.allArrived = true
				e.woken = append(e.woken, barKeyW(x.NamespaceName, x.Name))
			}
			e.bar = b.view(x.Name)
		}
	case *fsmpb.Command_DeleteBarrier:
		x := op.DeleteBarrier
		if x.Name == wmBad {
			e.fail(CodeInvalidArgument, "")
			return
		}
		ns := nsOf(x.NamespaceName)
		if ns == nil || ns.bars[x.Name] == nil {
			return
		}
		delete(ns.bars, x.Name)
		e.existed = true
		e.woken = append(e.woken, barKeyW(x.NamespaceName, x.Name))
	case *fsmpb.Command_ArriveAtBarrier:
		x := op.ArriveAtBarrier
		if x.Name == wmBad || x.ProcessId == "" || x.ExpectedGeneration < 1 {
			e.fail(CodeInvalidArgument, "")
			return
		}
		ns := nsOf(x.NamespaceName)
		if ns == nil {
			return
		}
		b := ns.bars[x.Name]
		if b == nil {
			e.fail(CodeNotFound, ReasonBarrierNotFound)
			return
		}
		g := x.ExpectedGeneration
		switch {
		case g == b.gen && arrivedIn(b.cur, x.ProcessId):
		case g == b.gen:
			b.cur = append(b.cur, wmArr{proc: x.ProcessId, at: now, md: x.Metadata["v"]})
			b.act = now
			if int64(len(b.cur)) >= b.expected {
				b.prev, b.cur, b.gen = b.cur, nil, b.gen+1
				e.allArrived = true
				e.woken = append(e.woken, barKeyW(x.NamespaceName, x.Name))
			}
		case g == b.gen-1 && arrivedIn(b.prev, x.ProcessId):
			e.allArrived = true
		default:
			e.fail(CodeFailedPrecondition, ReasonGenerationMismatch, MetaCurrentGeneration, fmt.Sprint(b.gen))
			return
		}
		e.bar = b.view(x.Name)
	case *fsmpb.Command_ExpireTimers:
		ts := m.timers()
		for i, t := range ts {
			if t.at > now || (op.ExpireTimers.Max > 0 && i >= int(op.ExpireTimers.Max)) {
				break
			}
			ns := m.ns[t.ns]
			switch t.kind {
			case 1:
				w := ns.wgs[t.name]
				w.status, w.fin = wgExpired, w.exp
				e.woken = append(e.woken, wgKey(t.ns, t.name))
			case 2:
				delete(ns.wgs, t.name)
				e.woken = append(e.woken, wgKey(t.ns, t.name))
			case 3:
				delete(ns.bars, t.name)
				e.woken = append(e.woken, barKeyW(t.ns, t.name))
			}
		}
	default:
		panic(fmt.Sprintf("the wait model has no %T", op))
	}
	return
}

func compareWaitResult(r *Result, e wExp) error {
	if r.Err != nil || e.code != 0 {
		if r.Err == nil {
			return fmt.Errorf("succeeded, model says %v (%s)", e.code, e.reason)
		}
		if e.code == 0 {
			return fmt.Errorf("failed with %v, model says success", r.Err)
		}
		// The model says a command is invalid, not which check refuses it
		// first: a refused bound (OUT_OF_RANGE) is one of them.
		reason := r.Err.Reason
		if e.code == CodeInvalidArgument && e.reason == "" && reason == ReasonOutOfRange {
			reason = ""
		}
		if r.Err.Code != e.code || reason != e.reason {
			return fmt.Errorf("failed with %v (reason %q), model says %v (%q)", r.Err, r.Err.Reason, e.code, e.reason)
		}
		for k, v := range e.meta {
			if r.Err.Meta[k] != v {
				return fmt.Errorf("error %v: meta %v, model %v", r.Err, r.Err.Meta, e.meta)
			}
		}
		return nil
	}
	if r.NewJobs != e.newJobs || r.AllArrived != e.allArrived || r.Existed != e.existed {
		return fmt.Errorf("new jobs %d, all arrived %v, existed %v; model %d %v %v", r.NewJobs, r.AllArrived, r.Existed, e.newJobs, e.allArrived, e.existed)
	}
	if !(len(r.Woken) == 0 && len(e.woken) == 0) && !reflect.DeepEqual(r.Woken, e.woken) {
		return fmt.Errorf("woken %v, model %v", r.Woken, e.woken)
	}
	if e.wg != nil && !proto.Equal(r.WaitGroup, e.wg) {
		return fmt.Errorf("wait group %v, model %v", r.WaitGroup, e.wg)
	}
	if e.bar != nil && !proto.Equal(r.Barrier, e.bar) {
		return fmt.Errorf("barrier %v, model %v", r.Barrier, e.bar)
	}
	return nil
}

func compareWaitState(f *FSM, m *waitModel, at int64) error {
	for _, nsName := range wmNamespaces {
		ns := m.ns[nsName]
		wgs, err := f.ListWaitGroups(nsName, 250, "", at)
		if ns == nil {
			if err == nil {
				return fmt.Errorf("namespace %s lists wait groups, the model has none", nsName)
			}
			continue
		}
		if err != nil {
			return err
		}
		names := sortedKeys2(ns.wgs)
		if len(wgs.Items) != len(names) {
			return fmt.Errorf("%s: %d wait groups, model %v", nsName, len(wgs.Items), names)
		}
		for i, name := range names {
			w := ns.wgs[name]
			if want := w.view(name, min(at, m.now)); !proto.Equal(wgs.Items[i], want) { // reads judge expiry no later than the newest command (settledNow)
				return fmt.Errorf("wait group %s/%s at +%dms:\n %v\nmodel %v", nsName, name, (at-epoch)/1e6, wgs.Items[i], want)
			}
			js, err := f.ListWaitGroupCompletedJobs(nsName, name, 250, "", at)
			if err != nil {
				return err
			}
			ids := sortedKeys2(w.jobs)
			if len(js.Items) != len(ids) {
				return fmt.Errorf("%s/%s: jobs %v, model %v", nsName, name, jobIDs(js.Items), ids)
			}
			for i, id := range ids {
				j := js.Items[i]
				if j.JobId != id || j.CompletedAt != w.jobs[id].at || j.Metadata["n"] != w.jobs[id].md {
					return fmt.Errorf("%s/%s: job %v, model %s %+v", nsName, name, j, id, w.jobs[id])
				}
			}
		}
		bars, err := f.ListBarriers(nsName, 250, "")
		if err != nil {
			return err
		}
		names = sortedKeys2(ns.bars)
		if len(bars.Items) != len(names) {
			return fmt.Errorf("%s: %d barriers, model %v", nsName, len(bars.Items), names)
		}
		for i, name := range names {
			b := ns.bars[name]
			if want := b.view(name); !proto.Equal(bars.Items[i], want) {
				return fmt.Errorf("barrier %s/%s:\n %v\nmodel %v", nsName, name, bars.Items[i], want)
			}
			queries := []struct {
				gen  int64
				want []wmArr
			}{{0, b.cur}, {b.gen, b.cur}}
			if b.gen > 1 {
				queries = append(queries, struct {
					gen  int64
					want []wmArr
				}{b.gen - 1, b.prev})
			}
			for _, q := range queries {
				p, g, err := f.ListBarrierParticipants(nsName, name, q.gen, 250, "")
				if err != nil {
					return fmt.Errorf("%s/%s participants of %d: %v", nsName, name, q.gen, err)
				}
				wantGen := q.gen
				if wantGen == 0 {
					wantGen = b.gen
				}
				if g != wantGen || len(p.Items) != len(q.want) {
					return fmt.Errorf("%s/%s participants of %d: generation %d, %v; model %d %+v", nsName, name, q.gen, g, procsOf(p.Items), wantGen, q.want)
				}
				for i, a := range q.want {
					x := p.Items[i]
					if x.ProcessId != a.proc || x.ArrivedAt != a.at || x.Metadata["v"] != a.md || x.Generation != wantGen {
						return fmt.Errorf("%s/%s participant %d of %d: %v, model %+v", nsName, name, i, wantGen, x, a)
					}
				}
			}
			for _, gen := range []int64{b.gen - 2, b.gen + 1} {
				if gen < 1 {
					continue
				}
				_, _, err := f.ListBarrierParticipants(nsName, name, gen, 250, "")
				if fe, ok := err.(*Error); !ok || fe.Reason != ReasonGenerationMismatch {
					return fmt.Errorf("%s/%s participants of generation %d at %d: %v", nsName, name, gen, b.gen, err)
				}
			}
		}
	}
	ts := m.timers()
	at2, ok := f.NextTimer()
	if (len(ts) > 0) != ok || (ok && ts[0].at != at2) {
		return fmt.Errorf("next timer %d %v, model %+v", at2, ok, ts)
	}
	if f.Limits() != m.limits {
		return fmt.Errorf("limits %+v, model %+v", f.Limits(), m.limits)
	}
	return nil
}

// ---- the generator ----

var (
	wmNamespaces = []string{"a", "b"}
	wmGroups     = []string{"g1", "g2", "g3"}
	wmBarriers   = []string{"b1", "b2"}
	wmProcs      = []string{"p1", "p2", "p3", "p4"}
)

type waitGen struct {
	r   *rand.Rand
	m   *waitModel
	now func() int64
}

func (g *waitGen) pick(xs []string) string { return xs[g.r.Intn(len(xs))] }

func (g *waitGen) ns() string {
	if g.r.Intn(40) == 0 {
		return "zz" // missing
	}
	return g.pick(wmNamespaces)
}

func (g *waitGen) name(xs []string) string {
	if g.r.Intn(40) == 0 {
		return wmBad
	}
	return g.pick(xs)
}

// existing is mostly an existing name of ns's (from names), else any.
func existingName[V any](g *waitGen, m map[string]V, names []string) string {
	if len(m) > 0 && g.r.Intn(5) != 0 {
		ks := sortedKeys2(m)
		return ks[g.r.Intn(len(ks))]
	}
	return g.name(names)
}

func (g *waitGen) group(ns string) string {
	if n := g.m.ns[ns]; n != nil {
		return existingName(g, n.wgs, wmGroups)
	}
	return g.name(wmGroups)
}

func (g *waitGen) bar(ns string) string {
	if n := g.m.ns[ns]; n != nil {
		return existingName(g, n.bars, wmBarriers)
	}
	return g.name(wmBarriers)
}

func (g *waitGen) digit() string { return fmt.Sprint(g.r.Intn(3)) }

func (g *waitGen) expires() int64 {
	switch k := g.r.Intn(10); {
	case k < 4:
		return 0
	case k == 4:
		return g.now() - int64(g.r.Intn(2))*sec // now or past: refused
	default:
		return g.now() + int64(1+g.r.Intn(5000))*int64(time.Millisecond)
	}
}

func (g *waitGen) keep() int64 {
	switch k := g.r.Intn(12); {
	case k == 0:
		return MaxKeepSeconds + 1
	case k < 5:
		return 0
	default:
		return int64(1 + g.r.Intn(3))
	}
}

func (g *waitGen) count(max int64) int64 {
	switch k := g.r.Intn(15); {
	case k == 0:
		return 0
	case k == 1:
		return max + 1
	default:
		return int64(1 + g.r.Intn(4))
	}
}

func (g *waitGen) version(cur int64) int64 {
	if g.r.Intn(6) == 0 {
		return cur + int64(g.r.Intn(3)) - 1
	}
	return cur
}

func (g *waitGen) wgVersion(ns, name string) int64 {
	if n := g.m.ns[ns]; n != nil && n.wgs[name] != nil {
		return g.version(n.wgs[name].version)
	}
	return 1
}

func (g *waitGen) barrier(ns, name string) *wmBar {
	if n := g.m.ns[ns]; n != nil {
		return n.bars[name]
	}
	return nil
}

func (g *waitGen) command() *fsmpb.Command {
	r := g.r
	L := g.m.limits
	switch k := r.Intn(100); {
	case k < 8:
		return cWGFull(g.ns(), g.name(wmGroups), "d"+g.digit(), g.count(L.MaxWaitGroupCounter), g.expires(), g.keep(), md("v", g.digit()))
	case k < 14:
		ns := g.ns()
		name := g.group(ns)
		return cWGUpdate(ns, name, "d"+g.digit(), g.count(L.MaxWaitGroupCounter), g.expires(), g.keep(), md("v", g.digit()), g.wgVersion(ns, name))
	case k < 17:
		ns := g.ns()
		name := g.group(ns)
		var c *fsmpb.Command
		if n := g.m.ns[ns]; n != nil && n.wgs[name] != nil && r.Intn(2) == 0 {
			// Keep the expiry: updates of other fields.
			w := n.wgs[name]
			c = cWGUpdate(ns, name, "e", w.counter+int64(r.Intn(3))-1, w.exp, w.keep, md("v", "u"), w.version)
		} else {
			c = cWGDelete(ns, name)
		}
		return c
	case k < 40:
		n := 1 + r.Intn(4)
		switch r.Intn(40) {
		case 0:
			n = int(L.MaxJobsPerCall) + 1
		case 1:
			n = 0
		}
		var js []*fsmpb.JobCompletion
		for i := 0; i < n; i++ {
			id := fmt.Sprintf("j%d", r.Intn(6))
			if r.Intn(60) == 0 {
				id = wmBad
			}
			js = append(js, job(id, "n", g.digit()))
		}
		ns := g.ns()
		return cJobs(ns, g.group(ns), js...)
	case k < 48:
		return cBarFull(g.ns(), g.name(wmBarriers), "d"+g.digit(), g.count(L.MaxBarrierProcesses), g.keep(), md("v", g.digit()))
	case k < 53:
		ns := g.ns()
		name := g.bar(ns)
		ver := int64(1)
		expected := g.count(L.MaxBarrierProcesses)
		if b := g.barrier(ns, name); b != nil {
			ver = g.version(b.version)
			if r.Intn(2) == 0 {
				expected = int64(len(b.cur)) + int64(r.Intn(3)) - 1 // at, just below or above the arrivals
			}
		}
		return cBarUpdate(ns, name, "d"+g.digit(), expected, g.keep(), md("v", g.digit()), ver)
	case k < 55:
		return cBarDelete(g.ns(), g.name(wmBarriers))
	case k < 82:
		ns := g.ns()
		name := g.bar(ns)
		gen := int64(1)
		if b := g.barrier(ns, name); b != nil {
			gen = b.gen
			switch x := r.Intn(12); {
			case x < 3:
				gen = b.gen - 1
			case x == 3:
				gen = b.gen - 2
			case x == 4:
				gen = b.gen + 1
			}
		}
		proc := g.pick(wmProcs)
		if r.Intn(50) == 0 {
			proc = ""
		}
		return cArriveMD(ns, name, proc, gen, md("v", g.digit()))
	case k < 94:
		return cTimers(int32(r.Intn(3)))
	case k < 96:
		l := DefaultLimits()
		if r.Intn(2) == 0 {
			l.MaxWaitGroupsPerNamespace, l.MaxBarriersPerNamespace = 2, 1
			l.MaxWaitGroupCounter, l.MaxBarrierProcesses, l.MaxJobsPerCall = 3, 2, 3
		}
		return cLimits(l)
	case k < 97:
		return cNSDelete(g.pick(wmNamespaces))
	default:
		return cNS(g.pick(wmNamespaces))
	}
}

// waitSequence runs one seeded sequence against a fresh FSM and the model;
// it returns the first divergence. log, if not nil, gets the commands.
func waitSequence(seed int64, steps int, stats map[string]int, log *[]*fsmpb.Command) error {
	r := rand.New(rand.NewSource(seed))
	f := New(Options{})
	m := newWaitModel()
	clock := epoch
	g := &waitGen{r: r, m: m, now: func() int64 { return max(clock, m.now) }}
	restoreAt := -1
	if r.Intn(6) == 0 {
		restoreAt = r.Intn(steps)
	}
	setup := []*fsmpb.Command{cNS("a"), cNS("b")}
	var history []*fsmpb.Command
	for step := 0; step < steps+len(setup); step++ {
		switch x := r.Intn(20); {
		case x == 0:
			clock += int64(1+r.Intn(4)) * sec // a jump: expiries and deletions fall due
		case x < 12:
			clock += int64(r.Intn(400)) * int64(time.Millisecond)
		}
		var c *fsmpb.Command
		if step < len(setup) {
			c = setup[step]
		} else {
			c = g.command()
		}
		c.Now = clock
		if r.Intn(20) == 0 {
			c.Now = clock - int64(r.Intn(2000))*int64(time.Millisecond) // an older clock
		}
		history = append(history, c)
		if log != nil {
			*log = append(*log, c)
		}
		fail := func(err error) error {
			start := max(len(history)-15, 0)
			s := ""
			for i, c := range history[start:] {
				s += fmt.Sprintf("  %d: now=+%dms %s %v\n", start+i+1, (c.Now-epoch)/1e6, opName(c), c.GetOp())
			}
			return fmt.Errorf("seed %d, step %d: %v\nlast commands:\n%s", seed, step, err, s)
		}
		res := f.ApplyCommand(uint64(step+1), c)
		want := m.apply(c)
		if err := compareWaitResult(res, want); err != nil {
			return fail(err)
		}
		if stats != nil {
			key := opName(c) + " ok"
			switch {
			case res.Err != nil:
				key = opName(c) + " " + res.Err.Code.String()
				if res.Err.Reason != "" {
					key += " " + res.Err.Reason
				}
			case res.AllArrived:
				key = opName(c) + " all arrived"
			case len(res.Woken) > 0:
				key = opName(c) + " woke"
			}
			stats[key]++
		}
		if err := f.CheckInvariants(); err != nil {
			return fail(fmt.Errorf("invariants: %v", err))
		}
		at := m.now
		if r.Intn(3) == 0 {
			at += int64(r.Intn(4000)) * int64(time.Millisecond)
		}
		if err := compareWaitState(f, m, at); err != nil {
			return fail(fmt.Errorf("state at +%dms: %v", (at-epoch)/1e6, err))
		}
		if step == restoreAt {
			var buf bytes.Buffer
			if err := f.WriteSnapshot(&buf); err != nil {
				return fail(err)
			}
			nf := New(Options{})
			if err := restoreBytes(nf, buf.Bytes()); err != nil {
				return fail(fmt.Errorf("restore: %v", err))
			}
			if dumpState(nf) != dumpState(f) {
				return fail(fmt.Errorf("restored state differs:\n%s\n%s", dumpState(f), dumpState(nf)))
			}
			f = nf
		}
	}
	return nil
}

func TestWaitsRandomAgainstModel(t *testing.T) {
	base := seedFromEnv(t)
	defSeqs := 600
	if raceEnabled {
		defSeqs = 150
	}
	seqs := envInt(t, "GRACKLE_FSM_SEQS", defSeqs)
	steps := envInt(t, "GRACKLE_FSM_STEPS", 80)
	if testing.Short() && os.Getenv("GRACKLE_FSM_SEQS") == "" {
		seqs = 100
	}
	t.Logf("GRACKLE_FSM_SEED=%d GRACKLE_FSM_SEQS=%d GRACKLE_FSM_STEPS=%d", base, seqs, steps)
	// Half the sequences start from fixed seeds (1, 2, ...), half from
	// the run's own base: the fixed half is the same every run, so the
	// check below that the interesting cases were reached cannot fail by
	// the luck of the seed (some cases come up a few times in a hundred
	// sequences); the other half explores new sequences each run.
	fixed := seqs / 2
	stats := map[string]int{}
	for i := 0; i < seqs; i++ {
		seed := base + int64(i)
		st := map[string]int{}
		if i < fixed {
			seed, st = int64(i+1), stats
		}
		if err := waitSequence(seed, steps, st, nil); err != nil {
			t.Fatalf("%v\nreproduce: GRACKLE_FSM_SEED=%d GRACKLE_FSM_SEQS=1 GRACKLE_FSM_STEPS=%d go test -run TestWaitsRandomAgainstModel ./fsm/", err, seed, steps)
		}
	}
	// The fixed sequences must reach the interesting cases.
	for _, k := range []string{"CompleteJobs woke", "CompleteJobs FailedPrecondition WAIT_GROUP_NOT_ACTIVE", "CompleteJobs InvalidArgument",
		"ArriveAtBarrier all arrived", "ArriveAtBarrier FailedPrecondition GENERATION_MISMATCH", "UpdateBarrier all arrived",
		"UpdateWaitGroup woke", "ExpireTimers woke", "CreateWaitGroup ResourceExhausted", "DeleteNamespace woke"} {
		if stats[k] == 0 {
			t.Errorf("no %q in the %d sequences of fixed seeds", k, fixed)
		}
	}
	if testing.Verbose() {
		for _, k := range sortedKeys2(stats) {
			t.Logf("%-56s %d", k, stats[k])
		}
	}
}

// Two FSMs fed the same random wait log, one entry at a time and packed
// into batches of random sizes, give the same results and the same
// snapshot bytes; a restore midway changes nothing.
func TestWaitsDeterminism(t *testing.T) {
	for seed := int64(1); seed <= 6; seed++ {
		var log []*fsmpb.Command
		if err := waitSequence(seed, 400, nil, &log); err != nil {
			t.Fatal(err)
		}
		r := rand.New(rand.NewSource(seed))
		a := New(Options{TempDir: t.TempDir()})
		b := New(Options{TempDir: t.TempDir()})
		for i := 0; i < len(log); {
			k := min(1+r.Intn(8), len(log)-i)
			var packed [][]byte
			var want []string
			for j := 0; j < k; j++ {
				ra := a.ApplyCommand(uint64(i+1), log[i+j])
				want = append(want, resultString(ra))
				packed = append(packed, mustEncode(t, log[i+j]))
			}
			rb := b.ApplyCommand(uint64(i+1), &fsmpb.Command{Now: log[i].Now, Op: &fsmpb.Command_Batch{Batch: &fsmpb.Batch{Commands: packed}}})
			for j := range packed {
				if got := resultString(rb.Batch[j]); got != want[j] {
					t.Fatalf("seed %d entry %d: results differ\n one: %s\nbatch: %s", seed, i+j, want[j], got)
				}
			}
			i += k
			if i > len(log)/2 && i-k <= len(log)/2 {
				c := New(Options{TempDir: t.TempDir()})
				if err := restoreBytes(c, snapshotBytes(t, b)); err != nil {
					t.Fatal(err)
				}
				b = c
			}
		}
		if !bytes.Equal(snapshotBytes(t, a), snapshotBytes(t, b)) {
			t.Fatalf("seed %d: snapshots differ", seed)
		}
	}
}
