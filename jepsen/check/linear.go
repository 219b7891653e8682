package check

import (
	"fmt"
	"hash/fnv"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/grackle-coord/grackle/jepsen/history"
)

// The linearizability checker (docs/FAULTS.md, Linearizability with time taken out). Time is taken out:
// in the "linear" workload every lease outlives the run, so a semaphore is
// a plain sequential object:
//
//	state:    permits (constant, carried by every input) and the holders,
//	          lease -> weight, sorted by lease (canonical, so equal states
//	          compare equal and hash alike)
//	acquire   ACQUIRED: legal iff sum(other holders) + w <= permits; the
//	          lease then holds w (a re-acquire replaces its old weight)
//	acquire   UNAVAILABLE / TIMED_OUT: legal, no change (the FIFO queue is
//	          not modelled)
//	acquire   indeterminate: acquires w if it fits, else no change; that it
//	          did not happen at all is the linearization at the open end
//	release   removes the lease's hold (legal always)
//	revoke    removes the lease's hold on this semaphore (one op per
//	          semaphore: the op's Semaphore, or when empty every semaphore
//	          the lease ever acquired) and deletes the lease (see linStep)
//	get       legal iff active_holds == sum of weights and holders_count ==
//	          number of holders
//	holders   legal iff the listed lease -> weight set is exactly the state
//	acquire or revoke answered NotFound: legal iff the lease was revoked
//	          (leases do not expire in this workload, and nothing else
//	          deletes one)
//
// Failed ops (Outcome Fail) change nothing, so they are left out, except
// that an acquire or revoke answered NotFound is kept as the evidence that
// its lease is gone; indeterminate reads are left out too. Indeterminate
// mutations get a return time past the end of their partition
// (porcupine's open end), or the answer time of the revoke that deleted
// their lease (see porcOps). create_lease, refresh and fence_write are not
// part of this model.
//
// The history is partitioned by semaphore (Model.Partition) and each
// partition is checked on its own, in parallel, under one deadline.

// LinOptions configure LinearizabilityWith.
type LinOptions struct {
	// Timeout bounds the check of all partitions (<= 0: no bound).
	Timeout time.Duration
	// MinimizeTimeout bounds the search for a minimal sub-history after a
	// violation (<= 0: Timeout, or 60s when Timeout is unbounded).
	MinimizeTimeout time.Duration
	// VisualizationPath: where to write porcupine's HTML visualization of
	// the failing partitions ("" = none).
	VisualizationPath string
	// Prefix restricts the check to semaphores whose name starts with it
	// ("" = the history's Meta["linear_prefix"], or every semaphore).
	Prefix string
	// MaxAnomalies caps the anomalies listed (0: 25).
	MaxAnomalies int
}

// Linearizability checks the history with porcupine (see LinOptions for
// the defaults: semaphores of Meta["linear_prefix"], no visualization).
func Linearizability(h *history.History, timeout time.Duration) Result {
	return LinearizabilityWith(h, LinOptions{Timeout: timeout})
}

type linKind uint8

const (
	lAcquire linKind = iota
	lRelease
	lRevoke
	lGet
	lHolders
	lGone // an acquire or revoke answered NotFound: the lease is deleted
)

type leaseWeight struct {
	lease string
	w     int64
}

type linInput struct {
	sem     string
	permits int64
	kind    linKind
	lease   string
	weight  int64
	// definite is the number of ops with an answer in the checked
	// history (set by porcOps; see linStep).
	definite int
	// class and rank order interchangeable indeterminate ops (set by
	// porcOps; class -1 for answered ops; see linStep).
	class, rank int
}

type linOutput struct {
	pending bool // indeterminate (or cut off by a truncation)
	outcome string
	holds   int64
	count   int64
	holders []leaseWeight // sorted by lease
}

// linState is immutable.
type linState struct {
	holders []leaseWeight // sorted by lease
	revoked []string      // leases revoked (deleted) in this partition, sorted
	rkey    string        // revoked, as a string
	ranks   string        // per class of indeterminate ops, how many are linearized (2 bytes each)
	done    int           // answered ops linearized so far
	key     string        // holders, as a string
}

// linOp is one porcupine operation with its source op.
type linOp struct {
	op   *history.Op
	in   linInput
	out  linOutput // as answered (out.pending for Info ops)
	call time.Duration
	ret  time.Duration // meaningful when !out.pending
}

func newState(hs []leaseWeight, done int) *linState {
	return &linState{holders: hs, done: done, key: holdersKey(hs)}
}

