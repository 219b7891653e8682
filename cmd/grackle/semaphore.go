package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
)

func (a *app) semaphoreCmd() *cobra.Command {
	cmd := a.group("semaphore", "Create, acquire, release and inspect semaphores", "sem")
	cmd.AddCommand(
		a.semaphoreCreateCmd(),
		a.semaphoreGetCmd(),
		a.semaphoreListCmd(),
		a.semaphoreUpdateCmd(),
		a.semaphoreDeleteCmd(),
		a.semaphoreAcquireCmd(),
		a.semaphoreReleaseCmd(),
		a.semaphoreHoldersCmd(),
		a.semaphoreWaitersCmd(),
		a.semaphoreWatchCmd(),
	)
	return cmd
}

func checkPermits(cmd *cobra.Command, permits int64) error {
	if !changed(cmd, "permits") {
		return usagef("--permits is required (at least 1)")
	}
	if permits < 1 {
		return flagError(cmd, "permits", "must be at least 1")
	}
	return nil
}

func (a *app) semaphoreCreateCmd() *cobra.Command {
	var (
		desc    string
		permits int64
		md      []string
	)
	cmd := &cobra.Command{
		Use:     "create NAMESPACE SEMAPHORE",
		Short:   "Create a semaphore with a number of permits",
		Example: "  grackle semaphore create third_parties partner_1 --permits 20 --description 'Partner 1 API'",
		Args:    positional("NAMESPACE", "SEMAPHORE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkPermits(cmd, permits); err != nil {
				return err
			}
			meta, err := parseMetadata(md)
			if err != nil {
				return err
			}
			resp, err := call(a, cmd, 0, func(ctx context.Context, c clients) (*pb.CreateSemaphoreResponse, error) {
				return c.api.CreateSemaphore(ctx, &pb.CreateSemaphoreRequest{
					NamespaceName: args[0], SemaphoreName: args[1], Description: desc, Permits: permits, Metadata: meta,
				})
			})
			if err != nil {
				return err
			}
			return a.show(semaphoreView(resp, resp.GetSemaphore()))
		},
	}
	cmd.Flags().Int64Var(&permits, "permits", 0, "capacity: most units held at once (required, at least 1)")
	cmd.Flags().StringVar(&desc, "description", "", "free text, at most 1024 bytes")
	metadataFlag(cmd.Flags(), &md, "semaphore")
	return cmd
}

func (a *app) semaphoreGetCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "get NAMESPACE SEMAPHORE",
		Short: "Show a semaphore",
		Args:  positional("NAMESPACE", "SEMAPHORE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			resp, err := call(a, cmd, 0, func(ctx context.Context, c clients) (*pb.GetSemaphoreResponse, error) {
				return c.api.GetSemaphore(ctx, &pb.GetSemaphoreRequest{NamespaceName: args[0], SemaphoreName: args[1]})
			})
			if err != nil {
				return err
			}
			return a.show(semaphoreView(resp, resp.GetSemaphore()))
		},
	}
}

func (a *app) semaphoreListCmd() *cobra.Command {
	var lf listFlags
	cmd := &cobra.Command{
		Use:   "list NAMESPACE",
		Short: "List the semaphores of a namespace, ordered by name",
		Args:  positional("NAMESPACE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := lf.check(cmd); err != nil {
				return err
			}
			resp, err := call(a, cmd, 0, func(ctx context.Context, c clients) (*pb.ListSemaphoresResponse, error) {
				return c.api.ListSemaphores(ctx, &pb.ListSemaphoresRequest{NamespaceName: args[0], Limit: lf.limit, PaginationToken: lf.token})
			})
			if err != nil {
				return err
			}
			return a.show(semaphoresView(resp))
		},
	}
	lf.register(cmd.Flags())
	return cmd
}

