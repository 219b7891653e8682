// Package fsm is Grackle's replicated state machine: namespaces,
// semaphores, holders, semaphore leases and cluster membership. Every node
// applies the same commands in the same order and reaches the same state:
// nothing here reads a clock, draws a random number or depends on map
// iteration order; the leader puts time and ids into each command.
package fsm

import (
	"fmt"
	"math"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"

	"github.com/grackle-coord/grackle/internal/vtcodec"
	fsmpb "github.com/grackle-coord/grackle/proto/grackle/fsm/v1"
	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
)

// FSM is the raft.FSM (and raft.BatchingFSM) of a Grackle node. Readers
// take the read lock; Apply takes the write lock once per batch.
type FSM struct {
	mu      sync.RWMutex
	st      *state
	tmpDir  string
	applied func(index uint64, cmd *fsmpb.Command, res *Result)
	index   appliedIndex // st.lastIndex, for WaitApplied

	// earliest is the state's earliest expires_at (math.MaxInt64: no
	// lease), as of the last apply: NextExpiry reads it without the lock.
	earliest atomic.Int64
	// timerAt is the earliest time-driven change of a wait group or a
	// barrier (math.MaxInt64: none), published like earliest.
	timerAt atomic.Int64

	log      hclog.Logger
	rejected atomic.Uint64 // Raft entries rejected since this FSM was made
}

// published makes the state's index visible to WaitApplied, and its
// earliest expiry to NextExpiry; the apply methods (and Restore) call it
// with the write lock held.
func (f *FSM) published() {
	f.index.set(f.st.lastIndex)
	next := int64(math.MaxInt64)
	if k, ok := f.st.expiry.Min(); ok {
		next = k.at
	}
	f.earliest.Store(next)
	timer := int64(math.MaxInt64)
	if at, ok := f.st.nextTimer(); ok {
		timer = at
	}
	f.timerAt.Store(timer)
}

// Options configure an FSM.
type Options struct {
	// TempDir holds the scratch bbolt files of Persist and Restore
	// ("" = the system's temporary directory).
	TempDir string
	// Applied, when set, sees every command ApplyBatch applied, with its
	// result, in log order: each command of a Batch entry on its own (at
	// the batch's index), never the Batch itself. It runs on Raft's apply
	// goroutine once the batch applied, outside the state lock; it must not
	// block. It is how metrics and the audit trail learn what applied
	// without decoding the entries a second time.
	Applied func(index uint64, cmd *fsmpb.Command, res *Result)
	// Logger receives the ERROR line of every rejected entry (nil: none).
	Logger hclog.Logger
}

// New returns an empty state machine with the default limits.
func New(opts Options) *FSM {
	f := &FSM{st: newState(), tmpDir: opts.TempDir, applied: opts.Applied, log: opts.Logger}
	f.earliest.Store(math.MaxInt64)
	f.timerAt.Store(math.MaxInt64)
	return f
}

var (
	_ raft.FSM         = (*FSM)(nil)
	_ raft.BatchingFSM = (*FSM)(nil)
)

// Encode serializes a command for the Raft log. It uses the protobuf
// runtime, which refuses a string that is not valid UTF-8: the log only
// ever holds valid strings, which is what lets Decode skip that check (and
// what a snapshot, written by the runtime, needs).
func Encode(cmd *fsmpb.Command) ([]byte, error) {
	return proto.MarshalOptions{Deterministic: true}.Marshal(cmd)
}

// EncodeBatch serializes a Batch command of commands that Encode made.
// It holds only bytes and no map, so the generated encoder (package
// vtcodec) writes what the runtime would, without its reflection.
func EncodeBatch(cmds [][]byte) ([]byte, error) {
	return vtcodec.Marshal(&fsmpb.Command{Op: &fsmpb.Command_Batch{Batch: &fsmpb.Batch{Commands: cmds}}})
}

// Decode parses a Raft log entry's data with the generated decoder
// (package vtcodec): a third less time than the runtime's on a packed
// entry (BenchmarkDecodeBatch64). Where it differs from the runtime, the
// log's entries are all made by Encode and EncodeBatch: it does not check
// that strings are valid UTF-8 (Encode refuses an invalid one); it refuses
// a known field sent with another wire type (the runtime kept it as an
// unknown field; no encoder writes one); and its recursion is bounded by
// the Command type, which cannot contain itself (a Batch holds bytes).
func Decode(data []byte) (*fsmpb.Command, error) {
	cmd := &fsmpb.Command{}
	if err := cmd.UnmarshalVT(data); err != nil {
		return nil, fmt.Errorf("fsm: decode command: %w", err)
	}
	return cmd, nil
}

