package fsm

import (
	"bytes"
	"fmt"
	"math/rand"
	"os"
	"sort"
	"strconv"
	"testing"
	"time"

	fsmpb "github.com/grackle-coord/grackle/proto/grackle/fsm/v1"
)

// A small, independent reference model of docs/API.md's semantics (plain maps
// and slices), and a randomized test that drives the FSM and the model with
// the same commands and compares everything observable after every step.
//
// Reproduce a failure with the seed it prints:
//
//	GRACKLE_FSM_SEED=<seed> GRACKLE_FSM_SEQS=1 go test -run TestRandomAgainstModel ./fsm/

type mLease struct {
	proc                  string
	ttl, created, expires int64
}

type mHold struct {
	lease    string
	weight   int64
	lockedAt int64
	token    uint64
	md       string
}

type mSem struct {
	desc                                         string
	permits, version, created, updated, activity int64
	holds                                        []*mHold // acquisition order
}

type mNS struct {
	desc                      string
	version, created, updated int64
	sems                      map[string]*mSem
	leases                    map[string]*mLease
}

type model struct {
	ns        map[string]*mNS
	lastNow   int64
	lastToken uint64
	limits    Limits
}

func newModel() *model { return &model{ns: map[string]*mNS{}, limits: DefaultLimits()} }

// expected is what the model says a command returns.
type expected struct {
	code     Code // 0: no error
	acquired bool
	holder   *mHold
	grants   []expGrant
}

type expGrant struct {
	granted bool
	code    Code
}

func (s *mSem) find(lease string) (int, *mHold) {
	for i, h := range s.holds {
		if h.lease == lease {
			return i, h
		}
	}
	return -1, nil
}

// stored is the sum of every hold, expired or not: what grants are checked
// against until the leader reaps (see TestSemaphoreUpdateCountsUnreapedHolds).
func (s *mSem) stored() int64 {
	var n int64
	for _, h := range s.holds {
		n += h.weight
	}
	return n
}

func (m *model) alive(ns *mNS, lease string, now int64) bool {
	l, ok := ns.leases[lease]
	return ok && l.expires > now
}

func (m *model) reap(nsName, id string) {
	ns := m.ns[nsName]
	delete(ns.leases, id)
	for _, s := range ns.sems {
		if i, _ := s.find(id); i >= 0 {
			s.holds = append(s.holds[:i:i], s.holds[i+1:]...)
		}
	}
}

// grant gives or replaces the hold of lease on s.
func (m *model) grant(s *mSem, lease string, w int64, md string, index uint64, now int64) *mHold {
	tok := index
	if tok <= m.lastToken {
		tok = m.lastToken + 1
	}
	m.lastToken = tok
	_, h := s.find(lease)
	if h == nil {
		h = &mHold{lease: lease, lockedAt: now}
		s.holds = append(s.holds, h)
	}
	h.weight, h.token, h.md = w, tok, md
	s.activity = now
	return h
}

// tryGrant: NotFound/InvalidArgument when it can never apply, 0 and false
// when it does not fit now.
func (m *model) tryGrant(g *fsmpb.Grant, index uint64, now int64, mayGrant func(*mHold) bool) (bool, *mHold, Code) {
	if g.Weight < 1 {
		return false, nil, CodeInvalidArgument
	}
	ns := m.ns[g.NamespaceName]
	if ns == nil {
		return false, nil, CodeNotFound
	}
	s := ns.sems[g.SemaphoreName]
	if s == nil {
		return false, nil, CodeNotFound
	}
	// docs/API.md, Acquire validation before Missing things: a weight that can never fit is
	// InvalidArgument even when the lease is missing too.
	if g.Weight > s.permits {
		return false, nil, CodeInvalidArgument
	}
	if !m.alive(ns, g.LeaseId, now) {
		return false, nil, CodeNotFound
	}
	_, old := s.find(g.LeaseId)
	if !mayGrant(old) {
		return false, nil, 0
	}
	after := s.stored() + g.Weight
	if old != nil {
		after -= old.weight
	}
	if after > s.permits {
		return false, nil, 0
	}
	if old == nil && int64(len(s.holds)) >= m.limits.MaxHoldersPerSemaphore {
		return false, nil, CodeResourceExhausted
	}
	return true, m.grant(s, g.LeaseId, g.Weight, mdString(g.Metadata), index, now), 0
}

