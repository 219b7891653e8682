package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/proto"

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
func ttlSeconds(cmd *cobra.Command, ttl time.Duration) (int64, error) {
	return wholeSeconds(cmd, "ttl", ttl, 1)
}

// semaphoreLeases are the leases of `grackle lease`.
var semaphoreLeases = leaseKind{
	noun:     "lease",
	checkArg: checkSemaphoreLeaseArg,
	create: func(ctx context.Context, c clients, ns, processID string, secs int64, _ map[string]string) (view, error) {
		resp, err := c.api.CreateSemaphoreLease(ctx, &pb.CreateSemaphoreLeaseRequest{NamespaceName: ns, ProcessId: processID, TtlSeconds: secs})
		if err != nil {
			return view{}, err
		}
		return leaseView(resp, resp.GetLease()), nil
	},
	get: func(ctx context.Context, c clients, ns, id string) (view, int64, error) {
		resp, err := c.api.GetSemaphoreLease(ctx, &pb.GetSemaphoreLeaseRequest{NamespaceName: ns, LeaseId: id})
		if err != nil {
			return view{}, 0, err
		}
		return leaseView(resp, resp.GetLease()), resp.GetLease().GetTtlSeconds(), nil
	},
	refresh: func(ctx context.Context, c clients, ns, id string, secs int64) (view, error) {
		resp, err := c.api.RefreshSemaphoreLease(ctx, &pb.RefreshSemaphoreLeaseRequest{NamespaceName: ns, LeaseId: id, TtlSeconds: secs})
		if err != nil {
			return view{}, err
		}
		return leaseView(resp, resp.GetLease()), nil
	},
	revoke: func(ctx context.Context, c clients, ns, id string) (proto.Message, error) {
		return c.api.RevokeSemaphoreLease(ctx, &pb.RevokeSemaphoreLeaseRequest{NamespaceName: ns, LeaseId: id})
	},
	revokedNone: &pb.RevokeSemaphoreLeaseResponse{},
	list: func(ctx context.Context, c clients, ns, processID string, lf listFlags) (view, error) {
		resp, err := c.api.ListSemaphoreLeases(ctx, &pb.ListSemaphoreLeasesRequest{
			NamespaceName: ns, ProcessId: processID, Limit: lf.limit, PaginationToken: lf.token,
		})
		if err != nil {
			return view{}, err
		}
		return leasesView(resp), nil
	},
}

func (a *app) leaseCreateCmd() *cobra.Command {
	return semaphoreLeases.createCmd(a, help{
		short: "Create a lease that expires --ttl from now unless refreshed",
		example: `  grackle lease create third_parties --process-id host-123/pid-4567 --ttl 60s
  LEASE=$(grackle lease create third_parties --process-id "$(hostname)/pid-$$" -o id)`,
	})
}

func (a *app) leaseGetCmd() *cobra.Command {
	return semaphoreLeases.getCmd(a, help{short: "Show a lease (NotFound once it has expired)"})
}

func (a *app) leaseRefreshCmd() *cobra.Command {
	return semaphoreLeases.refreshCmd(a, help{
		short: "Extend a lease and every hold it owns to --ttl from now",
		long: `Extend a lease and every hold it owns to --ttl from now. Without --ttl
the lease's own ttl_seconds is used. A lease that is gone (expired, revoked,
or its namespace deleted) exits 4: the lease was lost.`,
		example: "  grackle lease refresh third_parties ls_NfKKeiPbP18NFeU3lLGrRWWgDJRB --ttl 60s",
	})
}

func (a *app) leaseRevokeCmd() *cobra.Command {
	return semaphoreLeases.revokeCmd(a, help{
		short: "Release everything a lease holds and delete it",
		long: `Release everything a lease holds and delete it; its waiters end with
NotFound. Revoking a lease that is already gone (revoked, expired, or in a
namespace that does not exist) says so and exits 0.`,
	})
}

func (a *app) leaseListCmd() *cobra.Command {
	return semaphoreLeases.listCmd(a, help{short: "List the unexpired leases of a namespace"})
}

// ---- the lease commands of both kinds ----

// leaseKind is what the lease commands need of one kind of lease: the
// semaphore leases of `grackle lease` and the lock leases of `grackle lock
// lease` take the same five commands, with the same checks, flags, exit
// codes and messages, over different RPCs. Each call is one RPC with its
// response made the view the command shows; the help texts, which differ,
// come with each command (help).
type leaseKind struct {
	// noun names the kind in messages, as the command path does: "lease",
	// "lock lease".
	noun string
	// metadata: create takes --metadata (lock leases carry metadata,
	// semaphore leases do not).
	metadata bool
	// checkArg refuses a LEASE_ID of the other kind (the server would
	// answer NotFound, which refresh would report as a lost lease).
	checkArg func(id string) error
	create   func(ctx context.Context, c clients, ns, processID string, secs int64, meta map[string]string) (view, error)
	// get also returns the lease's ttl_seconds: refresh without --ttl
	// extends by it.
	get     func(ctx context.Context, c clients, ns, id string) (v view, ttlSeconds int64, err error)
	refresh func(ctx context.Context, c clients, ns, id string, secs int64) (view, error)
	revoke  func(ctx context.Context, c clients, ns, id string) (proto.Message, error)
	// revokedNone is the (empty) response shown when the lease to revoke
	// was already gone: the call itself returned none.
	revokedNone proto.Message
	list        func(ctx context.Context, c clients, ns, processID string, lf listFlags) (view, error)
}

