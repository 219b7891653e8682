// Package history is the record of a fault-injection run: every client
// operation with its invoke and completion times (monotonic, since the
// run's start), its inputs and what the client saw, plus the nemesis
// windows. Checkers read it; the runner writes it (JSON lines).
package history

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"
)

// Kinds of operations.
const (
	CreateLease  = "create_lease"
	Refresh      = "refresh"
	Revoke       = "revoke"
	Acquire      = "acquire"
	Release      = "release"
	GetSemaphore = "get"     // GetSemaphore: ActiveHolds, HoldersCount
	ListHolders  = "holders" // ListSemaphoreHolders: Holders
	FenceWrite   = "fence_write"
	// Calls a node answers from its own state, with their access check
	// made there (docs/SECURITY.md): recorded for the access checker, in
	// no model.
	ClusterStatus = "cluster_status" // GetClusterStatus
	ListWaiters   = "waiters"        // ListSemaphoreWaiters
)

// Kinds of the lock workload's operations (lock leases are not semaphore
// leases: their own kinds keep them out of the semaphore checkers).
const (
	LockCreateLease = "lock_create_lease" // CreateLockLease: Lease is the id returned
	LockRefresh     = "lock_refresh"      // RefreshLockLease
	LockRevoke      = "lock_revoke"       // RevokeLockLease
	LockAcquire     = "lock_acquire"      // AcquireLock: Lock, Exclusive, Timeout; AcquireOutcome, Token, Contention
	LockRelease     = "lock_release"      // ReleaseLock: Released
	GetLock         = "get_lock"          // GetLock: Locks holds the one lock (holders empty when unlocked)
	ListLocks       = "list_locks"        // ListLocks: Lock is the prefix, Locks every held lock under it
	LockWaiters     = "lock_waiters"      // ListLockWaiters: Waiters
)

// Kinds of the wait-group workload's operations.
const (
	WGCreate   = "wg_create"   // CreateWaitGroup: WaitGroup, Counter and ExpiresAt as asked; WG
	WGComplete = "wg_complete" // CompleteJobsFromWaitGroup: WaitGroup, Jobs; WG, Newly (or, refused WAIT_GROUP_NOT_ACTIVE, ErrStatus)
	WGGet      = "wg_get"      // GetWaitGroup: WG
	WGWait     = "wg_wait"     // WaitForWaitGroup: Timeout; WG, WaitOutcome
	WGJobs     = "wg_jobs"     // ListWaitGroupCompletedJobs: Listed (in job_id order), Truncated
)

// Kinds of the barrier workload's operations.
const (
	BarrierCreate       = "barrier_create"       // CreateBarrier: Barrier, Expected as asked; B
	BarrierArrive       = "barrier_arrive"       // ArriveAtBarrier: BarrierProcess, Generation (expected_generation); B, AllArrived (or, GENERATION_MISMATCH, CurrentGeneration)
	BarrierWait         = "barrier_wait"         // WaitAtBarrier: Generation (expected_generation), Timeout; B, WaitOutcome (or CurrentGeneration)
	BarrierGet          = "barrier_get"          // GetBarrier: B
	BarrierParticipants = "barrier_participants" // ListBarrierParticipants: Generation (asked, 0 = current); ListedGeneration, Participants, Truncated
)

// Wait outcomes (Op.WaitOutcome, when Outcome == OK).
const (
	WaitCompleted = "COMPLETED" // WaitForWaitGroup
	WaitExpired   = "EXPIRED"   // WaitForWaitGroup
	WaitTripped   = "TRIPPED"   // WaitAtBarrier
	WaitTimedOut  = "TIMED_OUT" // both
)

// Wait group statuses (WaitGroupView.Status, Op.ErrStatus).
const (
	WGActive    = "ACTIVE"
	WGCompleted = "COMPLETED"
	WGExpired   = "EXPIRED"
)

// Outcomes.
const (
	OK   = "ok"   // the call completed and succeeded (for acquire: any outcome but an error)
	Fail = "fail" // the call completed with an error that proves it did not happen (or changed nothing)
	Info = "info" // indeterminate: timeout, connection cut; it may or may not have happened
)

