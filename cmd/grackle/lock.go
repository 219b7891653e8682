package main

// `grackle lock ...`: locks (acquire, release, get, list, delete, waiters,
// watch) and, under `grackle lock lease ...`, the lock leases that hold
// them. Lock leases live under `lock` rather than beside `lease` because
// the two kinds are not interchangeable: `grackle lease` is for semaphores,
// and everything a lock needs is found under `grackle lock`.

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/proto"

	"github.com/grackle-coord/grackle/client"
	"github.com/grackle-coord/grackle/fsm"
	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
)

// Lease id prefixes of the two kinds, fixed by the API: the server
// answers NotFound when a lease of one kind is used where the other is
// needed.
const (
	lockLeasePrefix      = fsm.LockLeaseIDPrefix
	semaphoreLeasePrefix = fsm.LeaseIDPrefix
)

func (a *app) lockCmd() *cobra.Command {
	cmd := a.group("lock", "Acquire, release and inspect locks (and, under \"lock lease\", lock leases)")
	cmd.Long = `Locks are shared or exclusive, on /-separated names: a lock on "orders"
covers "orders/eu" and "orders/eu/42". A lock needs no create call: it exists
while someone holds it. It is held under a lock lease (ll_...), which
"grackle lock lease create" makes; semaphore leases (ls_..., "grackle
lease") cannot hold locks. Every grant carries a fencing token.`
	cmd.AddCommand(
		a.lockAcquireCmd(),
		a.lockReleaseCmd(),
		a.lockGetCmd(),
		a.lockListCmd(),
		a.lockDeleteCmd(),
		a.lockWaitersCmd(),
		a.lockWatchCmd(),
		a.lockLeaseCmd(),
	)
	return cmd
}

// checkLockLease is the local check of a --lease given to a lock command:
// required, not a semaphore lease (which the server would answer with
// NotFound, and this command would take for a lost lease), and of the
// shape the API accepts.
func checkLockLease(lease, ns string) error {
	if lease == "" {
		return usagef("--lease is required (create one with: grackle lock lease create %s --process-id ...)", ns)
	}
	if strings.HasPrefix(lease, semaphoreLeasePrefix) {
		return usagef("--lease %s: a semaphore lease; locks are held under lock leases (%s...: grackle lock lease create %s --process-id ...)", quoteArg(lease), lockLeasePrefix, ns)
	}
	if err := fsm.ValidateLockLeaseID("lease_id", lease); err != nil {
		return usagef("--lease %s: %s", quoteArg(lease), fsmProblem(err))
	}
	return nil
}

// modeName is "exclusive" or "shared".
func modeName(exclusive bool) string {
	if exclusive {
		return "exclusive"
	}
	return "shared"
}

