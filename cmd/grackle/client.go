package main

// Helpers shared by the client commands: flags, environment, argument
// checks, dialing and calling.

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grackle-coord/grackle/apierr"
	"github.com/grackle-coord/grackle/client"
	"github.com/grackle-coord/grackle/fsm"
	"github.com/grackle-coord/grackle/internal/statusline"
	pb "github.com/grackle-coord/grackle/proto/grackle/v1"
	"github.com/grackle-coord/grackle/tlsutil"
)

const (
	flagEndpoints = "endpoints"
	flagTimeout   = "timeout"
	flagOutput    = "output"

	defaultEndpoint = "127.0.0.1:7420"
	defaultTimeout  = 10 * time.Second
	// connectTimeout bounds the wait for one endpoint before trying the next.
	connectTimeout = 3 * time.Second
)

// envName is the environment variable of a flag: node-id -> GRACKLE_NODE_ID.
func envName(flag string) string {
	return "GRACKLE_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// applyEnv sets every flag of fs that was not given on the command line
// from its GRACKLE_<FLAG> environment variable, if set, and marks it so
// (envKey): an error about it then names the variable.
func applyEnv(fs *pflag.FlagSet, lookup func(string) (string, bool)) error {
	if lookup == nil {
		return nil
	}
	var err error
	fs.VisitAll(func(f *pflag.Flag) {
		if err != nil || f.Changed || f.Name == "help" {
			return
		}
		key := envName(f.Name)
		v, ok := lookup(key)
		if !ok {
			return
		}
		if e := fs.Set(f.Name, v); e != nil {
			err = flagValueError(key+"="+quoteArg(v), f, errors.Unwrap(e))
			return
		}
		_ = fs.SetAnnotation(f.Name, envAnnotation, []string{key})
	})
	return err
}

// group makes a command that only holds subcommands, with the client flags.
func (a *app) group(use, short string, aliases ...string) *cobra.Command {
	cmd := &cobra.Command{
		Use:     use,
		Short:   short,
		Aliases: aliases,
		// A group given an unknown subcommand is a usage error, not help.
		RunE: unknownSubcommand,
	}
	fs := cmd.PersistentFlags()
	fs.StringSliceVar(&a.endpoints, flagEndpoints, []string{defaultEndpoint},
		"gRPC addresses (host:port, comma-separated) of any members: the client finds the leader through them [$GRACKLE_ENDPOINTS]")
	durationVar(fs, &a.timeout, flagTimeout, defaultTimeout,
		"deadline of each call, retries included (a Go duration; a bare number is seconds) [$GRACKLE_TIMEOUT]")
	fs.StringVarP(&a.output, flagOutput, "o", "table",
		"output: table, json (counts as numbers, timestamps as strings beside their RFC 3339 form), id, or template='{{.field}}' [$GRACKLE_OUTPUT]")
	a.securityFlags(fs)
	fs.BoolVarP(&a.quiet, "quiet", "q", false, "no status line while waiting, no client warnings on stderr")
	return cmd
}

// securityFlags are the TLS and token flags of the client commands.
func (a *app) securityFlags(fs *pflag.FlagSet) {
	fs.StringVar(&a.cacert, "cacert", "", "connect with TLS, verifying the server with this CA file (PEM) [$GRACKLE_CACERT]")
	fs.StringVar(&a.cert, "cert", "", "client certificate (PEM) for servers that require mutual TLS; implies TLS [$GRACKLE_CERT]")
	fs.StringVar(&a.key, "key", "", "the client certificate's private key (PEM) [$GRACKLE_KEY]")
	fs.StringVar(&a.token, "token", "", "access token of a server started with --acl [$GRACKLE_TOKEN]")
}

// tlsConfig is the client TLS of --cacert, --cert and --key (nil: none
// given, plaintext).
func (a *app) tlsConfig() (*tls.Config, error) {
	if a.cacert == "" && a.cert == "" && a.key == "" {
		return nil, nil
	}
	c, err := tlsutil.ClientConfig(a.cacert, a.cert, a.key)
	if err != nil {
		return nil, usagef("%v", err)
	}
	return c, nil
}

func (a *app) checkClientFlags(cmd *cobra.Command) error {
	if err := checkOutput(cmd, a.output); err != nil {
		return err
	}
	if a.timeout <= 0 {
		return flagError(cmd, flagTimeout, "must be positive")
	}
	var eps []string
	for _, e := range a.endpoints {
		if e = strings.TrimSpace(e); e != "" {
			if err := checkEndpoint(e); err != nil {
				return err
			}
			eps = append(eps, e)
		}
	}
	if len(eps) == 0 {
		return flagError(cmd, flagEndpoints, "need at least one host:port")
	}
	a.endpoints = eps
	var err error
	a.tls, err = a.tlsConfig()
	return err
}

// checkEndpoint refuses at once what cannot be a gRPC endpoint (gRPC would
// otherwise retry it until --timeout and then report a parse error).
func checkEndpoint(e string) error {
	if scheme, rest, ok := strings.Cut(e, "://"); ok {
		return usagef("--endpoints %s: give host:port without the %s:// scheme (--endpoints %s)", e, scheme, strings.TrimSuffix(rest, "/"))
	}
	host, port, err := net.SplitHostPort(e)
	if err != nil && strings.Count(e, ":") > 1 && !strings.HasPrefix(e, "[") {
		return usagef("--endpoints %s: want one host:port; an IPv6 address goes in brackets, e.g. --endpoints [::1]:7420", e)
	}
	if err != nil {
		return usagef("--endpoints %s: want host:port, the node's gRPC address (default port 7420), e.g. --endpoints %s",
			e, net.JoinHostPort(strings.Trim(e, "[]"), "7420"))
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return usagef("--endpoints %s: port %q is not a number in 1..65535", e, port)
	}
	_ = host // empty: this machine, as net.Dial reads it
	return nil
}

// positional returns an argument check that wants exactly the named
// arguments, each non-empty, and each of a kind argChecks knows of the
// shape the API accepts.
func positional(names ...string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) != len(names) {
			if len(names) == 0 {
				return usagef("takes no arguments, got %q", strings.Join(args, " "))
			}
			return usagef("want arguments %s, got %d", strings.Join(names, " "), len(args))
		}
		for i, v := range args {
			if v == "" {
				return usagef("%s: must not be empty", names[i])
			}
			if check := argChecks[names[i]]; check != nil {
				if err := check(names[i], v); err != nil {
					return usagef("%s %s: %s", names[i], quoteArg(v), fsmProblem(err))
				}
			}
		}
		return nil
	}
}

