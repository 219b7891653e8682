package main

// Shell completion of namespace, semaphore, lock, wait group and barrier
// names, asked of the cluster. Cobra's `grackle completion bash|zsh|fish|powershell` prints
// the shell script; the script calls the hidden `grackle __complete ...`,
// which runs the functions below. Every command whose Use names
// NAMESPACE, NAMESPACE SEMAPHORE, NAMESPACE LOCK, NAMESPACE WAIT_GROUP or
// NAMESPACE BARRIER as its first arguments gets them (see attachCompletion), so new commands that follow the
// convention need nothing more.

import (
	"context"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/grackle-coord/grackle/fsm"
	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
)

const (
	// completeTimeout bounds a completion's calls: a shell must not hang.
	completeTimeout = 3 * time.Second
	// completeMax bounds how many names a completion lists.
	completeMax = 1000
)

// attachCompletion walks cmd's tree and gives every command whose
// arguments start with NAMESPACE [SEMAPHORE|LOCK|WAIT_GROUP|BARRIER] a
// completion of those names
// (the name a create makes is not completed).
func (a *app) attachCompletion(cmd *cobra.Command) {
	for _, c := range cmd.Commands() {
		a.attachCompletion(c)
	}
	if cmd.ValidArgsFunction != nil || !cmd.Runnable() {
		return
	}
	fields := strings.Fields(cmd.Use)
	if len(fields) < 2 || fields[1] != "NAMESPACE" {
		return
	}
	// n positional names are completed; second completes the second.
	n, second := 1, a.completeNames
	if len(fields) > 2 && fields[2] == "SEMAPHORE" {
		n = 2
	}
	if len(fields) > 2 && fields[2] == "LOCK" {
		n, second = 2, a.completeLockNames
	}
	if len(fields) > 2 && fields[2] == "WAIT_GROUP" {
		n, second = 2, a.completeWaitGroupNames
	}
	if len(fields) > 2 && fields[2] == "BARRIER" {
		n, second = 2, a.completeBarrierNames
	}
	if cmd.Name() == "create" && len(fields)-1 == n {
		n-- // the last positional of a create is the new name
	}
	if n == 0 {
		return
	}
	cmd.ValidArgsFunction = func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		switch {
		case len(args) == 0:
			return a.completeNames(cmd, "", toComplete), cobra.ShellCompDirectiveNoFileComp
		case len(args) == 1 && n == 2:
			return second(cmd, args[0], toComplete), cobra.ShellCompDirectiveNoFileComp
		}
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
}

// completeNamespaceFlag completes a --namespace flag.
func (a *app) completeNamespaceFlag(cmd *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	return a.completeNames(cmd, "", toComplete), cobra.ShellCompDirectiveNoFileComp
}