func (a *app) semaphoreUpdateCmd() *cobra.Command {
	var (
		desc      string
		permits   int64
		md        []string
		clearMeta bool
		expected  int64
	)
	cmd := &cobra.Command{
		Use:   "update NAMESPACE SEMAPHORE",
		Short: "Change a semaphore's permits, description or metadata",
		Long: `Change a semaphore's permits, description or metadata.

Permits below the current active holds fail with FailedPrecondition;
raising them wakes waiters. The API replaces every mutable field, so fields
not given here are sent with their current values. Without
--expected-version the version read just before the update is used: a
concurrent change still makes the update fail with "version mismatch".`,
		Example: "  grackle semaphore update third_parties partner_1 --permits 30 --expected-version 1",
		Args:    positional("NAMESPACE", "SEMAPHORE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !changed(cmd, "description", "permits", "metadata") && !clearMeta {
				return usagef("nothing to update: give --permits, --description, --metadata or --clear-metadata")
			}
			if changed(cmd, "permits") {
				if err := checkPermits(cmd, permits); err != nil {
					return err
				}
			}
			if err := checkMetadataReplace(cmd, clearMeta); err != nil {
				return err
			}
			if err := checkExpectedVersion(cmd, expected); err != nil {
				return err
			}
			meta, err := parseMetadata(md)
			if err != nil {
				return err
			}
			req := &pb.UpdateSemaphoreRequest{
				NamespaceName: args[0], SemaphoreName: args[1], Description: desc, Permits: permits,
				Metadata: meta, ExpectedVersion: expected,
			}
			keepDesc := !changed(cmd, "description")
			keepPermits := !changed(cmd, "permits")
			keepMeta := !changed(cmd, "metadata") && !clearMeta
			resp, err := call(a, cmd, 0, func(ctx context.Context, c clients) (*pb.UpdateSemaphoreResponse, error) {
				if keepDesc || keepPermits || keepMeta || expected == 0 {
					cur, err := c.api.GetSemaphore(ctx, &pb.GetSemaphoreRequest{NamespaceName: args[0], SemaphoreName: args[1]})
					if err != nil {
						return nil, err
					}
					s := cur.GetSemaphore()
					if keepDesc {
						req.Description = s.GetDescription()
					}
					if keepPermits {
						req.Permits = s.GetPermits()
					}
					if keepMeta {
						req.Metadata = s.GetMetadata()
					}
					if expected == 0 {
						req.ExpectedVersion = s.GetVersion()
					}
				}
				return c.api.UpdateSemaphore(ctx, req)
			})
			if err != nil {
				return err
			}
			return a.show(semaphoreView(resp, resp.GetSemaphore()))
		},
	}
	cmd.Flags().Int64Var(&permits, "permits", 0, "new capacity, at least 1 and not below the active holds (omitted: unchanged)")
	cmd.Flags().StringVar(&desc, "description", "", "new description (\"\" clears it; omitted: unchanged)")
	metadataFlag(cmd.Flags(), &md, "new semaphore (replaces all of it; omitted: unchanged)")
	cmd.Flags().BoolVar(&clearMeta, "clear-metadata", false, "remove all metadata")
	cmd.Flags().Int64Var(&expected, "expected-version", 0, "fail unless the semaphore is at this version (default: the current one)")
	return cmd
}

func (a *app) semaphoreDeleteCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "delete NAMESPACE SEMAPHORE",
		Short: "Delete a semaphore and drop its holders",
		Long: `Delete a semaphore and drop its holders; its waiters end with NotFound.
Deleting a missing semaphore is not an error.`,
		Args: positional("NAMESPACE", "SEMAPHORE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			resp, err := call(a, cmd, 0, func(ctx context.Context, c clients) (*pb.DeleteSemaphoreResponse, error) {
				return c.api.DeleteSemaphore(ctx, &pb.DeleteSemaphoreRequest{NamespaceName: args[0], SemaphoreName: args[1]})
			})
			if err != nil {
				return err
			}
			what := fmt.Sprintf("semaphore %q deleted from namespace %q", args[1], args[0])
			if !resp.GetExisted() {
				what = fmt.Sprintf("semaphore %q did not exist in namespace %q", args[1], args[0])
			}
			return a.show(doneView(resp, what))
		},
	}
}

func (a *app) semaphoreAcquireCmd() *cobra.Command {
	var (
		lease  string
		weight int64
		wait   time.Duration
		md     []string
	)
	cmd := &cobra.Command{
		Use:   "acquire NAMESPACE SEMAPHORE --lease LEASE_ID",
		Short: "Acquire permits under a lease, waiting up to --wait",
		Long: `Acquire --weight permits of a semaphore under a lease (all or none, FIFO).

With --wait 0 (the default) it tries once; otherwise the server waits up to
--wait for the permits (whole seconds, rounded up). The call's deadline is
--wait plus --timeout. On a terminal, a status line shows how long it has
waited and how much wait is left (not with --quiet).

Acquiring again under a lease that already holds the semaphore changes its
weight and metadata; retrying is safe, and the client retries on the new
leader when leadership changes during the wait.

Exit status: 0 acquired (-o id prints the fencing token), 3 not acquired
(outcome UNAVAILABLE or TIMED_OUT; the response is still printed), 4 the
lease does not exist (revoked, expired, or its namespace deleted), 1 the
call failed otherwise (a missing semaphore among others), 2 bad input.`,
		Example: `  grackle semaphore acquire third_parties partner_1 --lease ls_NfKKeiPbP18NFeU3lLGrRWWgDJRB --weight 3 --wait 60s

  if token=$(grackle semaphore acquire third_parties partner_1 --lease "$LEASE" -o id); then
    echo "got it, fencing token $token"
  fi`,
		Args: positional("NAMESPACE", "SEMAPHORE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if lease == "" {
				return usagef("--lease is required (create one with: grackle lease create %s --process-id ...)", args[0])
			}
			if err := checkSemaphoreLease(lease); err != nil {
				return err
			}
			if weight < 1 {
				return flagError(cmd, "weight", "must be at least 1")
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
			stop := func() {}
			if secs > 0 && a.statusLine().Enabled() {
				// The status line follows the call's place in the queue.
				dctx, cancel := context.WithTimeout(cmdContext(cmd), a.timeout)
				cli, err := a.client(dctx)
				cancel()
				if err != nil {
					return a.connectError(cmdContext(cmd), err)
				}
				stop = a.waitStatusInQueue(cli, fmt.Sprintf("%d permit(s) of %s/%s", weight, args[0], args[1]), waitFor, args[0], args[1], lease)
			}
			resp, err := call(a, cmd, waitFor, func(ctx context.Context, c clients) (*pb.AcquireSemaphoreResponse, error) {
				return c.api.AcquireSemaphore(ctx, &pb.AcquireSemaphoreRequest{
					NamespaceName: args[0], SemaphoreName: args[1], LeaseId: lease,
					Weight: weight, TimeoutSeconds: secs, Metadata: meta,
				})
			})
			stop()
			if leaseGone(err) {
				return leaseLost(err)
			}
			if err != nil {
				return err
			}
			if err := a.show(acquireView(resp)); err != nil {
				return err
			}
			return acquireResult(args[1], weight, waitFor, resp)
		},
	}
	cmd.Flags().StringVar(&lease, "lease", "", "lease ID the permits are held under (required)")
	cmd.Flags().Int64Var(&weight, "weight", 1, "permits to acquire")
	durationVar(cmd.Flags(), &wait, "wait", 0, "how long the server waits for the permits (0 = try once; at most the server's maximum, 300s by default)")
	metadataFlag(cmd.Flags(), &md, "holder")
	return cmd
}