// help is a command's help texts.
type help struct{ short, long, example string }

func (k leaseKind) createCmd(a *app, h help) *cobra.Command {
	var (
		processID string
		ttl       time.Duration
		md        []string
	)
	cmd := &cobra.Command{
		Use:     "create NAMESPACE --process-id ID",
		Short:   h.short,
		Long:    h.long,
		Example: h.example,
		Args:    positional("NAMESPACE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if processID == "" {
				return usagef("--process-id is required (any label of the caller, e.g. host-123/pid-4567)")
			}
			secs, err := ttlSeconds(cmd, ttl)
			if err != nil {
				return err
			}
			meta, err := parseMetadata(md) // nil without --metadata
			if err != nil {
				return err
			}
			v, err := call(a, cmd, 0, func(ctx context.Context, c clients) (view, error) {
				return k.create(ctx, c, args[0], processID, secs, meta)
			})
			if err != nil {
				return err
			}
			return a.show(v)
		},
	}
	cmd.Flags().StringVar(&processID, "process-id", "", "who owns the lease, 1..128 bytes, free-form (required)")
	durationVar(cmd.Flags(), &ttl, "ttl", 60*time.Second, "time until the lease expires unless refreshed, whole seconds (server max 300s by default)")
	if k.metadata {
		metadataFlag(cmd.Flags(), &md, "lease")
	}
	return cmd
}

func (k leaseKind) getCmd(a *app, h help) *cobra.Command {
	return &cobra.Command{
		Use:     "get NAMESPACE LEASE_ID",
		Short:   h.short,
		Long:    h.long,
		Example: h.example,
		Args:    positional("NAMESPACE", "LEASE_ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := k.checkArg(args[1]); err != nil {
				return err
			}
			v, err := call(a, cmd, 0, func(ctx context.Context, c clients) (view, error) {
				v, _, err := k.get(ctx, c, args[0], args[1])
				return v, err
			})
			if err != nil {
				return err
			}
			return a.show(v)
		},
	}
}

func (k leaseKind) refreshCmd(a *app, h help) *cobra.Command {
	var ttl time.Duration
	cmd := &cobra.Command{
		Use:     "refresh NAMESPACE LEASE_ID",
		Short:   h.short,
		Long:    h.long,
		Example: h.example,
		Args:    positional("NAMESPACE", "LEASE_ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := k.checkArg(args[1]); err != nil {
				return err
			}
			given := changed(cmd, "ttl")
			var secs int64
			if given {
				var err error
				if secs, err = ttlSeconds(cmd, ttl); err != nil {
					return err
				}
			}
			v, err := call(a, cmd, 0, func(ctx context.Context, c clients) (view, error) {
				secs := secs
				if !given {
					_, cur, err := k.get(ctx, c, args[0], args[1])
					if err != nil {
						return view{}, err
					}
					secs = cur
				}
				return k.refresh(ctx, c, args[0], args[1], secs)
			})
			if leaseGone(err) {
				return leaseLost(err)
			}
			if err != nil {
				return err
			}
			return a.show(v)
		},
	}
	durationVar(cmd.Flags(), &ttl, "ttl", 0, "time from now until the lease expires, whole seconds (default: the lease's ttl_seconds)")
	return cmd
}

func (k leaseKind) revokeCmd(a *app, h help) *cobra.Command {
	return &cobra.Command{
		Use:     "revoke NAMESPACE LEASE_ID",
		Short:   h.short,
		Long:    h.long,
		Example: h.example,
		Args:    positional("NAMESPACE", "LEASE_ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := k.checkArg(args[1]); err != nil {
				return err
			}
			resp, err := call(a, cmd, 0, func(ctx context.Context, c clients) (proto.Message, error) {
				return k.revoke(ctx, c, args[0], args[1])
			})
			if leaseGone(err) {
				return a.show(doneView(k.revokedNone, fmt.Sprintf("%s %s did not exist in namespace %q (or had expired)", k.noun, args[1], args[0])))
			}
			if err != nil {
				return err
			}
			return a.show(doneView(resp, fmt.Sprintf("%s %s revoked", k.noun, args[1])))
		},
	}
}

func (k leaseKind) listCmd(a *app, h help) *cobra.Command {
	var (
		lf        listFlags
		processID string
	)
	cmd := &cobra.Command{
		Use:     "list NAMESPACE",
		Short:   h.short,
		Long:    h.long,
		Example: h.example,
		Args:    positional("NAMESPACE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := lf.check(cmd); err != nil {
				return err
			}
			v, err := call(a, cmd, 0, func(ctx context.Context, c clients) (view, error) {
				return k.list(ctx, c, args[0], processID, lf)
			})
			if err != nil {
				return err
			}
			return a.show(v)
		},
	}
	cmd.Flags().StringVar(&processID, "process-id", "", "only the leases of this process")
	lf.register(cmd.Flags())
	return cmd
}