func (a *app) lockAcquireCmd() *cobra.Command {
	var (
		lease  string
		shared bool
		wait   time.Duration
		md     []string
	)
	cmd := &cobra.Command{
		Use:   "acquire NAMESPACE LOCK --lease LEASE_ID",
		Short: "Acquire a lock (exclusive, or --shared) under a lock lease, waiting up to --wait",
		Long: `Acquire a lock under a lock lease: exclusive by default, shared with --shared.

Two requests conflict when they come from different leases, one of them is
exclusive, and their names are equal or one is an ancestor of the other
("orders" covers "orders/eu"). Requests are granted in conflict-FIFO order:
a request waits behind an earlier conflicting one.

With --wait 0 (the default) it tries once; otherwise the server waits up to
--wait (whole seconds, rounded up). The call's deadline is --wait plus
--timeout. On a terminal, a status line shows how long it has waited, how
much wait is left and the place in the lock's queue (not with --quiet).

Acquiring again under a lease that holds the lock: in the same mode, a new
fencing token (retrying is safe; the client retries on the new leader when
leadership changes during the wait); --shared while holding it exclusively
downgrades at once; exclusive while holding it shared upgrades, waiting
until the lease is the only holder (a second upgrade of the same lock while
one waits fails with FailedPrecondition UPGRADE_CONFLICT).

Exit status: 0 acquired (-o id prints the fencing token), 3 not acquired
(outcome UNAVAILABLE or TIMED_OUT; the response is still printed, with what
blocked it), 4 the lease does not exist (revoked, expired, or its namespace
deleted), 1 the call failed otherwise, 2 bad input (a bad lock name among
others).`,
		Example: `  grackle lock acquire jobs orders/eu --lease ll_NfKKeiPbP18NFeU3lLGrRWWgDJRB --wait 60s
  grackle lock acquire jobs orders --lease "$LEASE" --shared

  if token=$(grackle lock acquire jobs orders/eu --lease "$LEASE" -o id); then
    echo "got it, fencing token $token"
  fi`,
		Args: positional("NAMESPACE", "LOCK"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkLockLease(lease, args[0]); err != nil {
				return err
			}
			secs, err := wholeSeconds(cmd, "wait", wait, 0)
			if err != nil {
				return err
			}
			meta, err := parseMetadata(md)
			if err != nil {
				return err
			}
			waitFor := time.Duration(secs) * time.Second
			what := fmt.Sprintf("%s lock %s/%s", modeName(!shared), args[0], args[1])
			stop := func() {}
			if secs > 0 && a.statusLine().Enabled() {
				dctx, cancel := context.WithTimeout(cmdContext(cmd), a.timeout)
				cli, err := a.client(dctx)
				cancel()
				if err != nil {
					return a.connectError(cmdContext(cmd), err)
				}
				stop = a.waitStatusInLockQueue(cli, what, waitFor, args[0], args[1], lease)
			}
			resp, err := call(a, cmd, waitFor, func(ctx context.Context, c clients) (*pb.AcquireLockResponse, error) {
				return c.api.AcquireLock(ctx, &pb.AcquireLockRequest{
					NamespaceName: args[0], LockName: args[1], LeaseId: lease,
					Exclusive: !shared, TimeoutSeconds: secs, Metadata: meta,
				})
			})
			stop()
			if leaseGone(err) {
				return leaseLost(err)
			}
			if err != nil {
				return err
			}
			if err := a.show(lockAcquireView(resp)); err != nil {
				return err
			}
			return lockAcquireResult(args[1], !shared, waitFor, resp)
		},
	}
	cmd.Flags().StringVar(&lease, "lease", "", "lock lease ID (ll_...) the lock is held under (required)")
	cmd.Flags().BoolVar(&shared, "shared", false, "acquire a shared lock (default: exclusive)")
	durationVar(cmd.Flags(), &wait, "wait", 0, "how long the server waits for the lock (0 = try once; at most the server's maximum, 300s by default)")
	metadataFlag(cmd.Flags(), &md, "holder")
	return cmd
}

// lockAcquireResult is nil when resp acquired, else an exit-3 error that
// says why.
func lockAcquireResult(lock string, exclusive bool, wait time.Duration, resp *pb.AcquireLockResponse) error {
	why := client.ContentionText(resp.GetReason(), resp.GetBlockingLocks())
	if why == "" {
		why = lockStateText(resp.GetLock())
	}
	mode := modeName(exclusive)
	switch resp.GetOutcome() {
	case pb.AcquireOutcome_ACQUIRE_OUTCOME_ACQUIRED:
		return nil
	case pb.AcquireOutcome_ACQUIRE_OUTCOME_UNAVAILABLE:
		return &exitError{code: exitNotAcquired, msg: fmt.Sprintf("UNAVAILABLE: %q not acquired %s at once (%s; --wait 30s waits)", lock, mode, why)}
	case pb.AcquireOutcome_ACQUIRE_OUTCOME_TIMED_OUT:
		return &exitError{code: exitNotAcquired, msg: fmt.Sprintf("TIMED_OUT: %q not acquired %s within %s (%s)", lock, mode, wait, why)}
	default:
		return &exitError{code: exitCallFailed, msg: fmt.Sprintf("unexpected outcome %s", resp.GetOutcome())}
	}
}

