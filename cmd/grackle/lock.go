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
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/grackle-coord/grackle/client"
	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
)

// Lease id prefixes of the two kinds, fixed by the API: the server
// answers NotFound when a lease of one kind is used where the other is
// needed.
const (
	lockLeasePrefix      = "ll_"
	semaphoreLeasePrefix = "ls_"
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
// required, and not a semaphore lease (which the server would answer with
// NotFound, and this command would take for a lost lease).
func checkLockLease(lease, ns string) error {
	if lease == "" {
		return usagef("--lease is required (create one with: grackle lock lease create %s --process-id ...)", ns)
	}
	if strings.HasPrefix(lease, semaphoreLeasePrefix) {
		return usagef("lease: %s is a semaphore lease; locks are held under lock leases (%s...: grackle lock lease create %s --process-id ...)", lease, lockLeasePrefix, ns)
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
			secs, err := wholeSeconds("wait", wait, 0)
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
					return callError(cmdContext(cmd), err)
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
				return &exitError{code: exitLeaseLost, msg: fmt.Sprintf("lock acquire: lease %s is lost: %s", lease, err.Error())}
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
		return &exitError{code: exitNotAcquired, msg: fmt.Sprintf("lock acquire: UNAVAILABLE: %q not acquired %s at once (%s; --wait 30s waits)", lock, mode, why)}
	case pb.AcquireOutcome_ACQUIRE_OUTCOME_TIMED_OUT:
		return &exitError{code: exitNotAcquired, msg: fmt.Sprintf("lock acquire: TIMED_OUT: %q not acquired %s within %s (%s)", lock, mode, wait, why)}
	default:
		return &exitError{code: exitCallFailed, msg: fmt.Sprintf("lock acquire: unexpected outcome %s", resp.GetOutcome())}
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
			if err := lf.check(); err != nil {
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
			if err := lf.check(); err != nil {
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
			if count < 0 {
				return usagef("count: must be 0 (no end) or more, got %d", count)
			}
			ctx, cancel := context.WithCancel(cmdContext(cmd))
			defer cancel()
			dctx, dcancel := context.WithTimeout(ctx, a.timeout)
			cli, err := a.client(dctx)
			dcancel()
			if err != nil {
				return callError(cmdContext(cmd), err)
			}
			n := 0
			for u := range cli.WatchLockState(ctx, args[0], args[1]) {
				if u.Err != nil {
					if cmdContext(cmd).Err() != nil {
						return nil // interrupted: the normal end of a watch
					}
					return callError(ctx, u.Err)
				}
				if err := a.printLockWatch(u); err != nil {
					return err
				}
				if n++; count > 0 && n >= count {
					return nil
				}
			}
			return nil
		},
	}
	cmd.Flags().IntVar(&count, "count", 0, "stop after this many states (0 = until interrupted)")
	return cmd
}

func (a *app) printLockWatch(u client.LockWatchUpdate) error {
	if a.output == "json" {
		b, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(u.State)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintln(a.stdout, string(b))
		return err
	}
	fmt.Fprintln(a.stdout, lockWatchLine(u, a.now()))
	return nil
}

// lockWatchLine is one state on one line: when, the Raft index, the mode,
// the holders (process#fencing token) and the queue.
func lockWatchLine(u client.LockWatchUpdate, now time.Time) string {
	m := u.State
	l := m.GetLock()
	var b strings.Builder
	fmt.Fprintf(&b, "%s index %d", now.UTC().Format("15:04:05.000"), m.GetRaftIndex())
	switch {
	case u.Resumed:
		b.WriteString(" (resumed)")
	case m.GetInitial():
		b.WriteString(" (initial)")
	case m.GetChanges() > 1:
		fmt.Fprintf(&b, " (+%d changes)", m.GetChanges())
	}
	fmt.Fprintf(&b, ": %s", lockStateText(l))
	var hs []string
	for _, h := range l.GetHolders() {
		hs = append(hs, fmt.Sprintf("%s#%d", h.GetProcessId(), h.GetFencingToken()))
	}
	if len(hs) > 0 {
		fmt.Fprintf(&b, " [%s]", strings.Join(hs, " "))
	}
	fmt.Fprintf(&b, "; %d waiting", m.GetWaitersCount())
	var ws []string
	for _, w := range m.GetWaiters() {
		ws = append(ws, fmt.Sprintf("%d:%s %s", w.GetPosition(), w.GetProcessId(), waiterMode(w)))
	}
	if len(ws) > 0 {
		fmt.Fprintf(&b, " [%s]", strings.Join(ws, " "))
	}
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
			set(lockQueuePlace(u.State, lease))
		}
	})
}

// lockQueuePlace says where lease waits in a watched lock state ("" when
// it does not wait there).
func lockQueuePlace(m *pb.WatchLockResponse, lease string) string {
	for _, w := range m.GetWaiters() {
		if w.GetLeaseId() == lease {
			return fmt.Sprintf("position %d of %d in the queue", w.GetPosition(), m.GetWaitersCount())
		}
	}
	if n := m.GetWaitersCount(); n > int64(len(m.GetWaiters())) {
		return fmt.Sprintf("behind the first %d of %d in the queue", len(m.GetWaiters()), n)
	}
	return ""
}