// completeSemaphoreFlag completes a --semaphore flag from --namespace.
func (a *app) completeSemaphoreFlag(cmd *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	ns, _ := cmd.Flags().GetString("namespace")
	if ns == "" {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	return a.completeNames(cmd, ns, toComplete), cobra.ShellCompDirectiveNoFileComp
}

// completeLockFlag completes a --lock flag from --namespace.
func (a *app) completeLockFlag(cmd *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	ns, _ := cmd.Flags().GetString("namespace")
	if ns == "" {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	return a.completeLockNames(cmd, ns, toComplete), cobra.ShellCompDirectiveNoFileComp
}

// completeLockNames lists the held locks of ns whose names start with
// prefix (locks nobody holds do not exist, so they are not offered). The
// listing is narrowed to the descendants of the last complete path
// segment typed ("orders/e" lists under "orders"), so that a deep
// hierarchy is not read from its root.
func (a *app) completeLockNames(cmd *cobra.Command, ns, prefix string) []string {
	if !a.completionClientReady(cmd) {
		return nil
	}
	ctx, cancel := context.WithTimeout(cmdContext(cmd), completeTimeout)
	defer cancel()
	cli, err := a.client(ctx)
	if err != nil {
		return nil
	}
	under := ""
	if i := strings.LastIndex(prefix, "/"); i > 0 {
		under = prefix[:i]
	}
	var out []string
	token := ""
	for len(out) < completeMax {
		r, err := cli.ListLocks(ctx, &pb.ListLocksRequest{NamespaceName: ns, Prefix: under, Limit: fsm.MaxPageSize, PaginationToken: token})
		if err != nil {
			return out
		}
		for _, l := range r.GetLocks() {
			if strings.HasPrefix(l.GetName(), prefix) {
				out = append(out, l.GetName())
			}
		}
		if token = r.GetNextPaginationToken(); token == "" {
			break
		}
	}
	return out
}

// completionClientReady applies the environment and checks the client
// flags for a completion (which runs no PersistentPreRun); false when
// they are unusable.
func (a *app) completionClientReady(cmd *cobra.Command) bool {
	if g := groupOf(cmd); g != nil && g.PersistentFlags().Lookup(flagEndpoints) != nil {
		if applyEnv(g.PersistentFlags(), a.lookupEnv) != nil {
			return false
		}
	}
	if a.output == "" {
		a.output = "table"
	}
	if a.checkClientFlags(cmd) != nil {
		return false
	}
	a.quiet = true
	return true
}

// completeNames lists the namespaces (ns == "") or the semaphores of ns
// that start with prefix. Completion must never print errors into a
// shell: a failure completes nothing.
func (a *app) completeNames(cmd *cobra.Command, ns, prefix string) []string {
	// __complete runs no PersistentPreRun: apply the environment here.
	if !a.completionClientReady(cmd) {
		return nil
	}
	ctx, cancel := context.WithTimeout(cmdContext(cmd), completeTimeout)
	defer cancel()
	cli, err := a.client(ctx)
	if err != nil {
		return nil
	}
	var out []string
	token := ""
	for len(out) < completeMax {
		var names []string
		var next string
		if ns == "" {
			r, err := cli.ListNamespaces(ctx, &pb.ListNamespacesRequest{Limit: fsm.MaxPageSize, PaginationToken: token})
			if err != nil {
				return out
			}
			for _, n := range r.GetNamespaces() {
				names = append(names, n.GetName())
			}
			next = r.GetNextPaginationToken()
		} else {
			r, err := cli.ListSemaphores(ctx, &pb.ListSemaphoresRequest{NamespaceName: ns, Limit: fsm.MaxPageSize, PaginationToken: token})
			if err != nil {
				return out
			}
			for _, s := range r.GetSemaphores() {
				names = append(names, s.GetName())
			}
			next = r.GetNextPaginationToken()
		}
		for _, n := range names {
			if strings.HasPrefix(n, prefix) {
				out = append(out, n)
			}
		}
		if next == "" {
			break
		}
		token = next
	}
	return out
}

// completeWaitGroupNames lists the wait groups of ns that start with
// prefix.
func (a *app) completeWaitGroupNames(cmd *cobra.Command, ns, prefix string) []string {
	return a.completePaged(cmd, prefix, func(ctx context.Context, cli pb.GrackleServiceClient, token string) ([]string, string, error) {
		r, err := cli.ListWaitGroups(ctx, &pb.ListWaitGroupsRequest{NamespaceName: ns, Limit: fsm.MaxPageSize, PaginationToken: token})
		var names []string
		for _, g := range r.GetWaitGroups() {
			names = append(names, g.GetName())
		}
		return names, r.GetNextPaginationToken(), err
	})
}

// completeBarrierNames lists the barriers of ns that start with prefix.
func (a *app) completeBarrierNames(cmd *cobra.Command, ns, prefix string) []string {
	return a.completePaged(cmd, prefix, func(ctx context.Context, cli pb.GrackleServiceClient, token string) ([]string, string, error) {
		r, err := cli.ListBarriers(ctx, &pb.ListBarriersRequest{NamespaceName: ns, Limit: fsm.MaxPageSize, PaginationToken: token})
		var names []string
		for _, b := range r.GetBarriers() {
			names = append(names, b.GetName())
		}
		return names, r.GetNextPaginationToken(), err
	})
}

// completePaged lists the names that start with prefix, page by page
// (page returns a page's names and the next token), up to completeMax. A
// failure completes what was listed so far.
func (a *app) completePaged(cmd *cobra.Command, prefix string,
	page func(ctx context.Context, cli pb.GrackleServiceClient, token string) ([]string, string, error)) []string {
	if !a.completionClientReady(cmd) {
		return nil
	}
	ctx, cancel := context.WithTimeout(cmdContext(cmd), completeTimeout)
	defer cancel()
	cli, err := a.client(ctx)
	if err != nil {
		return nil
	}
	var out []string
	token := ""
	for len(out) < completeMax {
		names, next, err := page(ctx, cli, token)
		if err != nil {
			return out
		}
		for _, n := range names {
			if strings.HasPrefix(n, prefix) {
				out = append(out, n)
			}
		}
		if next == "" {
			return out
		}
		token = next
	}
	return out
}