func (m *model) apply(index uint64, c *fsmpb.Command) expected {
	now := c.Now
	if now < m.lastNow {
		now = m.lastNow
	}
	m.lastNow = now
	var e expected
	e.code = m.op(index, now, c, &e)
	if len(c.Grants) > 0 {
		blocked := map[[2]string]bool{}
		for _, g := range c.Grants {
			k := [2]string{g.NamespaceName, g.SemaphoreName}
			if blocked[k] {
				e.grants = append(e.grants, expGrant{})
				continue
			}
			ok, _, code := m.tryGrant(g, index, now, func(*mHold) bool { return true })
			if !ok {
				blocked[k] = true
			}
			e.grants = append(e.grants, expGrant{ok, code})
		}
	}
	return e
}

func (m *model) op(index uint64, now int64, c *fsmpb.Command, e *expected) Code {
	l := m.limits
	switch op := c.Op.(type) {
	case *fsmpb.Command_CreateNamespace:
		o := op.CreateNamespace
		if m.ns[o.Name] != nil {
			return CodeAlreadyExists
		}
		if int64(len(m.ns)) >= l.MaxNamespaces {
			return CodeResourceExhausted
		}
		m.ns[o.Name] = &mNS{desc: o.Description, version: 1, created: now, updated: now, sems: map[string]*mSem{}, leases: map[string]*mLease{}}
	case *fsmpb.Command_UpdateNamespace:
		o := op.UpdateNamespace
		if o.ExpectedVersion < 1 {
			return CodeInvalidArgument
		}
		ns := m.ns[o.Name]
		if ns == nil {
			return CodeNotFound
		}
		if ns.version != o.ExpectedVersion {
			return CodeInvalidArgument
		}
		ns.desc, ns.version, ns.updated = o.Description, ns.version+1, now
	case *fsmpb.Command_DeleteNamespace:
		delete(m.ns, op.DeleteNamespace.Name)
	case *fsmpb.Command_CreateSemaphore:
		o := op.CreateSemaphore
		if o.Permits < 1 || o.Permits > l.MaxPermits {
			return CodeInvalidArgument
		}
		ns := m.ns[o.NamespaceName]
		if ns == nil {
			return CodeNotFound
		}
		if ns.sems[o.Name] != nil {
			return CodeAlreadyExists
		}
		if int64(len(ns.sems)) >= l.MaxSemaphoresPerNamespace {
			return CodeResourceExhausted
		}
		ns.sems[o.Name] = &mSem{desc: o.Description, permits: o.Permits, version: 1, created: now, updated: now, activity: now}
	case *fsmpb.Command_UpdateSemaphore:
		o := op.UpdateSemaphore
		if o.Permits < 1 || o.Permits > l.MaxPermits || o.ExpectedVersion < 1 {
			return CodeInvalidArgument
		}
		ns := m.ns[o.NamespaceName]
		if ns == nil {
			return CodeNotFound
		}
		s := ns.sems[o.Name]
		if s == nil {
			return CodeNotFound
		}
		if s.version != o.ExpectedVersion {
			return CodeInvalidArgument
		}
		if o.Permits < s.stored() {
			return CodeFailedPrecondition
		}
		s.desc, s.permits, s.version, s.updated = o.Description, o.Permits, s.version+1, now
	case *fsmpb.Command_DeleteSemaphore:
		o := op.DeleteSemaphore
		if ns := m.ns[o.NamespaceName]; ns != nil {
			delete(ns.sems, o.Name)
		}
	case *fsmpb.Command_Acquire:
		o := op.Acquire
		g := o.Grant
		ok, h, code := m.tryGrant(g, index, now, func(old *mHold) bool {
			return !o.Queued || (old != nil && g.Weight <= old.weight)
		})
		if code != 0 {
			return code
		}
		m.ns[g.NamespaceName].sems[g.SemaphoreName].activity = now
		if ok {
			hc := *h // the view at this point: later grants may change h
			e.acquired, e.holder = true, &hc
		}
	case *fsmpb.Command_Release:
		o := op.Release
		ns := m.ns[o.NamespaceName]
		if ns == nil {
			return CodeNotFound
		}
		s := ns.sems[o.SemaphoreName]
		if s == nil {
			return CodeNotFound
		}
		if i, _ := s.find(o.LeaseId); i >= 0 {
			s.holds = append(s.holds[:i:i], s.holds[i+1:]...)
		}
		s.activity = now
	case *fsmpb.Command_CreateLease:
		o := op.CreateLease
		if o.TtlSeconds < 1 || o.TtlSeconds > l.MaxTTLSeconds {
			return CodeInvalidArgument
		}
		ns := m.ns[o.NamespaceName]
		if ns == nil {
			return CodeNotFound
		}
		if ns.leases[o.LeaseId] != nil {
			return CodeAlreadyExists
		}
		if int64(len(ns.leases)) >= l.MaxLeasesPerNamespace {
			return CodeResourceExhausted
		}
		ns.leases[o.LeaseId] = &mLease{proc: o.ProcessId, ttl: o.TtlSeconds, created: now, expires: now + o.TtlSeconds*sec}
	case *fsmpb.Command_RefreshLease:
		o := op.RefreshLease
		if o.TtlSeconds < 1 || o.TtlSeconds > l.MaxTTLSeconds {
			return CodeInvalidArgument
		}
		ns := m.ns[o.NamespaceName]
		if ns == nil || ns.leases[o.LeaseId] == nil {
			return CodeNotFound
		}
		if !m.alive(ns, o.LeaseId, now) {
			m.reap(o.NamespaceName, o.LeaseId)
			return CodeNotFound
		}
		ls := ns.leases[o.LeaseId]
		ls.ttl, ls.expires = o.TtlSeconds, now+o.TtlSeconds*sec
	case *fsmpb.Command_RevokeLease:
		o := op.RevokeLease
		ns := m.ns[o.NamespaceName]
		if ns == nil || ns.leases[o.LeaseId] == nil {
			return CodeNotFound
		}
		m.reap(o.NamespaceName, o.LeaseId)
	case *fsmpb.Command_ExpireLeases:
		type due struct {
			at     int64
			ns, id string
		}
		var ds []due
		for nsName, ns := range m.ns {
			for id, ls := range ns.leases {
				if ls.expires <= now {
					ds = append(ds, due{ls.expires, nsName, id})
				}
			}
		}
		sort.Slice(ds, func(i, j int) bool {
			a, b := ds[i], ds[j]
			if a.at != b.at {
				return a.at < b.at
			}
			if a.ns != b.ns {
				return a.ns < b.ns
			}
			return a.id < b.id
		})
		if max := int(op.ExpireLeases.Max); max > 0 && len(ds) > max {
			ds = ds[:max]
		}
		for _, d := range ds {
			m.reap(d.ns, d.id)
		}
	case *fsmpb.Command_ExtendLeases:
		ext := op.ExtendLeases.ExtendNs
		if ext < 0 {
			return CodeInvalidArgument
		}
		for _, ns := range m.ns {
			for _, ls := range ns.leases {
				if ls.expires > now {
					ls.expires = satAdd(ls.expires, ext)
				}
			}
		}
	case *fsmpb.Command_SetLimits:
		o := op.SetLimits
		nl := limitsFrom(o)
		for _, v := range []int64{nl.MaxNamespaces, nl.MaxSemaphoresPerNamespace, nl.MaxLeasesPerNamespace, nl.MaxHoldersPerSemaphore, nl.MaxPermits, nl.MaxTTLSeconds} {
			if v < 1 {
				return CodeInvalidArgument
			}
		}
		m.limits = nl
	case *fsmpb.Command_Noop, nil:
	default:
		panic(fmt.Sprintf("model: op %T", op))
	}
	return 0
}