// acquireResult is nil when resp acquired, else an exit-3 error that says why.
func acquireResult(sem string, weight int64, wait time.Duration, resp *pb.AcquireSemaphoreResponse) error {
	s := resp.GetSemaphore()
	state := fmt.Sprintf("%d of %d permits held by %d holder(s), wanted %d", s.GetActiveHolds(), s.GetPermits(), s.GetActiveHoldersCount(), weight)
	switch resp.GetOutcome() {
	case pb.AcquireOutcome_ACQUIRE_OUTCOME_ACQUIRED:
		return nil
	case pb.AcquireOutcome_ACQUIRE_OUTCOME_UNAVAILABLE:
		return &exitError{code: exitNotAcquired, msg: fmt.Sprintf("UNAVAILABLE: %q not acquired at once (%s; --wait 30s waits)", sem, state)}
	case pb.AcquireOutcome_ACQUIRE_OUTCOME_TIMED_OUT:
		return &exitError{code: exitNotAcquired, msg: fmt.Sprintf("TIMED_OUT: %q not acquired within %s (%s)", sem, wait, state)}
	default:
		return &exitError{code: exitCallFailed, msg: fmt.Sprintf("unexpected outcome %s", resp.GetOutcome())}
	}
}

func (a *app) semaphoreReleaseCmd() *cobra.Command {
	var lease string
	cmd := &cobra.Command{
		Use:   "release NAMESPACE SEMAPHORE --lease LEASE_ID",
		Short: "Release what a lease holds of a semaphore",
		Long: `Release what a lease holds of a semaphore. Releasing what the lease does
not hold changes nothing and is not an error.`,
		Example: "  grackle semaphore release third_parties partner_1 --lease ls_NfKKeiPbP18NFeU3lLGrRWWgDJRB",
		Args:    positional("NAMESPACE", "SEMAPHORE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if lease == "" {
				return usagef("--lease is required")
			}
			if err := checkSemaphoreLease(lease); err != nil {
				return err
			}
			resp, err := call(a, cmd, 0, func(ctx context.Context, c clients) (*pb.ReleaseSemaphoreResponse, error) {
				return c.api.ReleaseSemaphore(ctx, &pb.ReleaseSemaphoreRequest{NamespaceName: args[0], SemaphoreName: args[1], LeaseId: lease})
			})
			if err != nil {
				return err
			}
			v := semaphoreView(resp, resp.GetSemaphore())
			if !resp.GetReleased() {
				v.done = fmt.Sprintf("lease %s did not hold semaphore %q: nothing released", lease, args[1])
			}
			return a.show(v)
		},
	}
	cmd.Flags().StringVar(&lease, "lease", "", "lease ID whose hold is released (required)")
	return cmd
}

func (a *app) semaphoreHoldersCmd() *cobra.Command {
	var lf listFlags
	cmd := &cobra.Command{
		Use:   "holders NAMESPACE SEMAPHORE",
		Short: "List the holders of a semaphore, in acquisition order",
		Args:  positional("NAMESPACE", "SEMAPHORE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := lf.check(cmd); err != nil {
				return err
			}
			resp, err := call(a, cmd, 0, func(ctx context.Context, c clients) (*pb.ListSemaphoreHoldersResponse, error) {
				return c.api.ListSemaphoreHolders(ctx, &pb.ListSemaphoreHoldersRequest{
					NamespaceName: args[0], SemaphoreName: args[1], Limit: lf.limit, PaginationToken: lf.token,
				})
			})
			if err != nil {
				return err
			}
			return a.show(holdersView(resp))
		},
	}
	lf.register(cmd.Flags())
	return cmd
}
