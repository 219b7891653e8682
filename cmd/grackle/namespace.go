package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
)

func (a *app) namespaceCmd() *cobra.Command {
	cmd := a.group("namespace", "Create, inspect, update and delete namespaces", "ns")
	cmd.AddCommand(
		a.namespaceCreateCmd(),
		a.namespaceGetCmd(),
		a.namespaceListCmd(),
		a.namespaceUpdateCmd(),
		a.namespaceDeleteCmd(),
	)
	return cmd
}

func (a *app) namespaceCreateCmd() *cobra.Command {
	var (
		desc string
		md   []string
	)
	cmd := &cobra.Command{
		Use:     "create NAMESPACE",
		Short:   "Create a namespace",
		Example: "  grackle namespace create third_parties --description 'Partner APIs' --metadata team=payments",
		Args:    positional("NAMESPACE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			meta, err := parseMetadata(md)
			if err != nil {
				return err
			}
			resp, err := call(a, cmd, 0, func(ctx context.Context, c clients) (*pb.CreateNamespaceResponse, error) {
				return c.api.CreateNamespace(ctx, &pb.CreateNamespaceRequest{Name: args[0], Description: desc, Metadata: meta})
			})
			if err != nil {
				return err
			}
			return a.show(namespaceView(resp, resp.GetNamespace()))
		},
	}
	cmd.Flags().StringVar(&desc, "description", "", "free text, at most 1024 bytes")
	metadataFlag(cmd.Flags(), &md, "namespace")
	return cmd
}

func (a *app) namespaceGetCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "get NAMESPACE",
		Short: "Show a namespace",
		Args:  positional("NAMESPACE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			resp, err := call(a, cmd, 0, func(ctx context.Context, c clients) (*pb.GetNamespaceResponse, error) {
				return c.api.GetNamespace(ctx, &pb.GetNamespaceRequest{NamespaceName: args[0]})
			})
			if err != nil {
				return err
			}
			return a.show(namespaceView(resp, resp.GetNamespace()))
		},
	}
}

func (a *app) namespaceListCmd() *cobra.Command {
	var lf listFlags
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List namespaces, ordered by name",
		Args:  positional(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := lf.check(cmd); err != nil {
				return err
			}
			resp, err := call(a, cmd, 0, func(ctx context.Context, c clients) (*pb.ListNamespacesResponse, error) {
				return c.api.ListNamespaces(ctx, &pb.ListNamespacesRequest{Limit: lf.limit, PaginationToken: lf.token})
			})
			if err != nil {
				return err
			}
			return a.show(namespacesView(resp))
		},
	}
	lf.register(cmd.Flags())
	return cmd
}

func (a *app) namespaceUpdateCmd() *cobra.Command {
	var (
		desc      string
		md        []string
		clearMeta bool
		expected  int64
	)
	cmd := &cobra.Command{
		Use:   "update NAMESPACE",
		Short: "Change a namespace's description or metadata",
		Long: `Change a namespace's description or metadata.

The API replaces every mutable field, so fields not given here are sent
with their current values. Without --expected-version the version read
just before the update is used: a concurrent change still makes the
update fail with "version mismatch" instead of being overwritten.`,
		Example: "  grackle namespace update third_parties --description 'Partner APIs (EU)' --expected-version 2",
		Args:    positional("NAMESPACE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !changed(cmd, "description", "metadata") && !clearMeta {
				return usagef("nothing to update: give --description, --metadata or --clear-metadata")
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
			req := &pb.UpdateNamespaceRequest{NamespaceName: args[0], Description: desc, Metadata: meta, ExpectedVersion: expected}
			keepDesc := !changed(cmd, "description")
			keepMeta := !changed(cmd, "metadata") && !clearMeta
			resp, err := call(a, cmd, 0, func(ctx context.Context, c clients) (*pb.UpdateNamespaceResponse, error) {
				if keepDesc || keepMeta || expected == 0 {
					cur, err := c.api.GetNamespace(ctx, &pb.GetNamespaceRequest{NamespaceName: args[0]})
					if err != nil {
						return nil, err
					}
					ns := cur.GetNamespace()
					if keepDesc {
						req.Description = ns.GetDescription()
					}
					if keepMeta {
						req.Metadata = ns.GetMetadata()
					}
					if expected == 0 {
						req.ExpectedVersion = ns.GetVersion()
					}
				}
				return c.api.UpdateNamespace(ctx, req)
			})
			if err != nil {
				return err
			}
			return a.show(namespaceView(resp, resp.GetNamespace()))
		},
	}
	cmd.Flags().StringVar(&desc, "description", "", "new description (\"\" clears it; omitted: unchanged)")
	metadataFlag(cmd.Flags(), &md, "new namespace (replaces all of it; omitted: unchanged)")
	cmd.Flags().BoolVar(&clearMeta, "clear-metadata", false, "remove all metadata")
	cmd.Flags().Int64Var(&expected, "expected-version", 0, "fail unless the namespace is at this version (default: the current one)")
	return cmd
}

func (a *app) namespaceDeleteCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "delete NAMESPACE",
		Short: "Delete a namespace with every semaphore, lease and holder in it",
		Long: `Delete a namespace with every semaphore, lease and holder in it. Waiters
in it end with NotFound. Deleting a missing namespace is not an error.`,
		Args: positional("NAMESPACE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			resp, err := call(a, cmd, 0, func(ctx context.Context, c clients) (*pb.DeleteNamespaceResponse, error) {
				return c.api.DeleteNamespace(ctx, &pb.DeleteNamespaceRequest{NamespaceName: args[0]})
			})
			if err != nil {
				return err
			}
			what := fmt.Sprintf("namespace %q deleted", args[0])
			if !resp.GetExisted() {
				what = fmt.Sprintf("namespace %q did not exist", args[0])
			}
			return a.show(doneView(resp, what))
		},
	}
}

// checkMetadataReplace rejects --metadata together with --clear-metadata.
func checkMetadataReplace(cmd *cobra.Command, clearMeta bool) error {
	if clearMeta && changed(cmd, "metadata") {
		return usagef("--metadata and --clear-metadata exclude each other")
	}
	return nil
}

// checkExpectedVersion wants --expected-version >= 1 when given.
func checkExpectedVersion(cmd *cobra.Command, v int64) error {
	if changed(cmd, "expected-version") && v < 1 {
		return flagError(cmd, "expected-version", "must be at least 1")
	}
	return nil
}