// Acquire outcomes (Op.AcquireOutcome, when Outcome == OK).
const (
	Acquired    = "ACQUIRED"
	Unavailable = "UNAVAILABLE"
	TimedOut    = "TIMED_OUT"
)

// Holder is one holder seen by a ListHolders read.
type Holder struct {
	Lease  string `json:"lease"`
	Weight int64  `json:"weight"`
	Token  uint64 `json:"token"`
}

// LockHolder is one holder of a lock as a read showed it.
type LockHolder struct {
	Lease     string `json:"lease"`
	Exclusive bool   `json:"excl,omitempty"`
	Token     uint64 `json:"token"`
}

// LockView is one lock as a read showed it.
type LockView struct {
	Name    string       `json:"name"`
	State   string       `json:"state,omitempty"` // UNLOCKED, SHARED_LOCKED, EXCLUSIVE_LOCKED
	Holders []LockHolder `json:"holders,omitempty"`
}

// LockWaiter is one waiting call as ListLockWaiters showed it.
type LockWaiter struct {
	Lease     string `json:"lease"`
	Exclusive bool   `json:"excl,omitempty"`
	Position  int64  `json:"pos,omitempty"`
	Upgrade   bool   `json:"upgrade,omitempty"`
}

// WaitGroupView is a wait group as a response showed it (times are the
// leader's, Unix ns).
type WaitGroupView struct {
	Counter      int64  `json:"counter"`
	Completed    int64  `json:"completed"`
	Status       string `json:"status"` // ACTIVE, COMPLETED, EXPIRED
	ExpiresAt    int64  `json:"expires_at,omitempty"`
	FinishedAt   int64  `json:"finished_at,omitempty"`
	LastActivity int64  `json:"last_activity_at,omitempty"`
}

// WaitGroupJob is one completed job as ListWaitGroupCompletedJobs showed it.
type WaitGroupJob struct {
	ID          string `json:"id"`
	CompletedAt int64  `json:"at,omitempty"` // the leader's time of the commit that completed it
}

// BarrierView is a barrier as a response showed it.
type BarrierView struct {
	Expected     int64 `json:"expected"`
	Arrived      int64 `json:"arrived"`
	Generation   int64 `json:"generation"`
	LastActivity int64 `json:"last_activity_at,omitempty"`
}

// Participant is one arrival as ListBarrierParticipants showed it.
type Participant struct {
	Process    string `json:"process"`
	Generation int64  `json:"generation"`
	ArrivedAt  int64  `json:"at,omitempty"`
}