// ---- the random command generator ----

var (
	genNS     = []string{"a", "b", "c"} // "c" is never created: always NotFound
	genSems   = []string{"s", "t", "u"}
	genLeases = 6
)

type gen struct {
	r *rand.Rand
	m *model // read to pick plausible versions; never modified here
}

func (g *gen) pick(xs []string) string { return xs[g.r.Intn(len(xs))] }
func (g *gen) ns() string {
	if g.r.Intn(20) == 0 {
		return "c"
	}
	return g.pick(genNS[:2])
}
func (g *gen) sem() string   { return g.pick(genSems) }
func (g *gen) lease() string { return lid(g.r.Intn(genLeases)) }

// existing returns a random key of m (sorted first, for determinism), or ""
func existing[V any](r *rand.Rand, m map[string]V) string {
	if len(m) == 0 {
		return ""
	}
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks[r.Intn(len(ks))]
}

// target picks a namespace, semaphore and lease, mostly ones that exist.
func (g *gen) target() (ns, sem, lease string) {
	ns, sem, lease = g.ns(), g.sem(), g.lease()
	if x := g.m.ns[ns]; x != nil && g.r.Intn(5) != 0 {
		if s := existing(g.r, x.sems); s != "" {
			sem = s
		}
		if l := existing(g.r, x.leases); l != "" {
			lease = l
		}
	}
	return
}