func holdersKey(hs []leaseWeight) string {
	var b strings.Builder
	for _, x := range hs {
		fmt.Fprintf(&b, "%s=%d,", x.lease, x.w)
	}
	return b.String()
}

func (s *linState) sum(except string) int64 {
	var t int64
	for _, x := range s.holders {
		if x.lease != except {
			t += x.w
		}
	}
	return t
}

// with returns the state with lease holding w (w == 0: not holding).
func (s *linState) with(lease string, w int64, done int) *linState {
	hs := make([]leaseWeight, 0, len(s.holders)+1)
	added := false
	for _, x := range s.holders {
		if x.lease == lease {
			continue
		}
		if !added && w > 0 && x.lease > lease {
			hs = append(hs, leaseWeight{lease, w})
			added = true
		}
		hs = append(hs, x)
	}
	if !added && w > 0 {
		hs = append(hs, leaseWeight{lease, w})
	}
	return &linState{holders: hs, revoked: s.revoked, rkey: s.rkey, ranks: s.ranks, done: done, key: holdersKey(hs)}
}

// revoke returns the state without the lease's hold and with the lease
// deleted.
func (s *linState) revoke(lease string, done int) *linState {
	n := s.with(lease, 0, done)
	i := sort.SearchStrings(s.revoked, lease)
	rv := make([]string, 0, len(s.revoked)+1)
	rv = append(append(append(rv, s.revoked[:i]...), lease), s.revoked[i:]...)
	n.revoked, n.rkey = rv, strings.Join(rv, ",")
	return n
}

func (s *linState) isRevoked(lease string) bool {
	i := sort.SearchStrings(s.revoked, lease)
	return i < len(s.revoked) && s.revoked[i] == lease
}

func (s *linState) weightOf(lease string) int64 {
	for _, x := range s.holders {
		if x.lease == lease {
			return x.w
		}
	}
	return 0
}

// rankOf is how many ops of the class are linearized.
func (s *linState) rankOf(class int) int {
	if 2*class+1 >= len(s.ranks) {
		return 0
	}
	return int(s.ranks[2*class])<<8 | int(s.ranks[2*class+1])
}

// bump returns the state with one more op of the class linearized.
func (s *linState) bump(class int) *linState {
	b := []byte(s.ranks)
	for len(b) < 2*class+2 {
		b = append(b, 0, 0)
	}
	n := s.rankOf(class) + 1
	b[2*class], b[2*class+1] = byte(n>>8), byte(n)
	c := *s
	c.ranks = string(b)
	return &c
}

func (s *linState) same(done int) *linState {
	if done == s.done {
		return s
	}
	c := *s
	c.done = done
	return &c
}

// linStep is the sequential specification.
//
// Besides the rules at the top of this file, it knows that a revoke
// deletes the lease (docs/API.md, Missing things: acquiring with a missing lease is NotFound, a
// second revoke is NotFound): after a revoke of the lease, an ACQUIRED
// answer or a second successful revoke is illegal, and an indeterminate
// acquire of it changes nothing. This only removes behaviours the API
// forbids; it also keeps porcupine's search small, because the runner's
// processes revoke their leases and indeterminate ops of dead leases pile
// up.
//
// Two prunings keep porcupine's search small when many ops are
// indeterminate; neither loses a linearization:
//
//   - an indeterminate op that would change nothing at this point is
//     refused until every answered op is linearized: it can always be
//     moved to the end instead (its open end constrains nobody, and it
//     changed nothing where it was), and at the end everything is allowed;
//   - indeterminate ops with the same input and the same return time
//     (same lease, kind and weight; porcOps puts them in one class) are
//     linearized in invoke order: swapping two of them in a linearization
//     gives another one, since each was invoked before either's point.
func linStep(state, input, output interface{}) (bool, interface{}) {
	s := state.(*linState)
	in := input.(linInput)
	out := output.(linOutput)
	if out.pending {
		if s.rankOf(in.class) != in.rank {
			return false, s // an interchangeable op that was invoked earlier goes first
		}
		if s.isRevoked(in.lease) {
			return true, s.bump(in.class) // a deleted lease: nothing happens (see porcOps)
		}
		atEnd := s.done >= in.definite
		var next *linState
		switch in.kind {
		case lAcquire:
			if s.sum(in.lease)+in.weight <= in.permits && s.weightOf(in.lease) != in.weight {
				next = s.with(in.lease, in.weight, s.done)
			}
		case lRelease:
			if s.weightOf(in.lease) != 0 {
				next = s.with(in.lease, 0, s.done)
			}
		case lRevoke:
			next = s.revoke(in.lease, s.done)
		}
		switch {
		case next != nil:
			return true, next.bump(in.class)
		case atEnd:
			return true, s.bump(in.class)
		}
		return false, s // no effect here: deferred to the end
	}
	done := s.done + 1
	switch in.kind {
	case lAcquire:
		if out.outcome != history.Acquired { // UNAVAILABLE, TIMED_OUT: the queue is not modelled
			return true, s.same(done)
		}
		if s.isRevoked(in.lease) || s.sum(in.lease)+in.weight > in.permits {
			return false, s
		}
		return true, s.with(in.lease, in.weight, done)
	case lRelease:
		return true, s.with(in.lease, 0, done)
	case lRevoke:
		if s.isRevoked(in.lease) {
			return false, s
		}
		return true, s.revoke(in.lease, done)
	case lGone:
		return s.isRevoked(in.lease), s.same(done)
	case lGet:
		return out.holds == s.sum("") && out.count == int64(len(s.holders)), s.same(done)
	case lHolders:
		if len(out.holders) != len(s.holders) {
			return false, s
		}
		for i := range out.holders {
			if out.holders[i] != s.holders[i] {
				return false, s
			}
		}
		return true, s.same(done)
	}
	return false, s
}

