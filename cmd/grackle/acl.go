package main

import (
	"context"
	"errors"

	"github.com/spf13/cobra"

	"github.com/grackle-coord/grackle/acl"
	"github.com/grackle-coord/grackle/apierr"
	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
)

// grackle acl: access control of a cluster started with --acl
// (docs/SECURITY.md).
func (a *app) aclCmd() *cobra.Command {
	cmd := a.group("acl", "Access control: bootstrap, and create, list and revoke tokens")
	token := &cobra.Command{
		Use:   "token",
		Short: "Create, list and revoke access tokens",
		RunE:  unknownSubcommand,
	}
	token.AddCommand(a.aclTokenCreateCmd(), a.aclTokenListCmd(), a.aclTokenRevokeCmd())
	cmd.AddCommand(a.aclBootstrapCmd(), token)
	return cmd
}

// tokenSecretView shows a new token; -o id prints only its secret (the one
// time it can be read).
func tokenSecretView(resp interface {
	GetToken() *pb.Token
	GetSecret() string
}) view {
	v := view{ids: []string{resp.GetSecret()}}
	t := resp.GetToken()
	v.table = func(o *tableOut) {
		o.kv([2]string{"Secret", resp.GetSecret()}, [2]string{"ID", t.GetId()}, [2]string{"Role", t.GetRole()},
			[2]string{"Namespace", t.GetNamespace()}, [2]string{"Description", t.GetDescription()})
	}
	return v
}

func (a *app) aclBootstrapCmd() *cobra.Command {
	var desc string
	cmd := &cobra.Command{
		Use:   "bootstrap",
		Short: "Create the first token (admin on every namespace); succeeds once per cluster",
		Long: `Create the cluster's first token: admin on "*". It succeeds once per
cluster; its secret is printed only now (-o id prints just the secret).`,
		Example: "  export GRACKLE_TOKEN=$(grackle acl bootstrap -o id)",
		Args:    positional(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			resp, err := call(a, cmd, 0, func(ctx context.Context, c clients) (*pb.BootstrapResponse, error) {
				return c.client.Bootstrap(ctx, &pb.BootstrapRequest{Description: desc})
			})
			if a.token == "" && refusedFor(err, acl.ReasonTokenMissing) {
				resp, err = a.bootstrapDirect(cmd, desc)
			}
			if err != nil {
				return err
			}
			v := tokenSecretView(resp)
			v.msg = resp
			return a.show(v)
		},
	}
	cmd.Flags().StringVar(&desc, "description", "", "free text, at most 1024 bytes")
	return cmd
}

func (a *app) aclTokenCreateCmd() *cobra.Command {
	var role, ns, desc string
	cmd := &cobra.Command{
		Use:     "create",
		Short:   "Create a token with a role on one namespace (or \"*\"); prints its secret once",
		Example: "  grackle acl token create --role write --namespace third_parties --description 'sync jobs' -o id",
		Args:    positional(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch role {
			case "read", "write", "admin":
			default:
				return flagError(cmd, "role", "must be read, write or admin")
			}
			if ns == "" {
				return usagef("--namespace is required (a namespace name, or \"*\" for every namespace)")
			}
			resp, err := call(a, cmd, 0, func(ctx context.Context, c clients) (*pb.CreateTokenResponse, error) {
				return c.client.CreateToken(ctx, &pb.CreateTokenRequest{Role: role, Namespace: ns, Description: desc})
			})
			if err != nil {
				return err
			}
			v := tokenSecretView(resp)
			v.msg = resp
			return a.show(v)
		},
	}
	cmd.Flags().StringVar(&role, "role", "", "read (get, list), write (read + acquire, release, leases, semaphores) or admin (everything)")
	cmd.Flags().StringVar(&ns, "namespace", "", `the namespace the token may use, or "*" for every namespace`)
	cmd.Flags().StringVar(&desc, "description", "", "free text, at most 1024 bytes")
	return cmd
}

func (a *app) aclTokenListCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List tokens: id, role, namespace and description (never a secret)",
		Args:  positional(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			resp, err := call(a, cmd, 0, func(ctx context.Context, c clients) (*pb.ListTokensResponse, error) {
				return c.client.ListTokens(ctx, &pb.ListTokensRequest{})
			})
			if err != nil {
				return err
			}
			v := view{msg: resp}
			var rows [][]string
			for _, t := range resp.Tokens {
				v.ids = append(v.ids, t.Id)
				rows = append(rows, []string{t.Id, t.Role, t.Namespace, truncate(t.Description, 40)})
			}
			v.table = func(o *tableOut) { o.table([]string{"ID", "ROLE", "NAMESPACE", "DESCRIPTION"}, rows) }
			return a.show(v)
		},
	}
}

func (a *app) aclTokenRevokeCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "revoke ID",
		Short: "Revoke a token (refused on every node once committed)",
		Args:  positional("ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			resp, err := call(a, cmd, 0, func(ctx context.Context, c clients) (*pb.RevokeTokenResponse, error) {
				return c.client.RevokeToken(ctx, &pb.RevokeTokenRequest{Id: args[0]})
			})
			if err != nil {
				return err
			}
			return a.show(view{msg: resp, ids: []string{args[0]}, done: "revoked token " + args[0]})
		},
	}
}

// bootstrapDirect calls Bootstrap on the first endpoint that answers, not
// through the Go client. The client's first contact asks for the cluster
// status, which a bootstrapped cluster answers only with a token, while
// Bootstrap itself needs none: without a token, a second bootstrap would
// learn "this call needs a token" instead of Bootstrap's own answer, that
// the cluster is already bootstrapped. A follower forwards the call to
// the leader.
func (a *app) bootstrapDirect(cmd *cobra.Command, desc string) (*pb.BootstrapResponse, error) {
	ctx, cancel := context.WithTimeout(cmdContext(cmd), a.timeout)
	defer cancel()
	conn, _, err := a.dialFirst(ctx, min(connectTimeout, a.timeout))
	if err != nil {
		return nil, a.connectError(cmdContext(cmd), err)
	}
	defer conn.Close()
	resp, err := pb.NewACLServiceClient(conn).Bootstrap(ctx, &pb.BootstrapRequest{Description: desc})
	if err != nil {
		return nil, a.callError(cmdContext(cmd), err)
	}
	return resp, nil
}

// refusedFor reports whether a command's error is the server's refusal
// with reason (its ErrorInfo, never the message).
func refusedFor(err error, reason string) bool {
	var ee *exitError
	return errors.As(err, &ee) && ee.callErr != nil && apierr.ReasonOf(ee.callErr) == reason
}