// Op is one client operation.
type Op struct {
	ID      int    `json:"id"`
	Process int    `json:"process"` // the client (worker) that ran it; one op at a time per process
	Kind    string `json:"kind"`
	Node    string `json:"node,omitempty"` // endpoint the client used, when known

	Namespace string `json:"ns,omitempty"`
	Semaphore string `json:"sem,omitempty"`
	Lease     string `json:"lease,omitempty"` // acquire/release/refresh/revoke/fence_write; create_lease: the id returned
	Weight    int64  `json:"weight,omitempty"`
	TTL       int64  `json:"ttl,omitempty"`     // create_lease/refresh: ttl_seconds
	Timeout   int64  `json:"timeout,omitempty"` // acquire: timeout_seconds

	// Times since the run's start (monotonic clock). Complete is 0 for an
	// indeterminate op (Outcome Info): it has an open end.
	Invoke   time.Duration `json:"invoke"`
	Complete time.Duration `json:"complete"`

	Outcome string `json:"outcome"`
	Error   string `json:"error,omitempty"` // gRPC code and message for Fail/Info, for people
	// Code is the gRPC code name ("NotFound", "Unavailable", ...) and
	// Reason the google.rpc.ErrorInfo reason (package apierr) of a failed
	// call; checkers decide on these, never on Error's text.
	Code   string `json:"code,omitempty"`
	Reason string `json:"reason,omitempty"`

	// Results, by kind.
	AcquireOutcome string   `json:"acquire_outcome,omitempty"`
	Token          uint64   `json:"token,omitempty"`      // acquire ACQUIRED: fencing token; fence_write: the token written
	ExpiresAt      int64    `json:"expires_at,omitempty"` // server's expires_at (Unix ns) of the lease/hold
	ActiveHolds    int64    `json:"active_holds,omitempty"`
	HoldersCount   int64    `json:"holders_count,omitempty"`
	Holders        []Holder `json:"holders,omitempty"`
	// FenceWrite: Accepted is false when the register rejected the token
	// (an older token than one it already saw).
	Accepted bool `json:"accepted,omitempty"`

	// Locks. Lock is the lock's name (list_locks: the prefix, "" for all);
	// Exclusive the mode a lock_acquire asked for.
	Lock      string `json:"lock,omitempty"`
	Exclusive bool   `json:"excl,omitempty"`
	// Contention is a lock_acquire's reason when not ACQUIRED (PEER,
	// ANCESTOR, DESCENDANT, QUEUE) and Blocking the locks it named.
	Contention string   `json:"contention,omitempty"`
	Blocking   []string `json:"blocking,omitempty"`
	// Released: a lock_release's answer (false: the lease did not hold it).
	Released bool `json:"released,omitempty"`
	// Locks: what get_lock / list_locks read; Truncated when a list_locks
	// had more pages than it read (locks after the last one listed are
	// then unknown). Waiters: what lock_waiters read.
	Locks     []LockView   `json:"locks,omitempty"`
	Truncated bool         `json:"truncated,omitempty"`
	Waiters   []LockWaiter `json:"waiters,omitempty"`

	// Wait groups. WaitGroup is the group's name; Jobs the job_ids a
	// wg_complete sent; Counter the counter a wg_create asked for (its
	// ExpiresAt: the expires_at asked for, 0 never); WG the group as the
	// answer showed it; Newly a completion's newly_completed; Listed what
	// a wg_jobs read (Truncated: more pages). ErrStatus is the status a
	// WAIT_GROUP_NOT_ACTIVE refusal named.
	WaitGroup string         `json:"wg,omitempty"`
	Jobs      []string       `json:"jobs,omitempty"`
	Counter   int64          `json:"counter,omitempty"`
	WG        *WaitGroupView `json:"wg_state,omitempty"`
	Newly     int64          `json:"newly,omitempty"`
	Listed    []WaitGroupJob `json:"listed,omitempty"`
	ErrStatus string         `json:"err_status,omitempty"`
	// WaitOutcome: a wg_wait's or barrier_wait's outcome (COMPLETED,
	// EXPIRED, TRIPPED, TIMED_OUT).
	WaitOutcome string `json:"wait_outcome,omitempty"`

	// Barriers. Barrier is the barrier's name; Expected the
	// expected_processes a barrier_create asked for; BarrierProcess an
	// arrival's process_id; Generation an arrival's or wait's
	// expected_generation, or the generation a participants read asked for
	// (0: the current one); B the barrier as the answer showed it;
	// AllArrived an arrival's all_arrived; ListedGeneration the generation
	// a participants read listed, Participants what it listed;
	// CurrentGeneration the current generation a GENERATION_MISMATCH
	// refusal named.
	Barrier           string        `json:"barrier,omitempty"`
	Expected          int64         `json:"expected,omitempty"`
	BarrierProcess    string        `json:"bproc,omitempty"`
	Generation        int64         `json:"gen,omitempty"`
	B                 *BarrierView  `json:"barrier_state,omitempty"`
	AllArrived        bool          `json:"all_arrived,omitempty"`
	ListedGeneration  int64         `json:"listed_gen,omitempty"`
	Participants      []Participant `json:"participants,omitempty"`
	CurrentGeneration int64         `json:"current_gen,omitempty"`
}

// Nemesis is one fault window: from Start (fault injected) to End (healed).
type Nemesis struct {
	Kind   string        `json:"kind"` // kill, pause, partition-halves, partition-majority, isolate-leader, bridge, membership, transfer-storm
	Detail string        `json:"detail,omitempty"`
	Start  time.Duration `json:"start"`
	End    time.Duration `json:"end"`
}