// ApplyBytes applies one entry's bytes as the Raft path does (Apply):
// bytes that do not decode and unknown ops are rejected (a CodeInternal
// result) and change nothing. It never panics.
func (f *FSM) ApplyBytes(index uint64, data []byte) *Result {
	res, _ := f.Apply(&raft.Log{Index: index, Type: raft.LogCommand, Data: data}).(*Result)
	return res
}

// rejectedResult is the result of an entry rejected as a whole (see
// ApplyBatch).
func rejectedResult(index uint64, e *Error) *Result {
	e.Msg = fmt.Sprintf("raft entry %d rejected: %s", index, e.Msg)
	return &Result{Index: index, Err: e, Rejected: true}
}

// RejectedEntries is the number of Raft entries this state machine
// rejected since it was made (replays after a restart count again).
func (f *FSM) RejectedEntries() uint64 { return f.rejected.Load() }

// ApplyCommand applies an already decoded command (tests, benchmarks).
func (f *FSM) ApplyCommand(index uint64, cmd *fsmpb.Command) *Result {
	f.mu.Lock()
	defer f.mu.Unlock()
	defer f.published()
	res := f.st.applyCommand(index, cmd)
	res.batchCmds = nil
	return res
}

// Apply implements raft.FSM: a batch of one.
func (f *FSM) Apply(l *raft.Log) interface{} { return f.ApplyBatch([]*raft.Log{l})[0] }

// ApplyBatch implements raft.BatchingFSM. Commands are decoded outside the
// lock; the batch is applied in one pass under it.
//
// Every entry is untrusted input: the Raft port may take entries from
// anyone who reaches it (peers without TLS). An entry this server cannot
// apply (bytes that do not decode, an op it does not know that the writer
// did not mark skippable, a batch that is not well formed) is rejected: its
// result is Rejected with a CodeInternal error naming the index, nothing
// changes but the applied index, the rejection is logged at ERROR with the
// entry's index and counted (RejectedEntries). Every node of one version
// decides the same on the same bytes, so the replicas stay equal; a node
// older than an op the others know rejects what they apply, which its log
// line and counter show (docs/SECURITY.md).
func (f *FSM) ApplyBatch(logs []*raft.Log) []interface{} {
	cmds := make([]*fsmpb.Command, len(logs))
	var undecodable []error // per entry, allocated on the first failure
	for i, l := range logs {
		if l.Type != raft.LogCommand {
			continue
		}
		cmd, err := Decode(l.Data)
		if err != nil {
			if undecodable == nil {
				undecodable = make([]error, len(logs))
			}
			undecodable[i] = err
			continue
		}
		cmds[i] = cmd
	}
	out := make([]interface{}, len(logs))
	// subs[i]: the decoded commands of entry i when it is a Batch.
	var subs [][]*fsmpb.Command
	if f.applied != nil {
		subs = make([][]*fsmpb.Command, len(logs))
	}
	var rejected []*Result
	f.mu.Lock()
	for i, l := range logs {
		if cmds[i] == nil {
			if l.Index > f.st.lastIndex {
				f.st.lastIndex = l.Index
			}
			if undecodable != nil && undecodable[i] != nil {
				res := rejectedResult(l.Index, errf(CodeInternal, "%v", undecodable[i]))
				out[i] = res
				rejected = append(rejected, res)
			}
			continue
		}
		res := f.st.applyCommand(l.Index, cmds[i])
		if res.Err != nil && res.Err.Code == CodeInternal {
			// applyCommand changed nothing (but the index) for it.
			res = rejectedResult(l.Index, res.Err)
			out[i] = res
			rejected = append(rejected, res)
			continue
		}
		if subs != nil {
			subs[i] = res.batchCmds
		}
		res.batchCmds = nil
		out[i] = res
	}
	f.published()
	f.mu.Unlock()
	for _, res := range rejected {
		f.rejected.Add(1)
		if f.log != nil {
			f.log.Error("rejected a Raft entry it cannot apply; the state is unchanged", "index", res.Index, "error", res.Err.Msg)
		}
	}
	if f.applied != nil {
		for i, l := range logs {
			res, _ := out[i].(*Result)
			switch {
			case res == nil, res.Rejected:
			case subs[i] != nil:
				for j, sub := range subs[i] {
					if j < len(res.Batch) && res.Batch[j] != nil {
						f.applied(l.Index, sub, res.Batch[j])
					}
				}
			default:
				f.applied(l.Index, cmds[i], res)
			}
		}
	}
	return out
}