// checkSemaphoreLease refuses a lock lease given as a semaphore command's
// --lease: the server would answer NotFound, which semaphore acquire would
// report as a lost lease (exit 4).
func checkSemaphoreLease(lease string) error {
	if strings.HasPrefix(lease, lockLeasePrefix) {
		return usagef("lease: %s is a lock lease; semaphores are held under semaphore leases (%s...: grackle lease create)", lease, semaphoreLeasePrefix)
	}
	return nil
}

// checkSemaphoreLeaseArg is checkSemaphoreLease for a LEASE_ID argument.
func checkSemaphoreLeaseArg(id string) error {
	if strings.HasPrefix(id, lockLeasePrefix) {
		return usagef("LEASE_ID: %s is a lock lease (see grackle lock lease); semaphore leases start with %s", id, semaphoreLeasePrefix)
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
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usagef("unknown command %q (see grackle lock lease --help)", args[0])
			}
			return cmd.Help()
		},
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
		return usagef("LEASE_ID: %s is a semaphore lease (see grackle lease); lock leases start with %s", id, lockLeasePrefix)
	}
	return nil
}

func (a *app) lockLeaseCreateCmd() *cobra.Command {
	var (
		processID string
		ttl       time.Duration
		md        []string
	)
	cmd := &cobra.Command{
		Use:   "create NAMESPACE --process-id ID",
		Short: "Create a lock lease that expires --ttl from now unless refreshed",
		Example: `  grackle lock lease create jobs --process-id host-123/pid-4567 --ttl 60s --metadata owner=billing
  LEASE=$(grackle lock lease create jobs --process-id "$(hostname)/pid-$$" -o id)`,
		Args: positional("NAMESPACE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if processID == "" {
				return usagef("--process-id is required (any label of the caller, e.g. host-123/pid-4567)")
			}
			secs, err := ttlSeconds(ttl)
			if err != nil {
				return err
			}
			meta, err := parseMetadata(md)
			if err != nil {
				return err
			}
			resp, err := call(a, cmd, 0, func(ctx context.Context, c clients) (*pb.CreateLockLeaseResponse, error) {
				return c.api.CreateLockLease(ctx, &pb.CreateLockLeaseRequest{NamespaceName: args[0], ProcessId: processID, TtlSeconds: secs, Metadata: meta})
			})
			if err != nil {
				return err
			}
			return a.show(lockLeaseView(resp, resp.GetLease()))
		},
	}
	cmd.Flags().StringVar(&processID, "process-id", "", "who owns the lease, 1..128 bytes, free-form (required)")
	durationVar(cmd.Flags(), &ttl, "ttl", 60*time.Second, "time until the lease expires unless refreshed, whole seconds (server max 300s by default)")
	metadataFlag(cmd.Flags(), &md, "lease")
	return cmd
}

func (a *app) lockLeaseGetCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "get NAMESPACE LEASE_ID",
		Short: "Show a lock lease (NotFound once it has expired)",
		Args:  positional("NAMESPACE", "LEASE_ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkLockLeaseArg(args[1]); err != nil {
				return err
			}
			resp, err := call(a, cmd, 0, func(ctx context.Context, c clients) (*pb.GetLockLeaseResponse, error) {
				return c.api.GetLockLease(ctx, &pb.GetLockLeaseRequest{NamespaceName: args[0], LeaseId: args[1]})
			})
			if err != nil {
				return err
			}
			return a.show(lockLeaseView(resp, resp.GetLease()))
		},
	}
}

func (a *app) lockLeaseRefreshCmd() *cobra.Command {
	var ttl time.Duration
	cmd := &cobra.Command{
		Use:   "refresh NAMESPACE LEASE_ID",
		Short: "Extend a lock lease and every lock it holds to --ttl from now",
		Long: `Extend a lock lease and every lock it holds to --ttl from now. Without --ttl
the lease's own ttl_seconds is used. A lease that is gone (expired, revoked,
or its namespace deleted) exits 4: the lease was lost.`,
		Example: "  grackle lock lease refresh jobs ll_NfKKeiPbP18NFeU3lLGrRWWgDJRB --ttl 60s",
		Args:    positional("NAMESPACE", "LEASE_ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkLockLeaseArg(args[1]); err != nil {
				return err
			}
			given := changed(cmd, "ttl")
			var secs int64
			if given {
				var err error
				if secs, err = ttlSeconds(ttl); err != nil {
					return err
				}
			}
			resp, err := call(a, cmd, 0, func(ctx context.Context, c clients) (*pb.RefreshLockLeaseResponse, error) {
				req := &pb.RefreshLockLeaseRequest{NamespaceName: args[0], LeaseId: args[1], TtlSeconds: secs}
				if !given {
					cur, err := c.api.GetLockLease(ctx, &pb.GetLockLeaseRequest{NamespaceName: args[0], LeaseId: args[1]})
					if err != nil {
						return nil, err
					}
					req.TtlSeconds = cur.GetLease().GetTtlSeconds()
				}
				return c.api.RefreshLockLease(ctx, req)
			})
			if leaseGone(err) {
				return &exitError{code: exitLeaseLost, msg: fmt.Sprintf("lock lease refresh: lease %s is lost: %s", args[1], err.Error())}
			}
			if err != nil {
				return err
			}
			return a.show(lockLeaseView(resp, resp.GetLease()))
		},
	}
	durationVar(cmd.Flags(), &ttl, "ttl", 0, "time from now until the lease expires, whole seconds (default: the lease's ttl_seconds)")
	return cmd
}