func (a *app) lockReleaseCmd() *cobra.Command {
	var lease string
	cmd := &cobra.Command{
		Use:   "release NAMESPACE LOCK --lease LEASE_ID",
		Short: "Release a lease's hold of a lock",
		Long: `Release a lease's hold of a lock, whatever its mode; the waiters that now fit
are granted in the same commit. Releasing what the lease does not hold
changes nothing and is not an error.`,
		Example: "  grackle lock release jobs orders/eu --lease ll_NfKKeiPbP18NFeU3lLGrRWWgDJRB",
		Args:    positional("NAMESPACE", "LOCK"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkLockLease(lease, args[0]); err != nil {
				return err
			}
			resp, err := call(a, cmd, 0, func(ctx context.Context, c clients) (*pb.ReleaseLockResponse, error) {
				return c.api.ReleaseLock(ctx, &pb.ReleaseLockRequest{NamespaceName: args[0], LockName: args[1], LeaseId: lease})
			})
			if err != nil {
				return err
			}
			v := lockView(resp, resp.GetLock())
			if !resp.GetReleased() {
				v.done = fmt.Sprintf("lease %s did not hold lock %q: nothing released", lease, args[1])
			}
			return a.show(v)
		},
	}
	cmd.Flags().StringVar(&lease, "lease", "", "lock lease ID whose hold is released (required)")
	return cmd
}

func (a *app) lockGetCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "get NAMESPACE LOCK",
		Short: "Show a lock and its holders (a lock nobody holds is UNLOCKED)",
		Args:  positional("NAMESPACE", "LOCK"),
		RunE: func(cmd *cobra.Command, args []string) error {
			resp, err := call(a, cmd, 0, func(ctx context.Context, c clients) (*pb.GetLockResponse, error) {
				return c.api.GetLock(ctx, &pb.GetLockRequest{NamespaceName: args[0], LockName: args[1]})
			})
			if err != nil {
				return err
			}
			return a.show(lockView(resp, resp.GetLock()))
		},
	}
}

func (a *app) lockListCmd() *cobra.Command {
	var (
		lf     listFlags
		prefix string
	)
	cmd := &cobra.Command{
		Use:   "list NAMESPACE",
		Short: "List the held locks of a namespace, ordered by name",
		Long: `List the held locks of a namespace, ordered by name (a lock nobody holds does
not exist). --prefix, a lock name, lists that lock and its descendants only:
--prefix orders lists orders, orders/eu and orders/eu/42, not orders2.`,
		Example: "  grackle lock list jobs --prefix orders",
		Args:    positional("NAMESPACE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := lf.check(cmd); err != nil {
				return err
			}
			resp, err := call(a, cmd, 0, func(ctx context.Context, c clients) (*pb.ListLocksResponse, error) {
				return c.api.ListLocks(ctx, &pb.ListLocksRequest{NamespaceName: args[0], Prefix: prefix, Limit: lf.limit, PaginationToken: lf.token})
			})
			if err != nil {
				return err
			}
			return a.show(locksView(resp))
		},
	}
	cmd.Flags().StringVar(&prefix, "prefix", "", "a lock name: only that lock and its descendants")
	lf.register(cmd.Flags())
	_ = cmd.RegisterFlagCompletionFunc("prefix", func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		if len(args) == 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return a.completeLockNames(cmd, args[0], toComplete), cobra.ShellCompDirectiveNoFileComp
	})
	return cmd
}

func (a *app) lockDeleteCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "delete NAMESPACE LOCK",
		Short: "Force-release a lock: drop every holder (their leases live on)",
		Long: `Force-release a lock, as an operator: every holder is dropped (their leases
live on, with their other locks), then the waiters that now fit are granted.
A lock nobody holds is not an error.`,
		Args: positional("NAMESPACE", "LOCK"),
		RunE: func(cmd *cobra.Command, args []string) error {
			resp, err := call(a, cmd, 0, func(ctx context.Context, c clients) (*pb.DeleteLockResponse, error) {
				return c.api.DeleteLock(ctx, &pb.DeleteLockRequest{NamespaceName: args[0], LockName: args[1]})
			})
			if err != nil {
				return err
			}
			what := fmt.Sprintf("lock %q in namespace %q released by force", args[1], args[0])
			if !resp.GetExisted() {
				what = fmt.Sprintf("lock %q in namespace %q was not held", args[1], args[0])
			}
			return a.show(doneView(resp, what))
		},
	}
}

