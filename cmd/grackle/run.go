package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/grackle-coord/grackle/client"
)

// runCmd is `grackle run`: hold permits or a lock while a command runs,
// like `consul lock` and `etcdctl lock`.
func (a *app) runCmd() *cobra.Command {
	var (
		ns, sem, lock, processID string
		weight                   int64
		shared                   bool
		ttl, wait, grace         time.Duration
	)
	cmd := &cobra.Command{
		Use:   "run --namespace NS (--semaphore S | --lock NAME) [flags] -- CMD [ARGS...]",
		Short: "Run a command while holding permits of a semaphore, or a lock",
		Long: `Create a lease, acquire --weight permits of the semaphore --semaphore, or
the lock --lock (exclusive; shared with --shared) under a lock lease,
waiting up to --wait, run the command with GRACKLE_LEASE_ID and
GRACKLE_FENCING_TOKEN in its environment while the lease is kept refreshed,
then release and revoke. The environment also has GRACKLE_NAMESPACE and
GRACKLE_SEMAPHORE, or GRACKLE_LOCK and GRACKLE_LOCK_MODE (exclusive or
shared). The exit code is the command's. If the lease is lost while the
command runs, the command gets SIGTERM, then SIGKILL after --grace, and
grackle exits 4. Not acquired within --wait: exit 3 and the command never
runs. --timeout is the deadline of each call (creating the lease,
releasing, revoking); on a terminal, a status line shows the wait (not
with --quiet).

` + exitCodesHelp,
		Example: `  grackle run --namespace third_parties --semaphore partner_1 --weight 3 --ttl 30s --wait 60s -- ./sync-partner.sh
  grackle run --namespace jobs --lock reports/daily --wait 5m -- ./build-report.sh
  grackle run --namespace jobs --lock reports --shared -- ./read-reports.sh`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usagef("missing the command to run (after --)")
			}
			if ns == "" || sem == "" && lock == "" {
				return usagef("--namespace and --semaphore (or --lock) are required")
			}
			if sem != "" && lock != "" {
				return usagef("--semaphore and --lock: give one of them, not both")
			}
			if lock != "" && changed(cmd, "weight") {
				return usagef("--weight is for a semaphore; a lock is held --shared or exclusive")
			}
			if sem != "" && shared {
				return usagef("--shared is for a lock (--lock); a semaphore is held with --weight permits")
			}
			if weight < 1 {
				return flagError(cmd, "weight", "must be at least 1")
			}
			if _, err := ttlSeconds(cmd, ttl); err != nil {
				return err
			}
			if wait < 0 {
				return flagError(cmd, "wait", "must not be negative")
			}
			if grace < 0 {
				return flagError(cmd, "grace", "must not be negative")
			}
			if processID == "" {
				host, _ := os.Hostname()
				processID = fmt.Sprintf("%s/pid-%d", host, os.Getpid())
			}
			return a.runLocked(cmdContext(cmd), runSpec{ns: ns, sem: sem, lock: lock, shared: shared, processID: processID,
				weight: weight, ttl: ttl, wait: wait, grace: grace, argv: args})
		},
	}
	a.output = "table"
	pfs := cmd.PersistentFlags()
	pfs.StringSliceVar(&a.endpoints, flagEndpoints, []string{defaultEndpoint},
		"gRPC addresses (host:port, comma-separated) of any nodes [$GRACKLE_ENDPOINTS]")
	durationVar(pfs, &a.timeout, flagTimeout, defaultTimeout, "deadline of each call, retries included [$GRACKLE_TIMEOUT]")
	a.securityFlags(pfs)
	fs := cmd.Flags()
	fs.SetInterspersed(false) // everything after the first argument is the command's
	fs.StringVar(&ns, "namespace", "", "namespace of the semaphore or lock (required)")
	fs.StringVar(&sem, "semaphore", "", "semaphore to hold permits of (this or --lock)")
	fs.StringVar(&lock, "lock", "", "lock to hold, a name like reports/daily (this or --semaphore)")
	fs.BoolVar(&shared, "shared", false, "with --lock: hold it shared (default: exclusive)")
	fs.Int64Var(&weight, "weight", 1, "with --semaphore: permits to hold")
	durationVar(fs, &ttl, "ttl", 30*time.Second, "lease TTL, whole seconds; the lease is refreshed every TTL/3")
	durationVar(fs, &wait, "wait", 60*time.Second, "how long to wait for the permits or the lock (0: do not wait)")
	durationVar(fs, &grace, "grace", 10*time.Second, "after SIGTERM, how long the command may take before SIGKILL")
	fs.StringVar(&processID, "process-id", "", "the lease's process_id (default HOST/pid-PID)")
	a.quietFlag(cmd)
	_ = cmd.RegisterFlagCompletionFunc("namespace", a.completeNamespaceFlag)
	_ = cmd.RegisterFlagCompletionFunc("semaphore", a.completeSemaphoreFlag)
	_ = cmd.RegisterFlagCompletionFunc("lock", a.completeLockFlag)
	return cmd
}