func (a *app) lockLeaseRevokeCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "revoke NAMESPACE LEASE_ID",
		Short: "Release every lock a lock lease holds and delete it",
		Long: `Release every lock a lock lease holds and delete it; its waiters end with
NotFound. Revoking a lease that is already gone (revoked, expired, or in a
namespace that does not exist) says so and exits 0.`,
		Args: positional("NAMESPACE", "LEASE_ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkLockLeaseArg(args[1]); err != nil {
				return err
			}
			resp, err := call(a, cmd, 0, func(ctx context.Context, c clients) (*pb.RevokeLockLeaseResponse, error) {
				return c.api.RevokeLockLease(ctx, &pb.RevokeLockLeaseRequest{NamespaceName: args[0], LeaseId: args[1]})
			})
			if leaseGone(err) {
				return a.show(doneView(&pb.RevokeLockLeaseResponse{}, fmt.Sprintf("lock lease %s did not exist in namespace %q (or had expired)", args[1], args[0])))
			}
			if err != nil {
				return err
			}
			return a.show(doneView(resp, fmt.Sprintf("lock lease %s revoked", args[1])))
		},
	}
}

func (a *app) lockLeaseListCmd() *cobra.Command {
	var (
		lf        listFlags
		processID string
	)
	cmd := &cobra.Command{
		Use:   "list NAMESPACE",
		Short: "List the unexpired lock leases of a namespace",
		Args:  positional("NAMESPACE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := lf.check(); err != nil {
				return err
			}
			resp, err := call(a, cmd, 0, func(ctx context.Context, c clients) (*pb.ListLockLeasesResponse, error) {
				return c.api.ListLockLeases(ctx, &pb.ListLockLeasesRequest{
					NamespaceName: args[0], ProcessId: processID, Limit: lf.limit, PaginationToken: lf.token,
				})
			})
			if err != nil {
				return err
			}
			return a.show(lockLeasesView(resp))
		},
	}
	cmd.Flags().StringVar(&processID, "process-id", "", "only the leases of this process")
	lf.register(cmd.Flags())
	return cmd
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
	v := view{msg: r, next: r.GetNextPaginationToken()}
	for _, l := range r.GetLocks() {
		v.ids = append(v.ids, l.GetName())
	}
	v.table = func(t *tableOut) {
		var rows [][]string
		for _, l := range r.GetLocks() {
			rows = append(rows, []string{l.GetName(), lockStateName(l.GetState()), itoa(int64(len(l.GetHolders()))),
				fmtTime(l.GetLockedAt(), t.now), fmtTime(l.GetLastActivityAt(), t.now)})
		}
		t.table([]string{"NAME", "STATE", "HOLDERS", "LOCKED", "LAST ACTIVITY"}, rows)
	}
	return v
}

func lockWaitersView(r *pb.ListLockWaitersResponse) view {
	v := view{msg: r, next: r.GetNextPaginationToken()}
	for _, w := range r.GetWaiters() {
		v.ids = append(v.ids, w.GetLeaseId())
	}
	v.table = func(t *tableOut) {
		var rows [][]string
		for _, w := range r.GetWaiters() {
			rows = append(rows, []string{itoa(w.GetPosition()), w.GetLeaseId(), w.GetProcessId(), waiterMode(w),
				fmtTime(w.GetWaitingSince(), t.now), fmtTime(w.GetDeadline(), t.now)})
		}
		t.table([]string{"POSITION", "LEASE ID", "PROCESS ID", "MODE", "SINCE", "DEADLINE"}, rows)
	}
	return v
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
	v := view{msg: r, next: r.GetNextPaginationToken()}
	for _, l := range r.GetLeases() {
		v.ids = append(v.ids, l.GetLeaseId())
	}
	v.table = func(t *tableOut) {
		var rows [][]string
		for _, l := range r.GetLeases() {
			rows = append(rows, []string{l.GetLeaseId(), l.GetProcessId(), fmt.Sprintf("%ds", l.GetTtlSeconds()),
				fmtTime(l.GetCreatedAt(), t.now), fmtTime(l.GetExpiresAt(), t.now), truncate(fmtMetadata(l.GetMetadata()), 40)})
		}
		t.table([]string{"LEASE ID", "PROCESS ID", "TTL", "CREATED", "EXPIRES", "METADATA"}, rows)
	}
	return v
}