func describeLinOp(input, output interface{}) string {
	in := input.(linInput)
	out := output.(linOutput)
	var call string
	switch in.kind {
	case lAcquire:
		call = fmt.Sprintf("acquire(%s, w=%d)", shortLease(in.lease), in.weight)
	case lRelease:
		call = fmt.Sprintf("release(%s)", shortLease(in.lease))
	case lRevoke:
		call = fmt.Sprintf("revoke(%s)", shortLease(in.lease))
	case lGet:
		call = "get()"
	case lHolders:
		call = "holders()"
	case lGone:
		call = fmt.Sprintf("lease-gone(%s)", shortLease(in.lease))
	}
	if out.pending {
		return call + " -> ?"
	}
	switch in.kind {
	case lAcquire:
		return call + " -> " + out.outcome
	case lGet:
		return fmt.Sprintf("%s -> holds=%d count=%d", call, out.holds, out.count)
	case lHolders:
		return call + " -> " + describeHolders(out.holders)
	}
	return call + " -> ok"
}

func describeHolders(hs []leaseWeight) string {
	parts := make([]string, len(hs))
	for i, x := range hs {
		parts[i] = fmt.Sprintf("%s:%d", shortLease(x.lease), x.w)
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// linModel is the porcupine model of one semaphore, partitioned by
// semaphore.
var linModel = porcupine.Model{
	Partition: func(ops []porcupine.Operation) [][]porcupine.Operation {
		idx := map[string]int{}
		var out [][]porcupine.Operation
		for _, o := range ops {
			sem := o.Input.(linInput).sem
			i, ok := idx[sem]
			if !ok {
				i = len(out)
				idx[sem] = i
				out = append(out, nil)
			}
			out[i] = append(out[i], o)
		}
		return out
	},
	PartitionEvent: func(evs []porcupine.Event) [][]porcupine.Event {
		semOf := map[int]string{}
		idx := map[string]int{}
		var out [][]porcupine.Event
		for _, e := range evs {
			sem, ok := semOf[e.Id]
			if e.Kind == porcupine.CallEvent || !ok {
				if in, isIn := e.Value.(linInput); isIn {
					sem = in.sem
					semOf[e.Id] = sem
				}
			}
			i, ok := idx[sem]
			if !ok {
				i = len(out)
				idx[sem] = i
				out = append(out, nil)
			}
			out[i] = append(out[i], e)
		}
		return out
	},
	Init: func() interface{} { return newState(nil, 0) },
	Step: linStep,
	Equal: func(a, b interface{}) bool {
		x, y := a.(*linState), b.(*linState)
		return x.done == y.done && x.key == y.key && x.rkey == y.rkey && x.ranks == y.ranks
	},
	Hash: func(s interface{}) uint64 {
		x := s.(*linState)
		f := fnv.New64a()
		f.Write([]byte(x.key))
		f.Write([]byte{0})
		f.Write([]byte(x.rkey))
		f.Write([]byte{0})
		f.Write([]byte(x.ranks))
		return f.Sum64() ^ uint64(x.done)*0x9e3779b97f4a7c15
	},
	DescribeOperation: describeLinOp,
	DescribeState: func(s interface{}) string {
		return describeHolders(s.(*linState).holders)
	},
	DescribeOperationMetadata: func(m interface{}) string {
		if lo, ok := m.(*linOp); ok && lo != nil {
			return FormatOp(*lo.op)
		}
		return ""
	},
}

// buildLinOps turns the history into model operations for the semaphores
// in scope.
func buildLinOps(h *history.History, prefix string, r *Result) []*linOp {
	inScope := func(sem string) bool { return strings.HasPrefix(sem, prefix) }
	ops := h.Sorted()
	// Semaphores each lease acquired (for revokes without a semaphore).
	leaseSems := map[string][]*history.Op{}
	for i := range ops {
		o := &ops[i]
		if o.Kind == history.Acquire && o.Lease != "" && o.Semaphore != "" {
			known := false
			for _, x := range leaseSems[o.Lease] {
				if opSem(x) == opSem(o) {
					known = true
				}
			}
			if !known {
				leaseSems[o.Lease] = append(leaseSems[o.Lease], o)
			}
		}
	}
	noPermits := map[string]bool{}
	var out []*linOp
	add := func(o *history.Op, ns, sem string, in linInput, out0 linOutput) {
		if !inScope(sem) {
			return
		}
		p, ok := permitsOf(h, ns, sem)
		if !ok {
			if !noPermits[semKey(ns, sem)] {
				noPermits[semKey(ns, sem)] = true
				r.Notes = append(r.Notes, fmt.Sprintf("semaphore %s: permits unknown; not checked", semKey(ns, sem)))
			}
			return
		}
		in.sem, in.permits = semKey(ns, sem), p
		out = append(out, &linOp{op: o, in: in, out: out0, call: o.Invoke, ret: end(o)})
	}
	for i := range ops {
		o := &ops[i]
		pending := o.Outcome == history.Info
		if o.Outcome == history.Fail {
			switch o.Kind {
			case history.Acquire, history.Revoke:
				if o.Lease != "" && isNotFound(o) {
					// The lease is gone (no expiry in this workload).
					r.Stats["lease_not_found"]++
					if o.Semaphore != "" {
						add(o, o.Namespace, o.Semaphore, linInput{kind: lGone, lease: o.Lease}, linOutput{})
					} else {
						for _, a := range leaseSems[o.Lease] {
							add(o, a.Namespace, a.Semaphore, linInput{kind: lGone, lease: o.Lease}, linOutput{})
						}
					}
					continue
				}
				r.Stats["failed_ops_skipped"]++
			case history.Release, history.GetSemaphore, history.ListHolders:
				r.Stats["failed_ops_skipped"]++
			}
			continue
		}
		switch o.Kind {
		case history.Acquire:
			out0 := linOutput{pending: pending, outcome: o.AcquireOutcome}
			if !pending {
				switch o.AcquireOutcome {
				case history.Acquired, history.Unavailable, history.TimedOut:
				default:
					out0.pending = true // an answer we cannot read: treat as unknown
					r.Stats["acquire_unknown_outcome"]++
				}
			}
			add(o, o.Namespace, o.Semaphore, linInput{kind: lAcquire, lease: o.Lease, weight: o.Weight}, out0)
		case history.Release:
			add(o, o.Namespace, o.Semaphore, linInput{kind: lRelease, lease: o.Lease}, linOutput{pending: pending})
		case history.Revoke:
			if o.Semaphore != "" {
				add(o, o.Namespace, o.Semaphore, linInput{kind: lRevoke, lease: o.Lease}, linOutput{pending: pending})
				continue
			}
			for _, a := range leaseSems[o.Lease] {
				add(o, a.Namespace, a.Semaphore, linInput{kind: lRevoke, lease: o.Lease}, linOutput{pending: pending})
			}
		case history.GetSemaphore:
			if pending {
				continue
			}
			add(o, o.Namespace, o.Semaphore, linInput{kind: lGet}, linOutput{holds: o.ActiveHolds, count: o.HoldersCount})
		case history.ListHolders:
			if pending {
				continue
			}
			hs := make([]leaseWeight, 0, len(o.Holders))
			for _, x := range o.Holders {
				hs = append(hs, leaseWeight{x.Lease, x.Weight})
			}
			sort.Slice(hs, func(i, j int) bool { return hs[i].lease < hs[j].lease })
			add(o, o.Namespace, o.Semaphore, linInput{kind: lHolders}, linOutput{holders: hs})
		}
	}
	return out
}

// porcOps renders ops for porcupine. With cut >= 0 the history is
// truncated soundly at time cut: ops invoked after cut are dropped, and
// ops answered after cut lose their answer (mutations become pending,
// reads and no-change acquires are dropped). If the truncated history is
// not linearizable, neither is the whole one, and truncations are
// monotone in cut.
func porcOps(ops []*linOp, cut time.Duration) []porcupine.Operation {
	type item struct {
		lo      *linOp
		out     linOutput
		pending bool
	}
	var items []item
	var last time.Duration
	for _, lo := range ops {
		if cut >= 0 && lo.call > cut {
			continue
		}
		it := item{lo: lo, out: lo.out, pending: lo.out.pending}
		if !it.pending && cut >= 0 && lo.ret > cut {
			switch {
			case lo.in.kind == lGet || lo.in.kind == lHolders || lo.in.kind == lGone:
				continue
			case lo.in.kind == lAcquire && lo.out.outcome != history.Acquired:
				continue
			}
			it.pending = true
			it.out = linOutput{pending: true}
		}
		last = max(last, lo.call)
		if !it.pending {
			last = max(last, lo.ret)
		}
		items = append(items, it)
	}
	// A lease is deleted by its first answered revoke R (or was, when an
	// acquire or revoke of it was answered NotFound): from then on its
	// indeterminate ops change nothing (linStep), so those invoked before
	// R answered are closed at R's answer (had one taken effect later, it
	// changed nothing and may as well sit right after R), and those
	// invoked after are dropped. This keeps porcupine from exploring every
	// subset of a dead lease's indeterminate ops to the end of the history.
	revokedAt := map[string]time.Duration{}
	definite := 0
	for _, it := range items {
		if !it.pending {
			definite++
			if it.lo.in.kind == lRevoke || it.lo.in.kind == lGone {
				if t, ok := revokedAt[it.lo.in.lease]; !ok || it.lo.ret < t {
					revokedAt[it.lo.in.lease] = it.lo.ret
				}
			}
		}
	}
	type classKey struct {
		kind   linKind
		lease  string
		weight int64
		ret    int64
	}
	classes := map[classKey][2]int{} // class id, members so far
	clients := map[int]int{}
	out := make([]porcupine.Operation, 0, len(items))
	for _, it := range items {
		in := it.lo.in
		in.definite = definite
		in.class = -1
		ret := int64(it.lo.ret)
		if it.pending {
			ret = int64(last) + 1
			if t, ok := revokedAt[in.lease]; ok {
				if it.lo.call > t {
					continue
				}
				ret = int64(t)
			}
			k := classKey{in.kind, in.lease, in.weight, ret}
			c, ok := classes[k]
			if !ok {
				c[0] = len(classes)
			}
			in.class, in.rank = c[0], c[1]
			c[1]++
			classes[k] = c
		}
		c, ok := clients[it.lo.op.Process]
		if !ok {
			c = len(clients)
			clients[it.lo.op.Process] = c
		}
		out = append(out, porcupine.Operation{ClientId: c, Input: in, Call: int64(it.lo.call),
			Output: it.out, Return: ret, Metadata: it.lo})
	}
	return out
}

// LinearizabilityWith is Linearizability with options.
func LinearizabilityWith(h *history.History, o LinOptions) Result {
	t0 := time.Now()
	r := Result{Name: NameLinearizability, Stats: map[string]int64{}}
	prefix := o.Prefix
	if prefix == "" && h.Meta != nil {
		prefix = h.Meta["linear_prefix"]
	}
	if prefix != "" {
		r.Notes = append(r.Notes, fmt.Sprintf("semaphores with prefix %q (the linear workload)", prefix))
	}
	ops := buildLinOps(h, prefix, &r)
	porc := make([]porcupine.Operation, len(ops))
	for i, lo := range ops {
		porc[i] = porcupine.Operation{Input: lo.in, Metadata: lo}
	}
	var parts [][]*linOp
	for _, p := range linModel.Partition(porc) {
		part := make([]*linOp, len(p))
		for i, x := range p {
			part[i] = x.Metadata.(*linOp)
		}
		parts = append(parts, part)
	}
	sort.Slice(parts, func(i, j int) bool { return parts[i][0].in.sem < parts[j][0].in.sem })
	r.Stats["partitions"] = int64(len(parts))
	r.Stats["ops"] = int64(len(ops))
	for _, lo := range ops {
		if lo.out.pending {
			r.Stats["indeterminate_ops"]++
		}
	}
	if len(parts) == 0 {
		r.Valid = Unknown
		r.Skipped = true
		r.Notes = append(r.Notes, "no semaphore operations in scope: nothing to check")
		r.Elapsed = time.Since(t0)
		return r
	}

	// Check every partition, in parallel, under one deadline.
	var deadline time.Time
	if o.Timeout > 0 {
		deadline = t0.Add(o.Timeout)
	}
	verdicts := make([]porcupine.CheckResult, len(parts))
	var wg sync.WaitGroup
	sem := make(chan struct{}, max(1, runtime.GOMAXPROCS(0)))
	for i := range parts {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			verdicts[i] = checkPorc(porcOps(parts[i], -1), deadline)
		}(i)
	}
	wg.Wait()

	// The search budget after a violation (or a timeout).
	mbudget := o.MinimizeTimeout
	if mbudget <= 0 {
		mbudget = o.Timeout
	}
	if mbudget <= 0 {
		mbudget = 60 * time.Second
	}
	mdeadline := time.Now().Add(mbudget)

	// A partition that timed out may still have a short prefix that is
	// provably not linearizable (truncations are sound): probe a few.
	upper := make([]int, len(parts)) // index of a cut known illegal, or -1
	for i, v := range verdicts {
		upper[i] = -1
		if v != porcupine.Unknown {
			continue
		}
		if k := probePrefixes(parts[i], mdeadline); k >= 0 {
			verdicts[i], upper[i] = porcupine.Illegal, k
			r.Notes = append(r.Notes, fmt.Sprintf("semaphore %s: the whole check timed out (%d ops), but a prefix is not linearizable", parts[i][0].in.sem, len(parts[i])))
		} else {
			r.Notes = append(r.Notes, fmt.Sprintf("semaphore %s: porcupine timed out (%d ops): unknown", parts[i][0].in.sem, len(parts[i])))
		}
	}
	var illegal []int
	for i, v := range verdicts {
		if v == porcupine.Illegal {
			illegal = append(illegal, i)
		}
	}
	r.Valid = verdictOf(verdicts)
	r.Stats["partitions_unknown"] = int64(countOf(verdicts, porcupine.Unknown))
	r.Stats["partitions_illegal"] = int64(len(illegal))

	// Minimal sub-histories of the failing partitions.
	an := newAnomalies(o.MaxAnomalies)
	var vis []porcupine.Operation
	for _, i := range illegal {
		m := minimize(parts[i], upper[i], mdeadline)
		an.add("not-linearizable", m.describe(), m.subHistory())
		vis = append(vis, m.visual()...)
	}
	an.fill(&r)
	if o.VisualizationPath != "" && len(vis) > 0 {
		if err := visualize(h, vis, o.VisualizationPath); err != nil {
			r.Notes = append(r.Notes, "visualization: "+err.Error())
		} else {
			r.Notes = append(r.Notes, "porcupine visualization: "+o.VisualizationPath)
		}
	}
	r.Elapsed = time.Since(t0)
	return r
}

func countOf(vs []porcupine.CheckResult, v porcupine.CheckResult) int {
	n := 0
	for _, x := range vs {
		if x == v {
			n++
		}
	}
	return n
}

// verdictOf folds porcupine's per-partition results: any Illegal is an
// anomaly, else any Unknown (timeout) is unknown, else ok.
func verdictOf(vs []porcupine.CheckResult) string {
	switch {
	case countOf(vs, porcupine.Illegal) > 0:
		return Invalid
	case countOf(vs, porcupine.Unknown) > 0:
		return Unknown
	}
	return Valid
}

// checkPorc runs porcupine until the deadline (zero: none).
func checkPorc(ops []porcupine.Operation, deadline time.Time) porcupine.CheckResult {
	if len(ops) == 0 {
		return porcupine.Ok
	}
	if deadline.IsZero() {
		return porcupine.CheckOperationsTimeout(linModel, ops, 0)
	}
	left := time.Until(deadline)
	if left <= 0 {
		return porcupine.Unknown
	}
	return porcupine.CheckOperationsTimeout(linModel, ops, left)
}

// minimal is the result of minimizing one failing partition.
type minimal struct {
	sem      string
	permits  int64
	total    int           // ops in the partition
	cut      time.Duration // the witness is the history truncated here
	witness  int           // ops in the witness
	culprits []*linOp      // ops answered at cut
	window   []*linOp      // the reported sub-history
	selfOK   bool          // porcupine confirmed the window alone is not linearizable
	exact    bool          // the cut is the earliest (binary search finished)
	state    string        // end state of porcupine's longest partial linearization of the window
	partial  int           // its length
}

// minimize finds the earliest cut at which the partition's truncation is
// not linearizable (binary search: truncations are monotone), then the
// ops that matter at that point: the op(s) answered at the cut, the ops
// concurrent with them, and per lease the mutations not superseded before
// them.
func minimize(part []*linOp, upper int, deadline time.Time) *minimal {
	m := &minimal{sem: part[0].in.sem, permits: part[0].in.permits, total: len(part)}
	ts := cuts(part)
	if len(ts) == 0 { // cannot be: an all-pending history is linearizable
		m.window = part
		return m
	}
	lo, hi := -1, len(ts)-1
	if upper >= 0 {
		hi = upper
	}
	m.exact = true
	for hi-lo > 1 {
		if time.Until(deadline) <= 0 {
			m.exact = false
			break
		}
		mid := (lo + hi) / 2
		if checkPorc(porcOps(part, ts[mid]), deadline) == porcupine.Illegal {
			hi = mid
		} else {
			lo = mid
		}
	}
	m.cut = ts[hi]
	witness := porcOps(part, m.cut)
	m.witness = len(witness)
	// The truncated ops, with their pending flag in the witness.
	pend := map[*linOp]bool{}
	pret := map[*linOp]time.Duration{}
	var wops []*linOp
	for _, w := range witness {
		lo := w.Metadata.(*linOp)
		wops = append(wops, lo)
		pend[lo] = w.Output.(linOutput).pending
		pret[lo] = time.Duration(w.Return)
	}
	wend := func(lo *linOp) time.Duration { return pret[lo] }
	for _, lo := range wops {
		if !pend[lo] && lo.ret == m.cut {
			m.culprits = append(m.culprits, lo)
		}
	}
	if len(m.culprits) == 0 { // cannot be: the cut is an answer time
		m.window = wops
		return m
	}
	// Relevant ops.
	in := map[*linOp]bool{}
	for _, c := range m.culprits {
		in[c] = true
		for _, lo := range wops {
			if lo.call <= c.ret && wend(lo) >= c.call {
				in[lo] = true // concurrent with the culprit
			}
		}
	}
	cInv := m.culprits[0].call
	for _, c := range m.culprits {
		cInv = min(cInv, c.call)
	}
	// Per lease: mutations not superseded before the culprit. X is
	// superseded when a determining mutation Y of the same lease (an
	// ACQUIRED acquire, a release or revoke that answered) followed X in
	// real time and preceded the culprit.
	byLease := map[string][]*linOp{}
	for _, lo := range wops {
		if lo.in.kind == lAcquire || lo.in.kind == lRelease || lo.in.kind == lRevoke {
			if lo.in.kind == lAcquire && !pend[lo] && lo.out.outcome != history.Acquired {
				continue // no change
			}
			byLease[lo.in.lease] = append(byLease[lo.in.lease], lo)
		}
	}
	for _, muts := range byLease {
		gone := false // revoked before the culprit: holds nothing at its point
		for _, y := range muts {
			if y.in.kind == lRevoke && !pend[y] && y.ret < cInv {
				gone = true
			}
		}
		if gone {
			continue
		}
		for _, x := range muts {
			if x.call > cInv {
				continue
			}
			superseded := false
			for _, y := range muts {
				if y != x && !pend[y] && wend(x) < y.call && y.ret < cInv {
					superseded = true
					break
				}
			}
			if !superseded {
				in[x] = true
			}
		}
	}
	var w1 []*linOp
	for _, lo := range wops {
		if in[lo] {
			w1 = append(w1, lo)
		}
	}
	m.window = w1
	if time.Until(deadline) > 0 && checkPorc(porcOps(w1, m.cut), deadline) == porcupine.Illegal {
		m.selfOK = true
	} else if time.Until(deadline) > 0 {
		// Widen to every witness op that overlaps the window's time span.
		start := w1[0].call
		var w2 []*linOp
		for _, lo := range wops {
			if wend(lo) >= start {
				w2 = append(w2, lo)
			}
		}
		if len(w2) > len(w1) && checkPorc(porcOps(w2, m.cut), deadline) == porcupine.Illegal {
			m.window, m.selfOK = w2, true
		}
	}
	// Porcupine's longest partial linearization of the window, for the
	// description.
	if len(m.window) <= 400 && time.Until(deadline) > 0 {
		res, info := porcupine.CheckOperationsVerbose(linModel, porcOps(m.window, m.cut), min(time.Until(deadline), 10*time.Second))
		if res == porcupine.Illegal {
			best := []porcupine.Operation(nil)
			for _, p := range info.PartialLinearizationsOperations() {
				for _, seq := range p {
					if len(seq) > len(best) {
						best = seq
					}
				}
			}
			var s interface{} = newState(nil, 0)
			for _, op := range best {
				_, s = linStep(s, op.Input, op.Output)
			}
			m.partial = len(best)
			m.state = describeHolders(s.(*linState).holders)
		}
	}
	return m
}

// cuts are the answer times of a partition's answered ops, sorted.
func cuts(part []*linOp) []time.Duration {
	var ts []time.Duration
	for _, lo := range part {
		if !lo.out.pending {
			ts = append(ts, lo.ret)
		}
	}
	sort.Slice(ts, func(i, j int) bool { return ts[i] < ts[j] })
	return dedupe(ts)
}

// probePrefixes checks growing prefixes (1/64, 1/32, ..., all of the cuts) of a
// partition whose whole check timed out, and returns the index of the
// first cut found not linearizable, or -1.
func probePrefixes(part []*linOp, deadline time.Time) int {
	ts := cuts(part)
	for frac := 64; frac >= 1; frac /= 2 {
		k := len(ts) / frac
		if k == 0 {
			continue
		}
		switch checkPorc(porcOps(part, ts[k-1]), deadline) {
		case porcupine.Illegal:
			return k - 1
		case porcupine.Unknown:
			return -1 // larger prefixes will not do better
		}
	}
	return -1
}

func dedupe(ts []time.Duration) []time.Duration {
	out := ts[:0]
	for i, t := range ts {
		if i == 0 || t != ts[i-1] {
			out = append(out, t)
		}
	}
	return out
}

func (m *minimal) subHistory() []history.Op {
	var ops []*history.Op
	for _, lo := range m.window {
		ops = append(ops, lo.op)
	}
	return collect(ops...)
}

func (m *minimal) describe() string {
	var b strings.Builder
	fmt.Fprintf(&b, "semaphore %s (permits %d) is not linearizable", m.sem, m.permits)
	if len(m.culprits) > 0 {
		ids := make([]string, len(m.culprits))
		for i, c := range m.culprits {
			ids[i] = fmt.Sprintf("#%d (%s)", c.op.ID, describeLinOp(c.in, c.out))
		}
		if m.exact {
			fmt.Fprintf(&b, ": its history up to %s is linearizable without the answer of %s and not with it",
				secs(m.cut), strings.Join(ids, ", "))
		} else {
			fmt.Fprintf(&b, ": its history up to %s (answer of %s) is not linearizable (search for an earlier point ran out of time)",
				secs(m.cut), strings.Join(ids, ", "))
		}
	}
	fmt.Fprintf(&b, " (witness: %d of the partition's %d ops, later answers cut off).", m.witness, m.total)
	if m.selfOK {
		fmt.Fprintf(&b, " The %d ops below are by themselves not linearizable (porcupine).", len(m.window))
	} else {
		fmt.Fprintf(&b, " The %d ops below are the culprit, the ops concurrent with it and each lease's last possible mutations; the full witness is needed to prove it.", len(m.window))
	}
	if m.state != "" {
		fmt.Fprintf(&b, " Porcupine's longest partial linearization of them (%d ops) ends in state %s.", m.partial, m.state)
	}
	return b.String()
}

// visual is the reported window, for the visualization.
func (m *minimal) visual() []porcupine.Operation {
	return porcOps(m.window, m.cut)
}

func visualize(h *history.History, ops []porcupine.Operation, path string) error {
	_, info := porcupine.CheckOperationsVerbose(linModel, ops, 30*time.Second)
	var ann []porcupine.Annotation
	for _, n := range h.Nemeses {
		ann = append(ann, porcupine.Annotation{Tag: "nemesis", Start: int64(n.Start), End: int64(n.End),
			Description: n.Kind, Details: n.Detail, BackgroundColor: "#f7d7d7"})
	}
	if len(ann) > 0 {
		info.AddAnnotations(ann)
	}
	return porcupine.VisualizePath(linModel, info, path)
}