// flagChecks are the API's own checks (package fsm) of the flags that
// carry a name, an id or a text, run before any call when the flag is
// given (not empty: a missing required flag is the command's to report).
var flagChecks = map[string]func(field, v string) error{
	"process-id":  fsm.ValidateProcessID,
	"description": fsm.ValidateDescription,
	"semaphore":   fsm.ValidateName,     // run
	"lock":        fsm.ValidateLockName, // run
	"prefix":      fsm.ValidateLockName, // lock list
}

// checkFlagShapes runs flagChecks on the flags of cmd that were given.
func checkFlagShapes(cmd *cobra.Command) error {
	var err error
	cmd.LocalFlags().VisitAll(func(f *pflag.Flag) {
		check := flagChecks[f.Name]
		if err != nil || check == nil || !f.Changed || f.Value.String() == "" {
			return
		}
		if e := check(f.Name, f.Value.String()); e != nil {
			err = flagError(cmd, f.Name, "%s", fsmProblem(e))
		}
	})
	return err
}

// argChecks are the API's own checks (package fsm) of the arguments that
// name things, so that a malformed one is refused before any call, in the
// words the server would use.
var argChecks = map[string]func(field, v string) error{
	"NAMESPACE":  fsm.ValidateName,
	"SEMAPHORE":  fsm.ValidateName,
	"WAIT_GROUP": fsm.ValidateName,
	"BARRIER":    fsm.ValidateName,
	"LOCK":       fsm.ValidateLockName,
}

// optional wants at most one argument, named name.
func optional(name string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) > 1 {
			return usagef("want at most one argument %s, got %d", name, len(args))
		}
		return nil
	}
}

// metadataFlag registers a repeatable --metadata key=value flag.
func metadataFlag(fs *pflag.FlagSet, p *[]string, what string) {
	fs.StringArrayVar(p, "metadata", nil, what+" metadata as key=value (repeatable; the value may contain '=' and ',')")
}

// parseMetadata turns --metadata key=value pairs into a map (nil when
// there are none), checked against the API's bounds (fsm.ValidateMetadata).
func parseMetadata(pairs []string) (map[string]string, error) {
	if len(pairs) == 0 {
		return nil, nil
	}
	m := make(map[string]string, len(pairs))
	for _, kv := range pairs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return nil, usagef("--metadata %s: want key=value", quoteArg(kv))
		}
		if k == "" {
			return nil, usagef("--metadata %s: empty key", quoteArg(kv))
		}
		if _, dup := m[k]; dup {
			return nil, usagef("--metadata %s: key %q given twice", quoteArg(kv), k)
		}
		m[k] = v
	}
	if err := fsm.ValidateMetadata("metadata", m); err != nil {
		return nil, usagef("--metadata: %s", fsmProblem(err))
	}
	return m, nil
}

// listFlags are --limit and --page-token of List* commands.
type listFlags struct {
	limit int32
	token string
}

func (l *listFlags) register(fs *pflag.FlagSet) {
	fs.Int32Var(&l.limit, "limit", 0, fmt.Sprintf("page size, 1..%d (0 = the server's default, %d)", fsm.MaxPageSize, fsm.DefaultPageSize))
	fs.StringVar(&l.token, "page-token", "", "resume from this token (printed by the previous page)")
}

func (l *listFlags) check(cmd *cobra.Command) error {
	if l.limit < 0 || l.limit > fsm.MaxPageSize {
		return flagError(cmd, "limit", "must be 0..%d (0: the server's default, %d)", fsm.MaxPageSize, fsm.DefaultPageSize)
	}
	return nil
}