func (a *app) lockWaitersCmd() *cobra.Command {
	var lf listFlags
	cmd := &cobra.Command{
		Use:   "waiters NAMESPACE LOCK",
		Short: "List the calls waiting for a lock, head of the queue first",
		Long: `List the calls waiting for a lock, in queue order (position 1 is the head):
lease, process, the mode asked for (an upgrade of a shared hold waits at the
head), since when, and until when. The queue lives in the leader's memory:
after a leader change it is rebuilt as the waiting clients retry.`,
		Example: "  grackle lock waiters jobs orders/eu",
		Args:    positional("NAMESPACE", "LOCK"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := lf.check(cmd); err != nil {
				return err
			}
			resp, err := call(a, cmd, 0, func(ctx context.Context, c clients) (*pb.ListLockWaitersResponse, error) {
				return c.api.ListLockWaiters(ctx, &pb.ListLockWaitersRequest{
					NamespaceName: args[0], LockName: args[1], Limit: lf.limit, PaginationToken: lf.token,
				})
			})
			if err != nil {
				return err
			}
			return a.show(lockWaitersView(resp))
		},
	}
	lf.register(cmd.Flags())
	return cmd
}

func (a *app) lockWatchCmd() *cobra.Command {
	var count int
	cmd := &cobra.Command{
		Use:   "watch NAMESPACE LOCK",
		Short: "Print a lock's holders and queue, then every change, as they happen",
		Long: `Print a lock's state (mode, holders, waiters), then a line after every change,
until interrupted (or --count states were printed). Changes that come faster
than they are printed are folded into one line ("+N changes"). Each line
names the Raft index it reflects. Across a leader change the watch resumes
on the new leader and prints its whole state again ("resumed"). A lock
nobody holds can be watched: it shows as unlocked until someone takes it.

-o json prints one JSON object per state (the WatchLockResponse), one per
line. The command ends with exit status 0 when interrupted or after --count
states; 1 when the watch fails.`,
		Example: `  grackle lock watch jobs orders/eu
  grackle lock watch jobs orders/eu -o json --count 1   # the state once, as JSON`,
		Args: positional("NAMESPACE", "LOCK"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runWatch(a, cmd, count, func(ctx context.Context, cli *client.Client) <-chan client.LockWatchUpdate {
				return cli.WatchLockState(ctx, args[0], args[1])
			}, func(u client.LockWatchUpdate) error { return u.Err }, a.printLockWatch)
		},
	}
	cmd.Flags().IntVar(&count, "count", 0, "stop after this many states (0 = until interrupted)")
	return cmd
}

func (a *app) printLockWatch(u client.LockWatchUpdate) error {
	return a.printWatchState(u.State, func() string { return lockWatchLine(u, a.now()) })
}

// lockWatchLine is one state on one line: when, the Raft index, the mode,
// the holders (process#fencing token) and the queue.
func lockWatchLine(u client.LockWatchUpdate, now time.Time) string {
	m := u.State
	l := m.GetLock()
	var b strings.Builder
	writeWatchHead(&b, now, m, u.Resumed)
	fmt.Fprintf(&b, ": %s", lockStateText(l))
	var hs []string
	for _, h := range l.GetHolders() {
		hs = append(hs, fmt.Sprintf("%s#%d", h.GetProcessId(), h.GetFencingToken()))
	}
	writeBracketed(&b, hs)
	fmt.Fprintf(&b, "; %d waiting", m.GetWaitersCount())
	var ws []string
	for _, w := range m.GetWaiters() {
		ws = append(ws, fmt.Sprintf("%d:%s %s", w.GetPosition(), w.GetProcessId(), waiterMode(w)))
	}
	writeBracketed(&b, ws)
	return b.String()
}

// waiterMode is "shared", "exclusive" or "upgrade".
func waiterMode(w *pb.LockWaiter) string {
	if w.GetUpgrade() {
		return "upgrade"
	}
	return modeName(w.GetExclusive())
}

// waitStatusInLockQueue is waitStatusInQueue for a lock.
func (a *app) waitStatusInLockQueue(cli *client.Client, what string, wait time.Duration, ns, lock, lease string) (stop func()) {
	return a.waitStatusFollowing(what, wait, func(ctx context.Context, set func(string)) {
		for u := range cli.WatchLockState(ctx, ns, lock) {
			if u.Err != nil {
				return
			}
			set(queuePlace(u.State.GetWaiters(), u.State.GetWaitersCount(), lease))
		}
	})
}