// newLease picks a lease id that mostly does not exist yet.
func (g *gen) newLease(ns string) string {
	x := g.m.ns[ns]
	for i := 0; i < 4 && x != nil; i++ {
		if l := g.lease(); x.leases[l] == nil {
			return l
		}
	}
	return g.lease()
}
func (g *gen) weight() int64 {
	switch g.r.Intn(20) {
	case 0:
		return 0
	case 1:
		return 6 // above every generated permits but one
	}
	return 1 + int64(g.r.Intn(3))
}
func (g *gen) ttl() int64 {
	switch g.r.Intn(30) {
	case 0:
		return 0
	case 1:
		return 301
	}
	return 1 + int64(g.r.Intn(10))
}
func (g *gen) md() map[string]string {
	if g.r.Intn(3) == 0 {
		return nil
	}
	return md("k", strconv.Itoa(g.r.Intn(3)))
}

// version returns the current version of what f names most of the time,
// and a wrong one otherwise.
func (g *gen) version(cur int64) int64 {
	if cur > 0 && g.r.Intn(4) != 0 {
		return cur
	}
	return int64(g.r.Intn(4))
}

func (g *gen) command() *fsmpb.Command {
	r := g.r
	var c *fsmpb.Command
	switch n := r.Intn(100); {
	case n < 4:
		c = cNSFull(g.pick(genNS[:2]), g.pick([]string{"", "d"}), nil)
	case n < 5:
		c = cNSDelete(g.ns())
	case n < 7:
		ns := g.ns()
		var cur int64
		if x := g.m.ns[ns]; x != nil {
			cur = x.version
		}
		c = cNSUpdate(ns, g.pick([]string{"", "d2"}), nil, g.version(cur))
	case n < 12:
		permits := 1 + int64(r.Intn(5))
		if r.Intn(20) == 0 {
			permits = int64(r.Intn(2)) * (g.m.limits.MaxPermits + 1)
		}
		c = cSem(g.ns(), g.sem(), permits)
	case n < 15:
		ns, s := g.ns(), g.sem()
		var cur int64
		if x := g.m.ns[ns]; x != nil && x.sems[s] != nil {
			cur = x.sems[s].version
		}
		c = cSemUpdate(ns, s, "", 1+int64(r.Intn(6)), nil, g.version(cur))
	case n < 17:
		c = cSemDelete(g.ns(), g.sem())
	case n < 27:
		ns := g.ns()
		c = cLease(ns, g.newLease(ns), g.pick([]string{"p", "q"}), g.ttl())
	case n < 33:
		ns, _, l := g.target()
		c = cRefresh(ns, l, g.ttl())
	case n < 36:
		ns, _, l := g.target()
		c = cRevoke(ns, l)
	case n < 60:
		ns, s, l := g.target()
		c = cAcqFull(ns, s, l, g.weight(), r.Intn(4) == 0, g.md())
	case n < 72:
		ns, s, l := g.target()
		c = cRel(ns, s, l)
	case n < 78:
		c = cExpire(int32(r.Intn(4)))
	case n < 80:
		ext := int64(r.Intn(4)) * sec
		if r.Intn(10) == 0 {
			ext = -1
		}
		c = cExtend(ext)
	case n < 81:
		lim := DefaultLimits()
		if r.Intn(2) == 0 {
			lim = Limits{MaxNamespaces: 1 + int64(r.Intn(3)), MaxSemaphoresPerNamespace: 1 + int64(r.Intn(3)), MaxLeasesPerNamespace: 1 + int64(r.Intn(6)),
				MaxHoldersPerSemaphore: 1 + int64(r.Intn(4)), MaxPermits: 2 + int64(r.Intn(5)), MaxTTLSeconds: 2 + int64(r.Intn(8))}
			if r.Intn(5) == 0 {
				lim.MaxPermits = 0
			}
		}
		c = cLimits(lim)
	case n < 85:
		c = cNoop()
	default:
		c = &fsmpb.Command{} // grants only (some get none: then a noop is used)
	}
	if r.Intn(10) < 3 || c.Op == nil {
		for i := r.Intn(4); i >= 0; i-- {
			ns, s, l := g.target()
			gr := grant(ns, s, l, g.weight())
			gr.Metadata = g.md()
			c.Grants = append(c.Grants, gr)
		}
	}
	return c
}