// Keys of History.Meta that a run with TLS and access control fills when
// something went wrong outside the recorded operations (one finding a
// line); the access checker reports each as an anomaly.
const (
	// MetaTLSFailures: TLS handshakes that failed for a reason no retry
	// fixes (a certificate that does not verify, a refused client
	// certificate, a plaintext answer).
	MetaTLSFailures = "tls_handshake_failures"
	// MetaHarnessRefusals: the harness's own calls (setup, nemeses,
	// leader lookups) answered Unauthenticated or PermissionDenied, as
	// "method code reason xN".
	MetaHarnessRefusals = "harness_refusals"
)

// History is a whole run.
type History struct {
	Seed     int64            `json:"seed"`
	Nodes    int              `json:"nodes"`
	Duration time.Duration    `json:"duration"`
	Permits  map[string]int64 `json:"permits"` // semaphore -> permits (fixed during a run)
	// LockNames are the lock workload's lock names (the lock checkers also
	// find them in the ops; this lists them for the report).
	LockNames []string `json:"lock_names,omitempty"`
	// WaitGroups and Barriers count the groups and barriers the wait
	// workloads created (for the report; the checkers read the ops).
	WaitGroups int               `json:"wait_groups,omitempty"`
	Barriers   int               `json:"barriers,omitempty"`
	Meta       map[string]string `json:"meta,omitempty"`
	Ops        []Op              `json:"-"`
	Nemeses    []Nemesis         `json:"-"`
	// HealedAt is when the final heal finished; checks of "after healing"
	// (lost acknowledged grants, liveness) use it.
	HealedAt time.Duration `json:"healed_at"`
	// ServedAgainAt is when a fresh client first succeeded after HealedAt
	// (0: never within the run).
	ServedAgainAt time.Duration `json:"served_again_at"`
}

// Sorted returns the ops ordered by invoke time (stable on ID).
func (h *History) Sorted() []Op {
	ops := append([]Op(nil), h.Ops...)
	sort.SliceStable(ops, func(i, j int) bool {
		if ops[i].Invoke != ops[j].Invoke {
			return ops[i].Invoke < ops[j].Invoke
		}
		return ops[i].ID < ops[j].ID
	})
	return ops
}

type line struct {
	Header  *History `json:"header,omitempty"`
	Op      *Op      `json:"op,omitempty"`
	Nemesis *Nemesis `json:"nemesis,omitempty"`
}

// Write stores the history as JSON lines: a header, then ops, then nemeses.
func (h *History) Write(w io.Writer) error {
	enc := json.NewEncoder(w)
	if err := enc.Encode(line{Header: h}); err != nil {
		return err
	}
	for i := range h.Ops {
		if err := enc.Encode(line{Op: &h.Ops[i]}); err != nil {
			return err
		}
	}
	for i := range h.Nemeses {
		if err := enc.Encode(line{Nemesis: &h.Nemeses[i]}); err != nil {
			return err
		}
	}
	return nil
}

// Read parses what Write wrote.
func Read(r io.Reader) (*History, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<26)
	var h *History
	for n := 1; sc.Scan(); n++ {
		var l line
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			return nil, fmt.Errorf("history line %d: %w", n, err)
		}
		switch {
		case l.Header != nil:
			h = l.Header
		case h == nil:
			return nil, fmt.Errorf("history line %d: no header before it", n)
		case l.Op != nil:
			if l.Op.Code == "" && l.Op.Error != "" {
				// Written before ops had a Code: Error starts with it.
				l.Op.Code, _, _ = strings.Cut(l.Op.Error, ":")
			}
			h.Ops = append(h.Ops, *l.Op)
		case l.Nemesis != nil:
			h.Nemeses = append(h.Nemeses, *l.Nemesis)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if h == nil {
		return nil, fmt.Errorf("history: empty")
	}
	return h, nil
}

// Load reads a history file.
func Load(path string) (*History, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return Read(f)
}