// ---- reads: each takes the reader's now (the leader's clock) ----

func (f *FSM) read() (*state, func()) {
	f.mu.RLock()
	return f.st, f.mu.RUnlock
}

func nilIfNoErr(e *Error) error {
	if e == nil {
		return nil
	}
	return e
}

// GetNamespace returns a namespace or a NotFound error.
func (f *FSM) GetNamespace(name string) (*pb.Namespace, error) {
	s, done := f.read()
	defer done()
	v, err := s.getNamespace(name)
	return v, nilIfNoErr(err)
}

// ListNamespaces pages through namespaces in name order.
func (f *FSM) ListNamespaces(limit int32, token string) (Page[*pb.Namespace], error) {
	s, done := f.read()
	defer done()
	p, err := s.listNamespaces(limit, token)
	return p, nilIfNoErr(err)
}

// GetSemaphore returns a semaphore with its effective holds at now.
func (f *FSM) GetSemaphore(ns, name string, now int64) (*pb.Semaphore, error) {
	s, done := f.read()
	defer done()
	v, err := s.getSemaphore(ns, name, now)
	return v, nilIfNoErr(err)
}

// ListSemaphores pages through a namespace's semaphores in name order.
func (f *FSM) ListSemaphores(ns string, limit int32, token string, now int64) (Page[*pb.Semaphore], error) {
	s, done := f.read()
	defer done()
	p, err := s.listSemaphores(ns, limit, token, now)
	return p, nilIfNoErr(err)
}

// ListSemaphoreHolders pages through live holders in acquisition order.
func (f *FSM) ListSemaphoreHolders(ns, sem string, limit int32, token string, now int64) (Page[*pb.SemaphoreHolder], error) {
	s, done := f.read()
	defer done()
	p, err := s.listHolders(ns, sem, limit, token, now)
	return p, nilIfNoErr(err)
}

// GetSemaphoreLease returns a lease alive at now, or NotFound.
func (f *FSM) GetSemaphoreLease(ns, id string, now int64) (*pb.SemaphoreLease, error) {
	s, done := f.read()
	defer done()
	v, err := s.getLeaseView(ns, id, now)
	return v, nilIfNoErr(err)
}

// ListSemaphoreLeases pages through leases alive at now, by lease id;
// a non-empty proc keeps only that process's leases.
func (f *FSM) ListSemaphoreLeases(ns, proc string, limit int32, token string, now int64) (Page[*pb.SemaphoreLease], error) {
	s, done := f.read()
	defer done()
	lp, err := s.listLeases(ns, proc, LeaseIDPrefix, limit, token, now)
	if err != nil {
		return Page[*pb.SemaphoreLease]{}, err
	}
	p := Page[*pb.SemaphoreLease]{Next: lp.Next, Previous: lp.Previous}
	for _, l := range lp.Items {
		p.Items = append(p.Items, l.view())
	}
	return p, nil
}

// ---- what the leader needs to run queues and expiry ----

// LastNow is the greatest `now` applied: a new leader never stamps earlier.
func (f *FSM) LastNow() int64 {
	s, done := f.read()
	defer done()
	return s.lastNow
}

// AppliedIndex is the raft index of the last entry applied.
func (f *FSM) AppliedIndex() uint64 {
	s, done := f.read()
	defer done()
	return s.lastIndex
}

// NextExpiry is the earliest lease expires_at, if any lease exists, as of
// the last apply that finished. It takes no lock: the leader reads it after
// each of its writes (a hot path, where the state lock would wait for the
// next entry's apply).
func (f *FSM) NextExpiry() (int64, bool) {
	at := f.earliest.Load()
	return at, at != math.MaxInt64
}

// NextTimer is the earliest time-driven change of a wait group or a
// barrier (an expiry, a deletion), if any, as NextExpiry reads it.
func (f *FSM) NextTimer() (int64, bool) {
	at := f.timerAt.Load()
	return at, at != math.MaxInt64
}

// NextDeadline is the earlier of NextExpiry and NextTimer: when the
// leader's expiry loop must look next.
func (f *FSM) NextDeadline() (int64, bool) {
	at := min(f.earliest.Load(), f.timerAt.Load())
	return at, at != math.MaxInt64
}