// ---- comparing the FSM with the model ----

func compareResult(c *fsmpb.Command, r *Result, e expected) error {
	var got Code
	if r.Err != nil {
		got = r.Err.Code
	}
	if got != e.code {
		return fmt.Errorf("%s: error %v, model says code %v", opName(c), r.Err, e.code)
	}
	if r.Acquired != e.acquired {
		return fmt.Errorf("%s: acquired=%v, model says %v", opName(c), r.Acquired, e.acquired)
	}
	if e.acquired {
		hv := r.Holder
		if hv == nil || hv.Weight != e.holder.weight || hv.FencingToken != e.holder.token || hv.LockedAt != e.holder.lockedAt ||
			mdString(hv.Metadata) != e.holder.md {
			return fmt.Errorf("%s: holder %v, model says %+v", opName(c), hv, *e.holder)
		}
	}
	if len(r.Grants) != len(e.grants) {
		return fmt.Errorf("%d grant results, model says %d", len(r.Grants), len(e.grants))
	}
	for i, g := range r.Grants {
		var code Code
		if g.Err != nil {
			code = g.Err.Code
		}
		if g.Granted != e.grants[i].granted || code != e.grants[i].code {
			return fmt.Errorf("grant %d (%v): granted=%v err=%v, model says %+v", i, c.Grants[i], g.Granted, g.Err, e.grants[i])
		}
	}
	return nil
}