// checkSemaphoreLease refuses a lock lease given as a semaphore command's
// --lease (the server would answer NotFound, which semaphore acquire would
// report as a lost lease, exit 4), and an id of a shape the API refuses.
func checkSemaphoreLease(lease string) error {
	if strings.HasPrefix(lease, lockLeasePrefix) {
		return usagef("--lease %s: a lock lease; semaphores are held under semaphore leases (%s...: grackle lease create)", quoteArg(lease), semaphoreLeasePrefix)
	}
	if err := fsm.ValidateLeaseID("lease_id", lease); err != nil {
		return usagef("--lease %s: %s", quoteArg(lease), fsmProblem(err))
	}
	return nil
}

// checkSemaphoreLeaseArg is checkSemaphoreLease for a LEASE_ID argument.
func checkSemaphoreLeaseArg(id string) error {
	if strings.HasPrefix(id, lockLeasePrefix) {
		return usagef("LEASE_ID %s: a lock lease (see grackle lock lease); semaphore leases start with %s", quoteArg(id), semaphoreLeasePrefix)
	}
	if err := fsm.ValidateLeaseID("lease_id", id); err != nil {
		return usagef("LEASE_ID %s: %s", quoteArg(id), fsmProblem(err))
	}
	return nil
}

// ---- lock leases ----

func (a *app) lockLeaseCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "lease",
		Short: "Create, refresh, revoke and inspect lock leases (ll_...)",
		Long: `Create, refresh, revoke and inspect lock leases. A lock lease (ll_...) holds
locks; it is not a semaphore lease (ls_..., "grackle lease"), and neither
kind is accepted where the other is needed.`,
		RunE: unknownSubcommand,
	}
	cmd.AddCommand(
		a.lockLeaseCreateCmd(),
		a.lockLeaseGetCmd(),
		a.lockLeaseRefreshCmd(),
		a.lockLeaseRevokeCmd(),
		a.lockLeaseListCmd(),
	)
	return cmd
}

// checkLockLeaseArg refuses a semaphore lease id where a lock lease is
// needed (the server would say NotFound).
func checkLockLeaseArg(id string) error {
	if strings.HasPrefix(id, semaphoreLeasePrefix) {
		return usagef("LEASE_ID %s: a semaphore lease (see grackle lease); lock leases start with %s", quoteArg(id), lockLeasePrefix)
	}
	if err := fsm.ValidateLockLeaseID("lease_id", id); err != nil {
		return usagef("LEASE_ID %s: %s", quoteArg(id), fsmProblem(err))
	}
	return nil
}

// lockLeases are the leases of `grackle lock lease`.
var lockLeases = leaseKind{
	noun:     "lock lease",
	metadata: true,
	checkArg: checkLockLeaseArg,
	create: func(ctx context.Context, c clients, ns, processID string, secs int64, meta map[string]string) (view, error) {
		resp, err := c.api.CreateLockLease(ctx, &pb.CreateLockLeaseRequest{NamespaceName: ns, ProcessId: processID, TtlSeconds: secs, Metadata: meta})
		if err != nil {
			return view{}, err
		}
		return lockLeaseView(resp, resp.GetLease()), nil
	},
	get: func(ctx context.Context, c clients, ns, id string) (view, int64, error) {
		resp, err := c.api.GetLockLease(ctx, &pb.GetLockLeaseRequest{NamespaceName: ns, LeaseId: id})
		if err != nil {
			return view{}, 0, err
		}
		return lockLeaseView(resp, resp.GetLease()), resp.GetLease().GetTtlSeconds(), nil
	},
	refresh: func(ctx context.Context, c clients, ns, id string, secs int64) (view, error) {
		resp, err := c.api.RefreshLockLease(ctx, &pb.RefreshLockLeaseRequest{NamespaceName: ns, LeaseId: id, TtlSeconds: secs})
		if err != nil {
			return view{}, err
		}
		return lockLeaseView(resp, resp.GetLease()), nil
	},
	revoke: func(ctx context.Context, c clients, ns, id string) (proto.Message, error) {
		return c.api.RevokeLockLease(ctx, &pb.RevokeLockLeaseRequest{NamespaceName: ns, LeaseId: id})
	},
	revokedNone: &pb.RevokeLockLeaseResponse{},
	list: func(ctx context.Context, c clients, ns, processID string, lf listFlags) (view, error) {
		resp, err := c.api.ListLockLeases(ctx, &pb.ListLockLeasesRequest{
			NamespaceName: ns, ProcessId: processID, Limit: lf.limit, PaginationToken: lf.token,
		})
		if err != nil {
			return view{}, err
		}
		return lockLeasesView(resp), nil
	},
}