// LeaseHolds lists the semaphores a lease holds, in name order.
func (f *FSM) LeaseHolds(ns, leaseID string) []string {
	s, done := f.read()
	defer done()
	var sems []string
	if li := s.identOf(ns, leaseID); li != nil {
		for _, h := range li.holds {
			sems = append(sems, h.sem)
		}
	}
	return sems
}

// HeldWeight is the weight a lease holds on a semaphore (0 if none).
func (f *FSM) HeldWeight(ns, sem, leaseID string) int64 {
	s, done := f.read()
	defer done()
	h, _, ok := s.holdOf(ns, sem, leaseID)
	if !ok {
		return 0
	}
	return h.weight
}

// SemaphoreCapacity returns permits and the stored (conservative) holds
// of a semaphore: what a grant is checked against.
func (f *FSM) SemaphoreCapacity(ns, sem string) (permits, holds int64, ok bool) {
	s, done := f.read()
	defer done()
	x, ok := s.getSem(ns, sem)
	return x.permits, x.holds, ok
}

// Limits returns the replicated limits in force.
func (f *FSM) Limits() Limits {
	s, done := f.read()
	defer done()
	return s.limits
}

// Member is one replicated cluster member record.
type Member struct {
	NodeID, RaftAddress, GRPCAddress string
	// Voter: the member was added to vote; while Raft has it as a
	// nonvoter, the leader promotes it once it has caught up.
	Voter bool
}

// Members lists the replicated member records in node id order.
func (f *FSM) Members() []Member {
	s, done := f.read()
	defer done()
	var ms []Member
	s.members.Scan(func(m memberRec) bool {
		ms = append(ms, Member{m.id, m.raftAddr, m.grpcAddr, m.voter})
		return true
	})
	return ms
}

// StateBytes is the state's accounted size, what Limits.MaxStateBytes
// bounds (quota.go): the same on every replica at the same index.
func (f *FSM) StateBytes() int64 {
	s, done := f.read()
	defer done()
	return s.stateBytes()
}

// Counts reports the sizes of the main tables (metrics, tests).
type Counts struct {
	Namespaces, Semaphores, Leases, Holders int
	// LockLeases is part of Leases; Locks are held locks, LockHolders
	// their holds.
	LockLeases, Locks, LockHolders int
	// Wait groups (ActiveWaitGroups of them ACTIVE as stored), their
	// completed jobs, barriers.
	WaitGroups, ActiveWaitGroups, CompletedJobs, Barriers int
}

// Counts returns the number of stored records per table.
func (f *FSM) Counts() Counts {
	s, done := f.read()
	defer done()
	c := Counts{Namespaces: s.namespaces.Len(), Semaphores: s.semaphores.Len(), Leases: s.leases.Len(), Holders: s.holders.Len(),
		Locks: s.locks.Len(), LockHolders: s.lockHolds.Len(), WaitGroups: s.waitGroups.Len(), CompletedJobs: s.jobs.Len(),
		Barriers: s.barriers.Len()}
	s.waitGroups.Scan(func(w wgRec) bool {
		if w.status == pb.WaitGroupStatus_WAIT_GROUP_STATUS_ACTIVE {
			c.ActiveWaitGroups++
		}
		return true
	})
	s.namespaces.Scan(func(n nsRec) bool {
		c.LockLeases += int(n.lockLeaseCount)
		return true
	})
	return c
}

// Expiring is what an ExpireLeases command applied at a `now` no earlier
// than the one given here will free, at least (later leases may expire
// too by then): per semaphore, the weight of the holds of the leases
// expired at now, and per namespace, their lock holds. At most max leases
// are looked at (0: no bound), earliest first, as the command reaps them.
// The leader attaches the grants of the waiters this makes room for to
// the expiry command itself, so a hand-off on expiry takes one commit.
func (f *FSM) Expiring(now int64, max int) (weights map[SemKey]int64, locks map[string][]LockChange) {
	s, done := f.read()
	defer done()
	n := 0
	s.expiry.Scan(func(k expiryKey) bool {
		if k.at > now || (max > 0 && n >= max) {
			return false
		}
		n++
		li := k.leaseIdent
		for _, h := range li.holds {
			if weights == nil {
				weights = map[SemKey]int64{}
			}
			weights[SemKey{h.ns, h.sem}] += h.weight
		}
		for _, h := range li.lockList() {
			if locks == nil {
				locks = map[string][]LockChange{}
			}
			locks[h.ns] = append(locks[h.ns], LockChange{Name: h.name, LeaseID: li.id, Gone: true})
		}
		return true
	})
	return weights, locks
}