// compareState checks everything a client could observe at time `at`,
// plus the stored counts, against the model.
func compareState(f *FSM, m *model, at int64) error {
	var names []string
	for n := range m.ns {
		names = append(names, n)
	}
	sort.Strings(names)
	np, err := f.ListNamespaces(250, "")
	if err != nil {
		return err
	}
	if len(np.Items) != len(names) {
		return fmt.Errorf("namespaces %d, model %v", len(np.Items), names)
	}
	var wantCounts Counts
	wantCounts.Namespaces = len(names)
	for i, n := range np.Items {
		mn := m.ns[names[i]]
		if n.Name != names[i] || n.Version != mn.version || n.Description != mn.desc || n.CreatedAt != mn.created || n.UpdatedAt != mn.updated {
			return fmt.Errorf("namespace %v, model %s %+v", n, names[i], *mn)
		}
	}
	for _, nsName := range genNS {
		mn := m.ns[nsName]
		if mn == nil {
			if _, err := f.GetNamespace(nsName); err == nil {
				return fmt.Errorf("namespace %s exists, model says not", nsName)
			}
			continue
		}
		// Semaphores.
		var semNames []string
		for s := range mn.sems {
			semNames = append(semNames, s)
		}
		sort.Strings(semNames)
		sp, err := f.ListSemaphores(nsName, 250, "", at)
		if err != nil {
			return err
		}
		if len(sp.Items) != len(semNames) {
			return fmt.Errorf("%s: %d semaphores, model %v", nsName, len(sp.Items), semNames)
		}
		wantCounts.Semaphores += len(semNames)
		for i, sv := range sp.Items {
			ms := mn.sems[semNames[i]]
			var holds, holders int64
			var live []*mHold
			for _, h := range ms.holds {
				if m.alive(mn, h.lease, at) {
					holds += h.weight
					holders++
					live = append(live, h)
				}
			}
			wantCounts.Holders += len(ms.holds)
			if sv.Name != semNames[i] || sv.Permits != ms.permits || sv.Version != ms.version || sv.ActiveHolds != holds ||
				sv.ActiveHoldersCount != holders || sv.LastActivityAt != ms.activity || sv.UpdatedAt != ms.updated ||
				sv.CreatedAt != ms.created || sv.Description != ms.desc {
				return fmt.Errorf("%s/%s: %v, model %+v (live holds %d/%d)", nsName, semNames[i], sv, *ms, holds, holders)
			}
			if sv.ActiveHolds > sv.Permits {
				return fmt.Errorf("%s/%s: active_holds %d > permits %d", nsName, sv.Name, sv.ActiveHolds, sv.Permits)
			}
			if permits, stored, ok := f.SemaphoreCapacity(nsName, sv.Name); !ok || permits != ms.permits || stored != ms.stored() {
				return fmt.Errorf("%s/%s: stored holds %d, model %d", nsName, sv.Name, stored, ms.stored())
			}
			hp, err := f.ListSemaphoreHolders(nsName, sv.Name, 250, "", at)
			if err != nil {
				return err
			}
			if len(hp.Items) != len(live) {
				return fmt.Errorf("%s/%s: %d holders listed, model %d", nsName, sv.Name, len(hp.Items), len(live))
			}
			for j, hv := range hp.Items {
				mh := live[j]
				ml := mn.leases[mh.lease]
				if hv.LeaseId != mh.lease || hv.Weight != mh.weight || hv.LockedAt != mh.lockedAt || hv.FencingToken != mh.token ||
					mdString(hv.Metadata) != mh.md || hv.ExpiresAt != ml.expires || hv.ProcessId != ml.proc {
					return fmt.Errorf("%s/%s holder %d: %v, model %+v", nsName, sv.Name, j, hv, *mh)
				}
				if hv.ExpiresAt <= at {
					return fmt.Errorf("%s/%s: expired holder listed: %v", nsName, sv.Name, hv)
				}
			}
		}
		// Leases.
		var ids []string
		for id, ls := range mn.leases {
			if ls.expires > at {
				ids = append(ids, id)
			}
		}
		sort.Strings(ids)
		wantCounts.Leases += len(mn.leases)
		lp, err := f.ListSemaphoreLeases(nsName, "", 250, "", at)
		if err != nil {
			return err
		}
		if len(lp.Items) != len(ids) {
			return fmt.Errorf("%s: %d live leases listed, model %v", nsName, len(lp.Items), ids)
		}
		for i, lv := range lp.Items {
			ml := mn.leases[ids[i]]
			if lv.LeaseId != ids[i] || lv.ExpiresAt != ml.expires || lv.CreatedAt != ml.created || lv.TtlSeconds != ml.ttl || lv.ProcessId != ml.proc {
				return fmt.Errorf("%s: lease %v, model %s %+v", nsName, lv, ids[i], *ml)
			}
		}
		for id := range mn.leases {
			_, err := f.GetSemaphoreLease(nsName, id, at)
			if (err == nil) != m.alive(mn, id, at) {
				return fmt.Errorf("%s: GetSemaphoreLease(%s) = %v, model alive=%v", nsName, id, err, m.alive(mn, id, at))
			}
		}
	}
	if c := f.Counts(); c != wantCounts {
		return fmt.Errorf("counts %+v, model %+v", c, wantCounts)
	}
	if f.Limits() != m.limits {
		return fmt.Errorf("limits %+v, model %+v", f.Limits(), m.limits)
	}
	if f.LastNow() != m.lastNow {
		return fmt.Errorf("LastNow %d, model %d", f.LastNow(), m.lastNow)
	}
	return nil
}

// ---- the test ----

// seedFromEnv returns GRACKLE_FSM_SEED if set, else a fresh seed.
func seedFromEnv(t testing.TB) int64 {
	if s := os.Getenv("GRACKLE_FSM_SEED"); s != "" {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			t.Fatalf("GRACKLE_FSM_SEED: %v", err)
		}
		return v
	}
	return time.Now().UnixNano()
}

func envInt(t testing.TB, name string, def int) int {
	if s := os.Getenv(name); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return v
	}
	return def
}