func (a *app) lockLeaseCreateCmd() *cobra.Command {
	return lockLeases.createCmd(a, help{
		short: "Create a lock lease that expires --ttl from now unless refreshed",
		example: `  grackle lock lease create jobs --process-id host-123/pid-4567 --ttl 60s --metadata owner=billing
  LEASE=$(grackle lock lease create jobs --process-id "$(hostname)/pid-$$" -o id)`,
	})
}

func (a *app) lockLeaseGetCmd() *cobra.Command {
	return lockLeases.getCmd(a, help{short: "Show a lock lease (NotFound once it has expired)"})
}

func (a *app) lockLeaseRefreshCmd() *cobra.Command {
	return lockLeases.refreshCmd(a, help{
		short: "Extend a lock lease and every lock it holds to --ttl from now",
		long: `Extend a lock lease and every lock it holds to --ttl from now. Without --ttl
the lease's own ttl_seconds is used. A lease that is gone (expired, revoked,
or its namespace deleted) exits 4: the lease was lost.`,
		example: "  grackle lock lease refresh jobs ll_NfKKeiPbP18NFeU3lLGrRWWgDJRB --ttl 60s",
	})
}

func (a *app) lockLeaseRevokeCmd() *cobra.Command {
	return lockLeases.revokeCmd(a, help{
		short: "Release every lock a lock lease holds and delete it",
		long: `Release every lock a lock lease holds and delete it; its waiters end with
NotFound. Revoking a lease that is already gone (revoked, expired, or in a
namespace that does not exist) says so and exits 0.`,
	})
}

func (a *app) lockLeaseListCmd() *cobra.Command {
	return lockLeases.listCmd(a, help{short: "List the unexpired lock leases of a namespace"})
}

// ---- output ----

// lockStateName is EXCLUSIVE_LOCKED for LOCK_STATE_EXCLUSIVE_LOCKED.
func lockStateName(s pb.LockState) string {
	return strings.TrimPrefix(s.String(), "LOCK_STATE_")
}

// lockStateText is "unlocked", "exclusive by 1 holder", "shared by 3 holders".
func lockStateText(l *pb.Lock) string {
	n := len(l.GetHolders())
	holders := fmt.Sprintf("%d holder", n)
	if n != 1 {
		holders += "s"
	}
	switch l.GetState() {
	case pb.LockState_LOCK_STATE_EXCLUSIVE_LOCKED:
		return "exclusive by " + holders
	case pb.LockState_LOCK_STATE_SHARED_LOCKED:
		return "shared by " + holders
	}
	return "unlocked"
}

func lockKV(l *pb.Lock, now time.Time) [][2]string {
	return [][2]string{
		{"Name", l.GetName()},
		{"State", lockStateName(l.GetState())},
		{"Holders", itoa(int64(len(l.GetHolders())))},
		{"Locked", fmtTime(l.GetLockedAt(), now)},
		{"Last activity", fmtTime(l.GetLastActivityAt(), now)},
	}
}

func lockHoldersTable(t *tableOut, hs []*pb.LockHolder) {
	if len(hs) == 0 {
		return
	}
	var rows [][]string
	for _, h := range hs {
		rows = append(rows, []string{h.GetLeaseId(), h.GetProcessId(), modeName(h.GetExclusive()),
			strconv.FormatUint(h.GetFencingToken(), 10), fmtTime(h.GetLockedAt(), t.now),
			fmtTime(h.GetExpiresAt(), t.now), truncate(fmtMetadata(h.GetMetadata()), 40)})
	}
	t.table([]string{"LEASE ID", "PROCESS ID", "MODE", "FENCING TOKEN", "LOCKED", "EXPIRES", "METADATA"}, rows)
}

// lockView shows a lock and, below, its holders.
func lockView(resp proto.Message, l *pb.Lock) view {
	return view{
		msg: resp,
		ids: []string{l.GetName()},
		table: func(t *tableOut) {
			t.kv(lockKV(l, t.now)...)
			lockHoldersTable(t, l.GetHolders())
		},
	}
}