type runSpec struct {
	ns, sem, lock, processID string
	shared                   bool
	weight                   int64
	ttl, wait, grace         time.Duration
	argv                     []string
}

// runLease is what runLocked needs of a session, of either kind.
type runLease interface {
	LeaseID() string
	Done() <-chan struct{}
	Err() error
	Close(context.Context) error
}

// runHold is a lease holding what run was asked to hold, with the
// command's environment for it.
type runHold struct {
	lease runLease
	env   []string
}

func (a *app) runLocked(ctx context.Context, r runSpec) error {
	cctx, cancel := context.WithTimeout(ctx, a.timeout)
	cli, err := a.client(cctx)
	if err != nil {
		cancel()
		return a.connectError(ctx, err)
	}
	var h *runHold
	if r.lock != "" {
		h, err = a.runAcquireLock(ctx, cctx, cli, r)
	} else {
		h, err = a.runAcquireSemaphore(ctx, cctx, cli, r)
	}
	cancel()
	if h != nil {
		// Whatever happens next, give the lease back (release and revoke).
		defer func() {
			cctx, cancel := context.WithTimeout(context.Background(), a.timeout)
			defer cancel()
			_ = h.lease.Close(cctx)
		}()
	}
	if err != nil {
		return err
	}
	sess := h.lease

	child := exec.Command(r.argv[0], r.argv[1:]...)
	child.Stdin, child.Stdout, child.Stderr = os.Stdin, a.stdout, a.stderr
	child.Env = append(os.Environ(), h.env...)
	if err := child.Start(); err != nil {
		return &exitError{code: exitCallFailed, msg: err.Error()}
	}
	done := make(chan error, 1)
	go func() { done <- child.Wait() }()

	select {
	case err := <-done:
		if code := exitCode(err); code != 0 {
			return &exitError{code: code}
		}
		return nil
	case <-sess.Done():
		stopChild(child, done, r.grace)
		return &exitError{code: exitLeaseLost, msg: fmt.Sprintf("lease %s lost (%s); stopped the command", sess.LeaseID(), trimOwnPrefix(oneLine(sess.Err().Error())))}
	case <-ctx.Done():
		stopChild(child, done, r.grace)
		return &exitError{code: exitInterrupted, msg: "interrupted; stopped the command"}
	}
}