// randomSequence runs one seeded sequence of steps against a fresh FSM and
// model; it returns an error describing the first divergence.
func randomSequence(t testing.TB, seed int64, steps int, stats map[string]int) error {
	r := rand.New(rand.NewSource(seed))
	f := New(Options{})
	m := newModel()
	g := &gen{r: r, m: m}
	clock := epoch
	restoreAt := -1
	if r.Intn(8) == 0 {
		restoreAt = r.Intn(steps)
	}
	var history []*fsmpb.Command
	// A common starting point, so that most sequences reach interesting
	// states quickly: a, b; a/s, a/t, b/s; a few leases.
	var setup []*fsmpb.Command
	if r.Intn(10) != 0 {
		setup = append(setup, cNS("a"), cNS("b"), cSem("a", "s", 1+int64(r.Intn(5))), cSem("a", "t", 1+int64(r.Intn(5))), cSem("b", "s", 1+int64(r.Intn(5))))
		for i := r.Intn(genLeases); i >= 0; i-- {
			ns := g.pick(genNS[:2])
			setup = append(setup, cLease(ns, g.newLease(ns), "p", 3+int64(r.Intn(8))))
		}
	}
	for step := 0; step < steps+len(setup); step++ {
		index := uint64(step + 1)
		var c *fsmpb.Command
		if step < len(setup) {
			c = setup[step]
		} else {
			c = g.command()
		}
		switch x := r.Intn(20); {
		case x == 0:
			clock += int64(1+r.Intn(10)) * sec // a jump: leases expire
		case x < 10:
			clock += int64(r.Intn(400)) * int64(time.Millisecond)
		}
		c.Now = clock
		if r.Intn(20) == 0 {
			c.Now = clock - int64(r.Intn(3000))*int64(time.Millisecond) // an older clock
		}
		history = append(history, c)
		fail := func(err error) error {
			start := len(history) - 15
			if start < 0 {
				start = 0
			}
			var ls []string
			for i, c := range history[start:] {
				ls = append(ls, fmt.Sprintf("%d: now=+%dms %s %v grants=%v", start+i+1, (c.Now-epoch)/1e6, opName(c), c.GetOp(), c.GetGrants()))
			}
			return fmt.Errorf("seed %d, step %d: %v\nlast commands:\n%s", seed, step, err, joinLines(ls))
		}
		res := f.ApplyCommand(index, c)
		want := m.apply(index, c)
		if err := compareResult(c, res, want); err != nil {
			return fail(err)
		}
		if stats != nil {
			key := opName(c) + " ok"
			if res.Err != nil {
				key = opName(c) + " " + res.Err.Code.String()
			} else if res.Acquired {
				key = opName(c) + " acquired"
			}
			stats[key]++
			for _, g := range res.Grants {
				switch {
				case g.Granted:
					stats["grant granted"]++
				case g.Err != nil:
					stats["grant "+g.Err.Code.String()]++
				default:
					stats["grant not granted"]++
				}
			}
		}
		if err := f.CheckInvariants(); err != nil {
			return fail(fmt.Errorf("invariants: %v", err))
		}
		at := m.lastNow
		if r.Intn(3) == 0 {
			at += int64(r.Intn(5000)) * int64(time.Millisecond)
		}
		if err := compareState(f, m, at); err != nil {
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
			if dumpState(nf) != dumpState(f) || nf.AppliedIndex() != f.AppliedIndex() || nf.LastNow() != f.LastNow() {
				return fail(fmt.Errorf("restored state differs:\n%s\n%s", dumpState(f), dumpState(nf)))
			}
			f = nf
		}
	}
	return nil
}

func TestRandomAgainstModel(t *testing.T) {
	base := seedFromEnv(t)
	defSeqs := 2000
	if raceEnabled {
		defSeqs = 1500
	}
	seqs := envInt(t, "GRACKLE_FSM_SEQS", defSeqs)
	steps := envInt(t, "GRACKLE_FSM_STEPS", 60)
	if testing.Short() && os.Getenv("GRACKLE_FSM_SEQS") == "" {
		seqs = 200
	}
	t.Logf("GRACKLE_FSM_SEED=%d GRACKLE_FSM_SEQS=%d GRACKLE_FSM_STEPS=%d", base, seqs, steps)
	stats := map[string]int{}
	for i := 0; i < seqs; i++ {
		seed := base + int64(i)
		if err := randomSequence(t, seed, steps, stats); err != nil {
			t.Fatalf("%v\nreproduce: GRACKLE_FSM_SEED=%d GRACKLE_FSM_SEQS=1 GRACKLE_FSM_STEPS=%d go test -run TestRandomAgainstModel ./fsm/", err, seed, steps)
		}
	}
	if testing.Verbose() {
		keys := make([]string, 0, len(stats))
		for k := range stats {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			t.Logf("%-32s %d", k, stats[k])
		}
	}
}

func joinLines(ls []string) string {
	out := ""
	for _, l := range ls {
		out += "  " + l + "\n"
	}
	return out
}
