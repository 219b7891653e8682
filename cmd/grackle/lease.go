package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
)

func (a *app) leaseCmd() *cobra.Command {
	cmd := a.group("lease", "Create, refresh, revoke and inspect semaphore leases")
	cmd.AddCommand(
		a.leaseCreateCmd(),
		a.leaseGetCmd(),
		a.leaseRefreshCmd(),
		a.leaseRevokeCmd(),
		a.leaseListCmd(),
	)
	return cmd
}

func checkTTL(ttl int64) error {
	if ttl < 1 {
		return usagef("ttl: must be at least 1 second, got %d", ttl)
	}
	return nil
}

func (a *app) leaseCreateCmd() *cobra.Command {
	var (
		processID string
		ttl       int64
	)
	cmd := &cobra.Command{
		Use:   "create NAMESPACE --process-id ID",
		Short: "Create a lease that expires --ttl seconds from now unless refreshed",
		Example: `  grackle lease create third_parties --process-id host-123/pid-4567 --ttl 60
  LEASE=$(grackle lease create third_parties --process-id "$(hostname)/pid-$$" -o id)`,
		Args: positional("NAMESPACE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if processID == "" {
				return usagef("--process-id is required (any label of the caller, e.g. host-123/pid-4567)")
			}
			if err := checkTTL(ttl); err != nil {
				return err
			}
			resp, err := call(a, cmd, 0, func(ctx context.Context, c clients) (*pb.CreateSemaphoreLeaseResponse, error) {
				return c.api.CreateSemaphoreLease(ctx, &pb.CreateSemaphoreLeaseRequest{NamespaceName: args[0], ProcessId: processID, TtlSeconds: ttl})
			})
			if err != nil {
				return err
			}
			return a.show(leaseView(resp, resp.GetLease()))
		},
	}
	cmd.Flags().StringVar(&processID, "process-id", "", "who owns the lease, 1..128 bytes, free-form (required)")
	cmd.Flags().Int64Var(&ttl, "ttl", 60, "seconds until the lease expires unless refreshed (server max 300 by default)")
	return cmd
}

func (a *app) leaseGetCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "get NAMESPACE LEASE_ID",
		Short: "Show a lease (NotFound once it has expired)",
		Args:  positional("NAMESPACE", "LEASE_ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
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
	var ttl int64
	cmd := &cobra.Command{
		Use:   "refresh NAMESPACE LEASE_ID",
		Short: "Extend a lease and every hold it owns to --ttl seconds from now",
		Long: `Extend a lease and every hold it owns to --ttl seconds from now. Without
--ttl the lease's own ttl_seconds is used. An expired lease is NotFound.`,
		Example: "  grackle lease refresh third_parties ls_NfKKeiPbP18NFeU3lLGrRWWgDJRB --ttl 60",
		Args:    positional("NAMESPACE", "LEASE_ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			given := changed(cmd, "ttl")
			if given {
				if err := checkTTL(ttl); err != nil {
					return err
				}
			}
			resp, err := call(a, cmd, 0, func(ctx context.Context, c clients) (*pb.RefreshSemaphoreLeaseResponse, error) {
				req := &pb.RefreshSemaphoreLeaseRequest{NamespaceName: args[0], LeaseId: args[1], TtlSeconds: ttl}
				if !given {
					cur, err := c.api.GetSemaphoreLease(ctx, &pb.GetSemaphoreLeaseRequest{NamespaceName: args[0], LeaseId: args[1]})
					if err != nil {
						return nil, err
					}
					req.TtlSeconds = cur.GetLease().GetTtlSeconds()
				}
				return c.api.RefreshSemaphoreLease(ctx, req)
			})
			if err != nil {
				return err
			}
			return a.show(leaseView(resp, resp.GetLease()))
		},
	}
	cmd.Flags().Int64Var(&ttl, "ttl", 0, "seconds from now until the lease expires (default: the lease's ttl_seconds)")
	return cmd
}

func (a *app) leaseRevokeCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "revoke NAMESPACE LEASE_ID",
		Short: "Release everything a lease holds and delete it",
		Long: `Release everything a lease holds and delete it; its waiters end with
NotFound. Revoking a lease that is gone is NotFound.`,
		Args: positional("NAMESPACE", "LEASE_ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			resp, err := call(a, cmd, 0, func(ctx context.Context, c clients) (*pb.RevokeSemaphoreLeaseResponse, error) {
				return c.api.RevokeSemaphoreLease(ctx, &pb.RevokeSemaphoreLeaseRequest{NamespaceName: args[0], LeaseId: args[1]})
			})
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