func lockAcquireView(r *pb.AcquireLockResponse) view {
	acquired := r.GetOutcome() == pb.AcquireOutcome_ACQUIRE_OUTCOME_ACQUIRED
	v := view{msg: r}
	if h := r.GetHolder(); h != nil && acquired {
		v.ids = []string{strconv.FormatUint(h.GetFencingToken(), 10)}
	}
	v.table = func(t *tableOut) {
		rows := [][2]string{{"Outcome", outcomeName(r.GetOutcome())}}
		if h := r.GetHolder(); h != nil && acquired {
			rows = append(rows,
				[2]string{"Fencing token", strconv.FormatUint(h.GetFencingToken(), 10)},
				[2]string{"Mode", modeName(h.GetExclusive())},
				[2]string{"Lease ID", h.GetLeaseId()},
				[2]string{"Process ID", h.GetProcessId()},
				[2]string{"Locked", fmtTime(h.GetLockedAt(), t.now)},
				[2]string{"Expires", fmtTime(h.GetExpiresAt(), t.now)},
				[2]string{"Holder metadata", fmtMetadata(h.GetMetadata())},
			)
		}
		if !acquired {
			rows = append(rows,
				[2]string{"Blocked by", client.ContentionText(r.GetReason(), nil)},
				[2]string{"Blocking locks", strings.Join(r.GetBlockingLocks(), ", ")},
			)
		}
		if l := r.GetLock(); l != nil {
			rows = append(rows,
				[2]string{"Lock", l.GetName()},
				[2]string{"State", lockStateName(l.GetState())},
				[2]string{"Holders", itoa(int64(len(l.GetHolders())))},
			)
		}
		t.kv(rows...)
	}
	return v
}

func locksView(r *pb.ListLocksResponse) view {
	return listView(r, r.GetLocks(), (*pb.Lock).GetName,
		[]string{"NAME", "STATE", "HOLDERS", "LOCKED", "LAST ACTIVITY"},
		func(l *pb.Lock, now time.Time) []string {
			return []string{l.GetName(), lockStateName(l.GetState()), itoa(int64(len(l.GetHolders()))),
				fmtTime(l.GetLockedAt(), now), fmtTime(l.GetLastActivityAt(), now)}
		})
}

func lockWaitersView(r *pb.ListLockWaitersResponse) view {
	return listView(r, r.GetWaiters(), (*pb.LockWaiter).GetLeaseId,
		[]string{"POSITION", "LEASE ID", "PROCESS ID", "MODE", "SINCE", "DEADLINE"},
		func(w *pb.LockWaiter, now time.Time) []string {
			return []string{itoa(w.GetPosition()), w.GetLeaseId(), w.GetProcessId(), waiterMode(w),
				fmtTime(w.GetWaitingSince(), now), fmtTime(w.GetDeadline(), now)}
		})
}

func lockLeaseKV(l *pb.LockLease, now time.Time) [][2]string {
	return [][2]string{
		{"Lease ID", l.GetLeaseId()},
		{"Process ID", l.GetProcessId()},
		{"TTL", fmt.Sprintf("%ds", l.GetTtlSeconds())},
		{"Metadata", fmtMetadata(l.GetMetadata())},
		{"Created", fmtTime(l.GetCreatedAt(), now)},
		{"Expires", fmtTime(l.GetExpiresAt(), now)},
	}
}

func lockLeaseView(resp proto.Message, l *pb.LockLease) view {
	return view{
		msg:   resp,
		ids:   []string{l.GetLeaseId()},
		table: func(t *tableOut) { t.kv(lockLeaseKV(l, t.now)...) },
	}
}

func lockLeasesView(r *pb.ListLockLeasesResponse) view {
	return listView(r, r.GetLeases(), (*pb.LockLease).GetLeaseId,
		[]string{"LEASE ID", "PROCESS ID", "TTL", "CREATED", "EXPIRES", "METADATA"},
		func(l *pb.LockLease, now time.Time) []string {
			return []string{l.GetLeaseId(), l.GetProcessId(), fmt.Sprintf("%ds", l.GetTtlSeconds()),
				fmtTime(l.GetCreatedAt(), now), fmtTime(l.GetExpiresAt(), now), truncate(fmtMetadata(l.GetMetadata()), 40)}
		})
}
