package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
)

func (a *app) leaseCmd() *cobra.Command {
	cmd := a.group("lease", "Create, refresh, revoke and inspect semaphore leases (lock leases: grackle lock lease)")
	cmd.AddCommand(
		a.leaseCreateCmd(),
		a.leaseGetCmd(),
		a.leaseRefreshCmd(),
		a.leaseRevokeCmd(),
		a.leaseListCmd(),
	)
	return cmd
}

// ttlSeconds is --ttl in the API's whole seconds (rounded up, at least 1).
func ttlSeconds(ttl time.Duration) (int64, error) {
	return wholeSeconds("ttl", ttl, 1)
}

func (a *app) leaseCreateCmd() *cobra.Command {
	var (
		processID string
		ttl       time.Duration
	)
	cmd := &cobra.Command{
		Use:   "create NAMESPACE --process-id ID",
		Short: "Create a lease that expires --ttl from now unless refreshed",
		Example: `  grackle lease create third_parties --process-id host-123/pid-4567 --ttl 60s
  LEASE=$(grackle lease create third_parties --process-id "$(hostname)/pid-$$" -o id)`,
		Args: positional("NAMESPACE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if processID == "" {
				return usagef("--process-id is required (any label of the caller, e.g. host-123/pid-4567)")
			}
			secs, err := ttlSeconds(ttl)
			if err != nil {
				return err
			}
			resp, err := call(a, cmd, 0, func(ctx context.Context, c clients) (*pb.CreateSemaphoreLeaseResponse, error) {
				return c.api.CreateSemaphoreLease(ctx, &pb.CreateSemaphoreLeaseRequest{NamespaceName: args[0], ProcessId: processID, TtlSeconds: secs})
			})
			if err != nil {
				return err
			}
			return a.show(leaseView(resp, resp.GetLease()))
		},
	}
	cmd.Flags().StringVar(&processID, "process-id", "", "who owns the lease, 1..128 bytes, free-form (required)")
	durationVar(cmd.Flags(), &ttl, "ttl", 60*time.Second, "time until the lease expires unless refreshed, whole seconds (server max 300s by default)")
	return cmd
}

func (a *app) leaseGetCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "get NAMESPACE LEASE_ID",
		Short: "Show a lease (NotFound once it has expired)",
		Args:  positional("NAMESPACE", "LEASE_ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkSemaphoreLeaseArg(args[1]); err != nil {
				return err
			}
			resp, err := call(a, cmd, 0, func(ctx context.Context, c clients) (*pb.GetSemaphoreLeaseResponse, error) {
				return c.api.GetSemaphoreLease(ctx, &pb.GetSemaphoreLeaseRequest{NamespaceName: args[0], LeaseId: args[1]})
			})
			if err != nil {
				return err
			}
			return a.show(leaseView(resp, resp.GetLease()))
		},
	}
}

func (a *app) leaseRefreshCmd() *cobra.Command {
	var ttl time.Duration
	cmd := &cobra.Command{
		Use:   "refresh NAMESPACE LEASE_ID",
		Short: "Extend a lease and every hold it owns to --ttl from now",
		Long: `Extend a lease and every hold it owns to --ttl from now. Without --ttl
the lease's own ttl_seconds is used. A lease that is gone (expired, revoked,
or its namespace deleted) exits 4: the lease was lost.`,
		Example: "  grackle lease refresh third_parties ls_NfKKeiPbP18NFeU3lLGrRWWgDJRB --ttl 60s",
		Args:    positional("NAMESPACE", "LEASE_ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkSemaphoreLeaseArg(args[1]); err != nil {
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
			resp, err := call(a, cmd, 0, func(ctx context.Context, c clients) (*pb.RefreshSemaphoreLeaseResponse, error) {
				req := &pb.RefreshSemaphoreLeaseRequest{NamespaceName: args[0], LeaseId: args[1], TtlSeconds: secs}
				if !given {
					cur, err := c.api.GetSemaphoreLease(ctx, &pb.GetSemaphoreLeaseRequest{NamespaceName: args[0], LeaseId: args[1]})
					if err != nil {
						return nil, err
					}
					req.TtlSeconds = cur.GetLease().GetTtlSeconds()
				}
				return c.api.RefreshSemaphoreLease(ctx, req)
			})
			if leaseGone(err) {
				return &exitError{code: exitLeaseLost, msg: fmt.Sprintf("lease refresh: lease %s is lost: %s", args[1], err.Error())}
			}
			if err != nil {
				return err
			}
			return a.show(leaseView(resp, resp.GetLease()))
		},
	}
	durationVar(cmd.Flags(), &ttl, "ttl", 0, "time from now until the lease expires, whole seconds (default: the lease's ttl_seconds)")
	return cmd
}

func (a *app) leaseRevokeCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "revoke NAMESPACE LEASE_ID",
		Short: "Release everything a lease holds and delete it",
		Long: `Release everything a lease holds and delete it; its waiters end with
NotFound. Revoking a lease that is already gone (revoked, expired, or in a
namespace that does not exist) says so and exits 0.`,
		Args: positional("NAMESPACE", "LEASE_ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkSemaphoreLeaseArg(args[1]); err != nil {
				return err
			}
			resp, err := call(a, cmd, 0, func(ctx context.Context, c clients) (*pb.RevokeSemaphoreLeaseResponse, error) {
				return c.api.RevokeSemaphoreLease(ctx, &pb.RevokeSemaphoreLeaseRequest{NamespaceName: args[0], LeaseId: args[1]})
			})
			if leaseGone(err) {
				return a.show(doneView(&pb.RevokeSemaphoreLeaseResponse{}, fmt.Sprintf("lease %s did not exist in namespace %q (or had expired)", args[1], args[0])))
			}
			if err != nil {
				return err
			}
			return a.show(doneView(resp, fmt.Sprintf("lease %s revoked", args[1])))
		},
	}
}

func (a *app) leaseListCmd() *cobra.Command {
	var (
		lf        listFlags
		processID string
	)
	cmd := &cobra.Command{
		Use:   "list NAMESPACE",
		Short: "List the unexpired leases of a namespace",
		Args:  positional("NAMESPACE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := lf.check(); err != nil {
				return err
			}
			resp, err := call(a, cmd, 0, func(ctx context.Context, c clients) (*pb.ListSemaphoreLeasesResponse, error) {
				return c.api.ListSemaphoreLeases(ctx, &pb.ListSemaphoreLeasesRequest{
					NamespaceName: args[0], ProcessId: processID, Limit: lf.limit, PaginationToken: lf.token,
				})
			})
			if err != nil {
				return err
			}
			return a.show(leasesView(resp))
		},
	}
	cmd.Flags().StringVar(&processID, "process-id", "", "only the leases of this process")
	lf.register(cmd.Flags())
	return cmd
}