// changed reports whether any of the named flags was given.
func changed(cmd *cobra.Command, names ...string) bool {
	for _, n := range names {
		if cmd.Flags().Changed(n) {
			return true
		}
	}
	return false
}

// clients are what a command calls: the Go client (client/), which finds
// the leader, follows it across elections and retries what is safe to
// retry, exposed as both gRPC service interfaces.
type clients struct {
	api     pb.GrackleServiceClient
	cluster pb.ClusterServiceClient
	client  *client.Client
}

// client returns the command's Go client, connecting on first use. It is
// closed when the command ends.
func (a *app) client(ctx context.Context) (*client.Client, error) {
	if a.cli != nil {
		return a.cli, nil
	}
	cli, err := client.New(ctx, a.clientConfig())
	if err != nil {
		return nil, err
	}
	a.cli = cli
	return cli, nil
}

// clientConfig is the Go client's configuration for the client flags.
func (a *app) clientConfig() client.Config {
	return client.Config{
		Endpoints: a.endpoints,
		// First contact may take the whole call deadline (nodes that are
		// still starting); the call's context bounds it too.
		DialTimeout: a.timeout,
		// One call's retries end with its deadline (--timeout).
		RetryTimeout: -1,
		Logger:       a.logger(),
		TLS:          a.tls,
		Token:        a.token,
		Dialer:       a.sniffer.dial,
	}
}

// logger writes the client's warnings to stderr, one line each, unless
// --quiet.
func (a *app) logger() hclog.Logger {
	if a.quiet {
		return hclog.NewNullLogger()
	}
	return hclog.New(&hclog.LoggerOptions{Name: "grackle", Level: hclog.Warn, Output: a.stderr, DisableTime: true})
}

func (a *app) closeClient() {
	if a.cli != nil {
		a.cli.Close()
		a.cli = nil
	}
}

// cmdContext is the command's context (cancelled on SIGINT/SIGTERM).
func cmdContext(cmd *cobra.Command) context.Context {
	if ctx := cmd.Context(); ctx != nil {
		return ctx
	}
	return context.Background()
}

// call runs fn through the Go client with a deadline of --timeout plus
// extra (the server-side wait of an acquire). Errors become one-line exit
// errors; a first contact that no endpoint answered says where to look.
func call[T any](a *app, cmd *cobra.Command, extra time.Duration, fn func(context.Context, clients) (T, error)) (T, error) {
	var zero T
	ctx := cmdContext(cmd)
	cctx, cancel := context.WithTimeout(ctx, a.timeout+extra)
	defer cancel()
	a.sniffer.setCancel(cancel)
	cli, err := a.client(cctx)
	if err != nil {
		return zero, a.connectError(ctx, err)
	}
	resp, err := fn(cctx, clients{api: cli, cluster: cli, client: cli})
	if err != nil {
		return zero, a.callError(ctx, err)
	}
	return resp, nil
}

// callError is callError, unless an endpoint turned out to be an HTTP
// port or a port that speaks no gRPC: then that is the error (exit 2),
// whatever the call saw.
func (a *app) callError(parent context.Context, err error) error {
	if ep := a.sniffer.found(); ep != "" {
		return usagef("--endpoints %s answered HTTP/1: that is a node's HTTP port (/metrics, /ui/); give its gRPC port (default 7420)", ep)
	}
	if ep := a.sniffer.foundSilent(); ep != "" {
		return usagef("--endpoints %s closed every connection without a word: that is no node's gRPC port (a node's Raft port, default 7421?), or the node refuses this host more connections (--max-connections-per-address); give its gRPC port (default 7420)", ep)
	}
	return callError(parent, err)
}

// connectError is callError for a first contact (client.New) that failed:
// when no endpoint answered, the line says where to look.
func (a *app) connectError(parent context.Context, err error) error {
	err = a.callError(parent, err)
	var ee *exitError
	if errors.As(err, &ee) && ee.callErr != nil && status.Code(ee.callErr) == codes.Unavailable {
		ee.note = "is a node running there? check --endpoints or GRACKLE_ENDPOINTS"
	}
	return err
}

// leaseGone reports whether a command's error is the server saying the
// lease does not exist (apierr.LeaseGone: NotFound with the reason
// LEASE_NOT_FOUND or NAMESPACE_NOT_FOUND; never the message text).
func leaseGone(err error) bool {
	var ee *exitError
	return errors.As(err, &ee) && apierr.LeaseGone(ee.callErr)
}

// sortedKeys returns m's keys in order.
func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// quietFlag registers --quiet (no status line, no client warnings).
func (a *app) quietFlag(cmd *cobra.Command) {
	cmd.Flags().BoolVarP(&a.quiet, "quiet", "q", false, "no status line while waiting, no client warnings on stderr")
}

// statusLine is the status line of a waiting command: on stdout when it is
// a terminal, unless --quiet.
func (a *app) statusLine() *statusline.Line {
	if a.quiet || a.isTerminal == nil || !a.isTerminal(a.stdout) {
		return nil
	}
	return statusline.New(a.stdout, true)
}
