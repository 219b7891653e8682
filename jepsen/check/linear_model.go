package check

import (
	"fmt"
	"hash/fnv"
	"sort"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/grackle-coord/grackle/jepsen/history"
)

// The semaphore model the linearizability checker checks against.

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