// runAcquireSemaphore creates a semaphore lease (under cctx) and acquires
// the permits. The hold is returned whenever the lease exists, also with
// an error, so that the caller revokes it.
func (a *app) runAcquireSemaphore(ctx, cctx context.Context, cli *client.Client, r runSpec) (*runHold, error) {
	sess, err := cli.NewSession(cctx, r.ns, r.processID, r.ttl)
	if err != nil {
		return nil, callError(ctx, err)
	}
	h := &runHold{lease: sess}
	semaphore := sess.Semaphore(r.sem)
	var g *client.Grant
	if r.wait == 0 {
		tctx, cancel := context.WithTimeout(ctx, a.timeout)
		g, err = semaphore.TryAcquire(tctx, r.weight)
		cancel()
	} else {
		stop := a.waitStatusInQueue(cli, fmt.Sprintf("%d permit(s) of %s/%s", r.weight, r.ns, r.sem), r.wait, r.ns, r.sem, sess.LeaseID())
		actx, cancel := context.WithTimeout(ctx, r.wait)
		g, err = semaphore.Acquire(actx, r.weight)
		cancel()
		stop()
	}
	switch {
	case errors.Is(err, client.ErrTimeout), errors.Is(err, client.ErrWouldBlock):
		return h, &exitError{code: exitNotAcquired, msg: fmt.Sprintf("%d permit(s) of %s/%s not acquired within %s", r.weight, r.ns, r.sem, r.wait)}
	case err != nil:
		return h, callError(ctx, err)
	}
	h.env = []string{
		"GRACKLE_LEASE_ID=" + sess.LeaseID(),
		"GRACKLE_FENCING_TOKEN=" + strconv.FormatUint(g.FencingToken, 10),
		"GRACKLE_NAMESPACE=" + r.ns,
		"GRACKLE_SEMAPHORE=" + r.sem,
	}
	return h, nil
}

// runAcquireLock is runAcquireSemaphore for a lock, under a lock lease.
func (a *app) runAcquireLock(ctx, cctx context.Context, cli *client.Client, r runSpec) (*runHold, error) {
	sess, err := cli.NewLockSession(cctx, r.ns, r.processID, r.ttl)
	if err != nil {
		return nil, callError(ctx, err)
	}
	h := &runHold{lease: sess}
	mode := client.Exclusive
	if r.shared {
		mode = client.Shared
	}
	lk := sess.Lock(r.lock)
	var g *client.LockGrant
	if r.wait == 0 {
		tctx, cancel := context.WithTimeout(ctx, a.timeout)
		g, err = lk.TryAcquire(tctx, mode)
		cancel()
	} else {
		stop := a.waitStatusInLockQueue(cli, fmt.Sprintf("%s lock %s/%s", mode, r.ns, r.lock), r.wait, r.ns, r.lock, sess.LeaseID())
		actx, cancel := context.WithTimeout(ctx, r.wait)
		g, err = lk.Acquire(actx, mode)
		cancel()
		stop()
	}
	var le *client.LockAcquireError
	switch {
	case errors.As(err, &le):
		msg := fmt.Sprintf("%s lock %s/%s not acquired within %s", mode, r.ns, r.lock, r.wait)
		if why := client.ContentionText(le.Reason, le.BlockingLocks); why != "" {
			msg += " (" + why + ")"
		}
		return h, &exitError{code: exitNotAcquired, msg: msg}
	case err != nil:
		return h, callError(ctx, err)
	}
	h.env = []string{
		"GRACKLE_LEASE_ID=" + sess.LeaseID(),
		"GRACKLE_FENCING_TOKEN=" + strconv.FormatUint(g.FencingToken, 10),
		"GRACKLE_NAMESPACE=" + r.ns,
		"GRACKLE_LOCK=" + r.lock,
		"GRACKLE_LOCK_MODE=" + mode.String(),
	}
	return h, nil
}

// stopChild sends SIGTERM, then SIGKILL if the command outlives grace.
func stopChild(child *exec.Cmd, done <-chan error, grace time.Duration) {
	_ = child.Process.Signal(syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		_ = child.Process.Kill()
		<-done
	}
}

// exitCode is the command's exit status (128+signal when a signal ended it).
func exitCode(err error) int {
	if err == nil {
		return 0
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	}
	return exitCallFailed
}
